"""Checkpoints: trainable weights (full model or LoRA adapters), optimizer, scheduler, RNG,
step and data position, written atomically under ``<state_dir>/checkpoints/step-NNNNNN``.

Unsharded (one process, DDP): rank 0 writes ``trainable.safetensors`` and ``optimizer.pt``.
FSDP2: every rank writes its own shards of the trainable weights and optimizer state with
``torch.distributed.checkpoint`` into ``sharded/`` (no rank ever holds the whole state), rank 0
the scheduler and the state file; loading reads the shards back into the same layout."""

from __future__ import annotations

import json
import os
import random
import shutil
from pathlib import Path
from typing import Any

import numpy as np
import torch
from safetensors.torch import load_file, save_file

STATE_FILE = "trainer_state.json"


def rng_state() -> dict[str, Any]:
    st: dict[str, Any] = {
        "python": random.getstate(),
        "numpy": np.random.get_state(),
        "torch": torch.get_rng_state(),
    }
    if torch.cuda.is_available():
        st["cuda"] = torch.cuda.get_rng_state_all()
    return st


def set_rng_state(st: dict[str, Any]) -> None:
    random.setstate(st["python"])
    np.random.set_state(st["numpy"])
    torch.set_rng_state(st["torch"])
    if "cuda" in st and torch.cuda.is_available():
        torch.cuda.set_rng_state_all(st["cuda"])


def checkpoints_dir(state_dir: str | Path) -> Path:
    return Path(state_dir) / "checkpoints"


def list_checkpoints(state_dir: str | Path) -> list[Path]:
    d = checkpoints_dir(state_dir)
    if not d.is_dir():
        return []
    return sorted(p for p in d.iterdir() if p.is_dir() and p.name.startswith("step-") and (p / STATE_FILE).exists())


def latest_checkpoint(state_dir: str | Path) -> Path | None:
    cps = list_checkpoints(state_dir)
    return cps[-1] if cps else None


def tmp_path(state_dir: str | Path, step: int) -> Path:
    return checkpoints_dir(state_dir) / f".tmp-step-{step:06d}"


def write_rank_rng(tmp: Path, rank: int) -> None:
    torch.save(rng_state(), tmp / f"rng-rank{rank}.pt")


def write_main(
    tmp: Path,
    model: torch.nn.Module,
    optimizer: torch.optim.Optimizer,
    scheduler: Any,
    state: dict[str, Any],
) -> None:
    tensors = {n: p.detach().cpu().contiguous() for n, p in model.named_parameters() if p.requires_grad}
    save_file(tensors, str(tmp / "trainable.safetensors"))
    torch.save({"optimizer": optimizer.state_dict(), "scheduler": scheduler.state_dict()}, tmp / "optimizer.pt")
    (tmp / STATE_FILE).write_text(json.dumps(state, indent=1))


SHARDED_DIR = "sharded"


def _trainable_names(model: torch.nn.Module) -> set[str]:
    return {n for n, p in model.named_parameters() if p.requires_grad}


def write_sharded(tmp: Path, model: torch.nn.Module, optimizer: torch.optim.Optimizer) -> None:
    """Every rank: its shards of the trainable weights and of the optimizer state (DCP)."""
    import torch.distributed.checkpoint as dcp
    from torch.distributed.checkpoint.state_dict import get_state_dict

    msd, osd = get_state_dict(model, optimizer)
    keep = _trainable_names(model)
    dcp.save({"model": {k: v for k, v in msd.items() if k in keep}, "optim": osd},
             checkpoint_id=str(tmp / SHARDED_DIR))


def write_scheduler(tmp: Path, scheduler: Any, state: dict[str, Any]) -> None:
    torch.save({"scheduler": scheduler.state_dict()}, tmp / "optimizer.pt")
    (tmp / STATE_FILE).write_text(json.dumps(state, indent=1))


def load_sharded(path: Path, model: torch.nn.Module, optimizer: torch.optim.Optimizer, scheduler: Any,
                 rank: int) -> dict[str, Any]:
    """Every rank: read its shards back (the checkpoint's world size must match)."""
    import torch.distributed.checkpoint as dcp
    from torch.distributed.checkpoint.state_dict import StateDictOptions, get_state_dict, set_state_dict

    if not (path / SHARDED_DIR).is_dir():
        raise RuntimeError(f"checkpoint {path} is not sharded (written without FSDP); resume it with parallelism=ddp")
    msd, osd = get_state_dict(model, optimizer)
    keep = _trainable_names(model)
    state = {"model": {k: v for k, v in msd.items() if k in keep}, "optim": osd}
    dcp.load(state, checkpoint_id=str(path / SHARDED_DIR))
    set_state_dict(model, optimizer, model_state_dict=state["model"], optim_state_dict=state["optim"],
                   options=StateDictOptions(strict=False))
    opt = torch.load(path / "optimizer.pt", map_location="cpu", weights_only=False)
    scheduler.load_state_dict(opt["scheduler"])
    rng_file = path / f"rng-rank{rank}.pt"
    if rng_file.exists():
        set_rng_state(torch.load(rng_file, weights_only=False))
    return json.loads((path / STATE_FILE).read_text())


def finalize(state_dir: str | Path, tmp: Path, step: int, keep: int) -> Path:
    final = checkpoints_dir(state_dir) / f"step-{step:06d}"
    if final.exists():
        shutil.rmtree(final)
    os.replace(tmp, final)
    for old in list_checkpoints(state_dir)[:-keep]:
        shutil.rmtree(old, ignore_errors=True)
    return final


def load(
    path: Path,
    model: torch.nn.Module,
    optimizer: torch.optim.Optimizer,
    scheduler: Any,
    rank: int,
) -> dict[str, Any]:
    tensors = load_file(str(path / "trainable.safetensors"))
    params = dict(model.named_parameters())
    missing = [n for n, p in params.items() if p.requires_grad and n not in tensors]
    if missing:
        raise RuntimeError(f"checkpoint {path} lacks trainable parameters, e.g. {missing[:3]} (model/LoRA changed?)")
    with torch.no_grad():
        for n, t in tensors.items():
            if n not in params:
                raise RuntimeError(f"checkpoint {path} has parameter {n} the model does not")
            params[n].copy_(t.to(params[n].dtype))
    opt = torch.load(path / "optimizer.pt", map_location="cpu", weights_only=False)
    optimizer.load_state_dict(opt["optimizer"])
    scheduler.load_state_dict(opt["scheduler"])
    rng_file = path / f"rng-rank{rank}.pt"
    if rng_file.exists():
        set_rng_state(torch.load(rng_file, weights_only=False))
    return json.loads((path / STATE_FILE).read_text())
