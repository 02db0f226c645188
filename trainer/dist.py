"""Distributed helpers: the process group, rank facts and the few collectives the trainer uses.

Every helper is a no-op (returns its input) in a single process, so the training code reads the
same with and without torchrun.
"""

from __future__ import annotations

import atexit
import os

import torch
import torch.distributed as dist


def world_info() -> tuple[int, int, int]:
    """(rank, world_size, local_rank) from torchrun's environment."""
    return int(os.environ.get("RANK", 0)), int(os.environ.get("WORLD_SIZE", 1)), int(os.environ.get("LOCAL_RANK", 0))


def init(device: torch.device) -> bool:
    """Join torchrun's process group (NCCL on CUDA, gloo on CPU); False in a single process."""
    _, world, _ = world_info()
    if world <= 1:
        return False
    if not dist.is_initialized():
        backend = "nccl" if device.type == "cuda" else "gloo"
        dist.init_process_group(backend=backend)
        if backend == "gloo":
            # its threads must be joined before the interpreter exits: a gloo group left to
            # static destructors aborts the process now and then ("terminate called without
            # an active exception", SIGABRT after a finished run). Not NCCL: its destroy can
            # wait on a peer that died, and no GPU here shows it needs one
            atexit.register(_destroy)
    if device.type == "cuda":
        torch.cuda.set_device(device)
    return True


def _destroy() -> None:
    if dist.is_initialized():
        dist.destroy_process_group()


def active() -> bool:
    return dist.is_available() and dist.is_initialized() and dist.get_world_size() > 1


def _device() -> torch.device:
    return torch.device("cuda", torch.cuda.current_device()) if dist.get_backend() == "nccl" else torch.device("cpu")


def all_reduce(values: list[float], op: str = "sum") -> list[float]:
    """Element-wise sum (or max) of ``values`` over ranks, in float64."""
    if not active() or not values:
        return list(values)
    t = torch.tensor(values, dtype=torch.float64, device=_device())
    dist.all_reduce(t, op=dist.ReduceOp.SUM if op == "sum" else dist.ReduceOp.MAX)
    return t.tolist()


def barrier() -> None:
    if active():
        dist.barrier()


def gather_objects(rows: list) -> list:
    """Every rank's list concatenated in rank order (on every rank)."""
    if not active():
        return list(rows)
    out: list = [None] * dist.get_world_size()
    dist.all_gather_object(out, rows)
    return [r for part in out for r in part]
