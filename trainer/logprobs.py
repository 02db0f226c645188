"""Selective log-softmax: ``log softmax(logits / temperature)[target]`` per position, with a
backward that writes the logits' gradient into one buffer, a row at a time.

Why by hand: the plain autograd form (``log_softmax`` per row, ``gather``, ``stack``) keeps a
``[T, vocab]`` log-softmax output per row and, in backward, builds a zero-filled gradient of the
whole ``[B, T, vocab]`` logits for *every* row (``select``'s backward) and adds them up: B full-size
fills and adds per pass, the largest avoidable cost of the update on CPU. TRL's answer
(``add_fused_lm_head``) recomputes the LM head in tiles; ours keeps the model's own forward (any
head, soft-capping or scaling included) and only replaces the softmax part. Liger's fused
cross-entropy is CUDA/Triton only. Checked against autograd's gradient in ``tests/trainer/test_loss.py``.
"""

from __future__ import annotations

import torch


class _SelectiveLogSoftmax(torch.autograd.Function):
    @staticmethod
    def forward(ctx, logits: torch.Tensor, targets: torch.Tensor, start: int, temperature: float) -> torch.Tensor:
        B, T = targets.shape
        out = torch.empty((B, T), dtype=torch.float32, device=logits.device)
        lse = torch.empty((B, T), dtype=torch.float32, device=logits.device)
        inv_t = 1.0 / temperature
        for i in range(B):  # one [T, vocab] fp32 temporary at a time
            x = logits[i, start : start + T].to(torch.float32, copy=True)
            if inv_t != 1.0:
                x.mul_(inv_t)
            lse[i] = torch.logsumexp(x, dim=-1)
            out[i] = x.gather(-1, targets[i].unsqueeze(-1)).squeeze(-1) - lse[i]
        ctx.save_for_backward(logits, targets, lse)
        ctx.start, ctx.inv_t = start, inv_t
        return out

    @staticmethod
    def backward(ctx, grad_out: torch.Tensor):  # type: ignore[override]
        logits, targets, lse = ctx.saved_tensors
        start, inv_t = ctx.start, ctx.inv_t
        B, T = targets.shape
        grad = torch.empty_like(logits)
        grad[:, :start].zero_()
        grad[:, start + T :].zero_()
        g = grad_out.float()
        for i in range(B):
            # d/dx [x_t/temp - lse(x/temp)] = (onehot(t) - softmax(x/temp)) / temp, times the incoming grad
            p = logits[i, start : start + T].to(torch.float32, copy=True)
            if inv_t != 1.0:
                p.mul_(inv_t)
            p.sub_(lse[i].unsqueeze(-1)).exp_()
            p.mul_(-(g[i] * inv_t).unsqueeze(-1))
            p.scatter_add_(-1, targets[i].unsqueeze(-1), (g[i] * inv_t).unsqueeze(-1))
            grad[i, start : start + T] = p
        return grad, None, None, None


def selective_log_softmax(logits: torch.Tensor, targets: torch.Tensor, start: int = 0,
                          temperature: float = 1.0) -> torch.Tensor:
    """``[B, T]`` fp32 log-probs of ``targets [B, T]`` under ``softmax(logits[:, start:start+T] / temperature)``
    (``logits [B, L, vocab]``, any float dtype; the gradient flows to ``logits``). ``temperature <= 0``
    (greedy sampling) scores the unscaled distribution."""
    return _SelectiveLogSoftmax.apply(logits, targets, start, float(temperature) if temperature > 0 else 1.0)
