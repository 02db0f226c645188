"""Memory and cost arithmetic for RLHF-style training (``grpo-train estimate``).

Model-state memory only (weights, gradients, optimizer): with mixed-precision Adam a *trained*
parameter costs 16 bytes (bf16 weight 2 + bf16 grad 2 + fp32 master 4 + Adam m 4 + v 4) and a
*frozen* one 2 bytes (bf16 weight). Activations, KV cache and framework overhead come on top.
"""

from __future__ import annotations

import json
import statistics
from dataclasses import dataclass
from pathlib import Path

TRAINED_BYTES = 16
FROZEN_BYTES = 2
GB = 1e9


@dataclass
class MemoryLine:
    label: str
    trained: float  # parameters
    frozen: float  # parameters
    note: str

    @property
    def bytes(self) -> float:
        return self.trained * TRAINED_BYTES + self.frozen * FROZEN_BYTES

    @property
    def gb(self) -> float:
        return self.bytes / GB


def algorithm_lines(params: float) -> list[MemoryLine]:
    """The seed figures: PPO trains policy + critic and holds reference + reward model frozen."""
    p = params
    return [
        MemoryLine("PPO", 2 * p, 2 * p, "policy + value model trained; reference + reward model frozen"),
        MemoryLine("DPO", p, p, "policy trained; reference frozen"),
        MemoryLine("DPO", p, 0, "with precomputed reference log-probs"),
        MemoryLine("GRPO", p, 0, "with KL off (kl_coeff=0: no reference model)"),
        MemoryLine("GRPO", p, p, "with KL on (frozen reference copy)"),
    ]


def lora_lines(params: float, lora_params: float, kl_on: bool = True) -> list[MemoryLine]:
    """GRPO with LoRA: adapters trained, base frozen; the reference is the base with adapters off."""
    return [
        MemoryLine(
            "GRPO+LoRA",
            lora_params,
            params,
            "adapters trained, base frozen; reference = adapters disabled (no copy)"
            + ("" if kl_on else ", KL off"),
        )
    ]


def fmt_params(n: float) -> str:
    for unit, div in (("T", 1e12), ("B", 1e9), ("M", 1e6), ("K", 1e3)):
        if n >= div:
            return f"{n / div:.4g}{unit}"
    return f"{n:.0f}"


def format_lines(lines: list[MemoryLine]) -> list[str]:
    return [f"  {ln.label:<10} {ln.gb:8.1f} GB  {ln.note}" for ln in lines]


def count_model_params(model: str, gguf_file: str | None, lora_r: int, target_modules: list[str]) -> tuple[int, int]:
    """(total parameters, LoRA parameters) of a model, built on the meta device (no weights read)."""
    import torch
    from transformers import AutoConfig, AutoModelForCausalLM

    from .model import resolve_model

    path, gguf = resolve_model(model, gguf_file)
    kwargs = {"gguf_file": gguf} if gguf else {}
    cfg = AutoConfig.from_pretrained(path, **kwargs)
    with torch.device("meta"):
        m = AutoModelForCausalLM.from_config(cfg)
    total = sum(p.numel() for p in m.parameters())
    lora = 0
    for name, mod in m.named_modules():
        if isinstance(mod, torch.nn.Linear) and any(name.split(".")[-1] == t for t in target_modules):
            lora += lora_r * (mod.in_features + mod.out_features)
    return total, lora


def seconds_per_step_from_metrics(path: str | Path) -> float:
    """Median wall seconds per training step recorded in a run's metrics.jsonl."""
    times = []
    with open(path) as f:
        for line in f:
            rec = json.loads(line)
            if rec.get("kind") == "train" and "step_time_s" in rec:
                times.append(float(rec["step_time_s"]))
    if not times:
        raise ValueError(f"{path}: no train steps with step_time_s")
    return statistics.median(times)


def cost_usd(steps: int, seconds_per_step: float, price_per_hour: float, num_gpus: int = 1) -> float:
    return steps * seconds_per_step / 3600.0 * price_per_hour * num_gpus
