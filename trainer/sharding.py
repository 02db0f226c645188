"""FSDP2 (``torch.distributed.fsdp.fully_shard``): parameters, gradients and optimizer state
sharded over the ranks of a torchrun job, the role ZeRO-3 plays in DeepSpeed (so DeepSpeed is
not needed). Each decoder layer is one FSDP unit, the root (embeddings, final norm, LM head)
another; ``MixedPrecisionPolicy`` all-gathers parameters in ``fsdp_param_dtype`` and reduces
gradients in float32 while the sharded master weights stay float32.

Collectives: every forward and backward of an FSDP unit all-gathers, so every rank must run the
same number of passes. The trainer pads its log-prob and update passes to the largest count over
ranks; generation runs with every unit unsharded and kept so (:func:`gathered`), so it makes no
collective call and ranks may stop at different lengths.
"""

from __future__ import annotations

import contextlib
from collections.abc import Iterator

import torch


def decoder_layers(model: torch.nn.Module) -> list[torch.nn.Module]:
    """The repeated transformer blocks (one FSDP unit each): the children of the first
    ``ModuleList`` whose items are all the same class (``model.model.layers`` in HF Llama/Qwen)."""
    for m in model.modules():
        if isinstance(m, torch.nn.ModuleList) and len(m) > 0 and len({type(x) for x in m}) == 1:
            return list(m)
    return []


def shard(model: torch.nn.Module, device: torch.device, param_dtype: torch.dtype | None) -> torch.nn.Module:
    """Apply ``fully_shard`` per decoder layer and at the root, on a 1-D mesh over every rank."""
    import torch.distributed as dist
    from torch.distributed.device_mesh import init_device_mesh
    from torch.distributed.fsdp import MixedPrecisionPolicy, fully_shard

    mesh = init_device_mesh(device.type, (dist.get_world_size(),))
    mp = MixedPrecisionPolicy(param_dtype=param_dtype, reduce_dtype=torch.float32)
    # under LoRA the root is the wrapped transformer: peft's generate() and forward() both call
    # its forward, and FSDP wants every forward to enter through the root
    root = model.get_base_model() if hasattr(model, "get_base_model") else model
    for layer in decoder_layers(root):
        fully_shard(layer, mesh=mesh, mp_policy=mp)
    fully_shard(root, mesh=mesh, mp_policy=mp)
    return model


def fsdp_modules(model: torch.nn.Module) -> list[torch.nn.Module]:
    from torch.distributed.fsdp import FSDPModule

    return [m for m in model.modules() if isinstance(m, FSDPModule)]


def is_sharded(model: torch.nn.Module) -> bool:
    return bool(fsdp_modules(model))


@contextlib.contextmanager
def gathered(model: torch.nn.Module) -> Iterator[None]:
    """Every FSDP unit unsharded for the duration (one all-gather each, on every rank together),
    so forwards inside make no collective call: what ``generate`` needs, whose step count differs
    between ranks. A no-op for a model that is not sharded."""
    mods = fsdp_modules(model)
    if not mods:
        yield
        return
    for m in mods:
        m.set_reshard_after_forward(False, recurse=False)
        m.unshard()
    try:
        yield
    finally:
        for m in mods:
            m.reshard()
            # fully_shard's defaults: True for the units, False for the root (the outermost unit,
            # whose parameters backward needs again at once)
            m.set_reshard_after_forward(m is not mods[0], recurse=False)


def set_gradient_sync(model: torch.nn.Module, sync: bool) -> None:
    """Reduce-scatter gradients in this backward (True) or accumulate them locally (False): the
    FSDP twin of DDP's ``no_sync``."""
    for m in fsdp_modules(model):
        m.set_requires_gradient_sync(sync, recurse=False)


def full_tensor(t: torch.Tensor) -> torch.Tensor:
    """A DTensor's whole value (a collective), or the tensor itself."""
    return t.full_tensor() if hasattr(t, "full_tensor") else t
