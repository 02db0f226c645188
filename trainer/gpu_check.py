"""The trainer's GPU check (``bench/gpu_check.sh``): a few GRPO steps of the bundled model in bf16,
with LoRA and with full fine-tuning, with ``generate`` and (when importable) vLLM; prints step
time, tokens/s, peak GPU memory and the held-out change per run. Nothing is reached over the
network: the reward is local (``trainer.reward_fns.boxed_integer_match`` on the bundled
arithmetic, plus a small format term), so no reward server or hub access is needed.

``--dry`` runs the same path on the CPU for CI: argument parsing, model load, one step with
``generate`` per mode, and the table.
"""

from __future__ import annotations

import argparse
import json
import statistics
import sys
import time
import warnings
from pathlib import Path
from typing import Any

BUDGET_S = 450.0  # the script must finish in under 8 minutes: later runs are skipped past this


def dry_signal(completions: list[str], **_: Any) -> list[float]:
    """Dry mode only: the share of digit characters, a graded reward even random text varies on."""
    return [sum(ch.isdigit() for ch in c) / max(len(c), 1) for c in completions]


def parse_args(argv: list[str] | None = None) -> argparse.Namespace:
    ap = argparse.ArgumentParser(prog="gpu_check.sh", description=__doc__.split("\n\n")[0])
    ap.add_argument("--dry", action="store_true", help="CPU dry run: model load and one step per mode")
    ap.add_argument("--model", default="smollm2", help="model dir or 'smollm2' (the bundled GGUF)")
    ap.add_argument("--modes", default="lora,full", help="comma list of lora | full")
    ap.add_argument("--backends", default="generate,vllm", help="comma list of generate | vllm (vllm: if importable)")
    ap.add_argument("--steps", type=int, default=None, help="steps per run (default 8; 1 with --dry)")
    ap.add_argument("--eval-prompts", type=int, default=None, help="held-out prompts (default 64; 2 with --dry)")
    ap.add_argument("--state-dir", default="runs/gpu_check")
    ap.add_argument("--json", default=None, help="also write the table as JSON here")
    a = ap.parse_args(argv)
    modes = [m.strip() for m in a.modes.split(",") if m.strip()]
    backends = [b.strip() for b in a.backends.split(",") if b.strip()]
    bad = [m for m in modes if m not in ("lora", "full")] + [b for b in backends if b not in ("generate", "vllm")]
    if bad or not modes or not backends:
        ap.error(f"unknown or empty --modes/--backends entries: {bad or 'none given'}")
    if a.steps is not None and a.steps < 1:
        ap.error("--steps must be >= 1")
    a.modes, a.backends = modes, backends
    a.steps = a.steps or (1 if a.dry else 8)
    a.eval_prompts = a.eval_prompts if a.eval_prompts is not None else (2 if a.dry else 64)
    return a


def run_config(a: argparse.Namespace, mode: str, backend: str) -> dict[str, Any]:
    gpu = not a.dry
    cfg: dict[str, Any] = {
        "model": a.model, "tasks": "arithmetic", "arith_difficulty": "easy", "num_train_tasks": 512,
        "num_eval_tasks": a.eval_prompts, "max_steps": a.steps, "eval_every": 0, "save_every": 0,
        "export_final": False, "progress_bar": False, "baseline_eval": True, "eval_group_prompts": 0,
        "reward_url": [], "temperature": 0.7, "min_group_std": 0.05, "kl_coeff": 0.0,
        "reward_sources": [{"name": "answer", "fn": "trainer.reward_fns:boxed_integer_match"},
                           {"name": "format", "fn": "trainer.reward_fns:boxed_format", "weight": 0.1}],
        "generation_backend": backend, "device": "cuda" if gpu else "cpu",
        "state_dir": str(Path(a.state_dir) / f"{mode}-{backend}"),
        "group_size": 8 if gpu else 4, "prompts_per_step": 16 if gpu else 1,
        "max_completion_length": 128 if gpu else 8, "micro_batch_size": 32 if gpu else 2,
    }
    if not gpu:  # a random tiny model never boxes an answer: a graded toy term gives the dry step an update
        cfg["reward_sources"] = cfg["reward_sources"] + [{"name": "dry", "fn": "trainer.gpu_check:dry_signal"}]
        cfg["min_group_std"] = 0.0
    if mode == "lora":  # frozen bf16 base, fp32 adapters
        cfg.update(lora={"enabled": True, "r": 16, "alpha": 32}, learning_rate=3e-4,
                   dtype="bfloat16" if gpu else "float32")
    else:  # fp32 master weights, bf16 autocast forward/backward
        cfg.update(learning_rate=1e-5, dtype="auto" if gpu else "float32")
    return cfg


def one_run(a: argparse.Namespace, mode: str, backend: str) -> dict[str, Any]:
    import torch

    from .config import load_config
    from .trainer import GRPOTrainer

    with warnings.catch_warnings():
        warnings.simplefilter("ignore", UserWarning)
        cfg = load_config(None, run_config(a, mode, backend))
    sd = Path(cfg.state_dir)
    if (sd / "metrics.jsonl").exists():
        (sd / "metrics.jsonl").unlink()
    if torch.cuda.is_available():
        torch.cuda.reset_peak_memory_stats()
    t0 = time.perf_counter()
    tr = GRPOTrainer(cfg)
    load_s = time.perf_counter() - t0
    recs: list[dict[str, Any]] = []
    tr.step_hook = lambda _tr, rec: recs.append(rec)
    try:
        res = tr.train()
    finally:
        tr.close()
    b = (res.get("baseline") or {}).get("reward_mean")
    f = (res.get("final") or {}).get("reward_mean")
    steady = recs[1:] or recs  # the first step pays for lazy kernels and allocator growth
    return {
        "mode": mode, "backend": tr.generator.name, "asked_backend": backend, "steps": len(recs),
        "updated_steps": sum(1 for r in recs if r["kept_seqs"] > 0 and r["grad_norm"] > 0),
        "load_s": load_s, "step_s": statistics.median(r["step_time_s"] for r in steady),
        "gen_share": statistics.median(r["gen_time_s"] / max(r["step_time_s"], 1e-9) for r in steady),
        "tokens_per_s": statistics.median(r["tokens_per_s"] for r in steady),
        "peak_gpu_mb": torch.cuda.max_memory_allocated() / 2**20 if torch.cuda.is_available() and not a.dry else None,
        "peak_rss_mb": recs[-1]["peak_mem_mb"] if a.dry else None,
        "baseline": b, "final": f, "change": None if b is None or f is None else f - b,
        "wall_s": time.perf_counter() - t0,
    }


def _f(x: Any, fmt: str) -> str:
    return "n/a" if x is None else format(x, fmt)


def table(rows: list[dict[str, Any]]) -> str:
    head = f"{'mode':5} {'backend':8} {'steps':>5} {'step s':>7} {'gen %':>6} {'tok/s':>8} {'peak GPU MB':>11} " \
           f"{'held-out':>15} {'change':>7} {'wall s':>7}"
    lines = [head, "-" * len(head)]
    for r in rows:
        lines.append(
            f"{r['mode']:5} {r['backend']:8} {r['steps']:>5} {_f(r['step_s'], '.2f'):>7} "
            f"{_f(r['gen_share'] * 100, '.0f'):>6} {_f(r['tokens_per_s'], '.0f'):>8} {_f(r['peak_gpu_mb'], '.0f'):>11} "
            f"{_f(r['baseline'], '.3f') + ' -> ' + _f(r['final'], '.3f'):>15} {_f(r['change'], '+.3f'):>7} "
            f"{_f(r['wall_s'], '.0f'):>7}")
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> int:
    a = parse_args(argv)
    import torch

    from .generation import vllm_available

    if not a.dry and not torch.cuda.is_available():
        print("gpu_check: no CUDA device (use --dry for the CPU path)", file=sys.stderr)
        return 2
    dev = "cpu (dry run)" if a.dry else torch.cuda.get_device_name(0)
    print(f"gpu_check: {dev}; torch {torch.__version__}; vLLM {'importable' if vllm_available() else 'not installed'};"
          f" model {a.model}; {a.steps} step(s) per run", flush=True)
    runs = [(m, b) for m in a.modes for b in a.backends if b == "generate" or (vllm_available() and not a.dry)]
    skipped = [(m, b) for m in a.modes for b in a.backends if (m, b) not in runs]
    t0 = time.perf_counter()
    rows: list[dict[str, Any]] = []
    for mode, backend in runs:
        if rows and time.perf_counter() - t0 > BUDGET_S:
            print(f"gpu_check: skipping {mode}/{backend}: past the {BUDGET_S:.0f}s budget", flush=True)
            continue
        print(f"gpu_check: {mode} / {backend} ...", flush=True)
        rows.append(one_run(a, mode, backend))
    print()
    print(table(rows))
    for m, b in skipped:
        print(f"(not run: {m} / {b}: " + ("vLLM is not importable here)" if not vllm_available() else "dry run)"))
    print(f"total {time.perf_counter() - t0:.0f}s")
    if a.json:
        Path(a.json).write_text(json.dumps({"device": dev, "runs": rows}, indent=1))
    return 0


if __name__ == "__main__":
    sys.exit(main())
