"""GRPO objective: group advantages, clipped surrogate, k3 KL, masked aggregation.

Shapes: ``logp``, ``old_logp``, ``ref_logp``, ``mask`` are ``[B, T]`` (completion tokens only,
``mask`` 1 on real tokens including the EOS that ended the completion); ``advantages`` is ``[B]``.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Literal

import torch

LossType = Literal["grpo", "dr_grpo", "dapo"]
Scaling = Literal["group", "batch", "none"]
ISLevel = Literal["token", "sequence"]


def group_advantages(
    rewards: torch.Tensor,
    group_ids: torch.Tensor,
    epsilon: float = 1e-8,
    scale: Scaling | bool = "group",
    batch_std: float | None = None,
) -> tuple[torch.Tensor, torch.Tensor]:
    """``A_i = (r_i - mean(r_g)) / (s + epsilon)`` for every group ``g``.

    ``scale`` picks ``s`` (TRL's ``scale_rewards``): ``group`` = the group's std (DeepSeekMath),
    ``batch`` = the std of every reward in the batch (``batch_std``, or of ``rewards`` when None:
    the trainer passes the std over all ranks), ``none`` = no division (Dr. GRPO). The centre is
    always the group mean. ``std`` is the sample (n-1) standard deviation, as in TRL; a group of
    one has std 0 and advantage 0. ``True``/``False`` mean ``group``/``none``.
    Returns ``(advantages [B], group std per item [B])``.
    """
    mode = {True: "group", False: "none"}.get(scale, scale) if isinstance(scale, bool) else scale
    if mode not in ("group", "batch", "none"):
        raise ValueError(f"scale must be group | batch | none, not {scale!r}")
    rewards = rewards.to(torch.float64)
    if mode == "batch" and batch_std is None:
        batch_std = float(rewards.std(unbiased=True)) if rewards.numel() > 1 else 0.0
    adv = torch.zeros_like(rewards)
    std_per_item = torch.zeros_like(rewards)
    for g in torch.unique(group_ids):
        idx = (group_ids == g).nonzero(as_tuple=True)[0]
        r = rewards[idx]
        mean = r.mean()
        std = r.std(unbiased=True) if r.numel() > 1 else torch.zeros((), dtype=r.dtype)
        a = r - mean
        if mode != "none":
            denom = (float(std) if mode == "group" else float(batch_std)) + epsilon
            a = a / denom if denom > 0 else torch.zeros_like(a)
        adv[idx] = a
        std_per_item[idx] = std
    return adv.to(torch.float32), std_per_item.to(torch.float32)


def batch_std(total: float, total_sq: float, n: float) -> float:
    """Sample std of ``n`` values from their sum and sum of squares (0 for fewer than two): the
    ``batch`` scale over every rank from three all-reduced numbers."""
    if n < 2:
        return 0.0
    mean = total / n
    return float(max(0.0, (total_sq - n * mean * mean) / (n - 1)) ** 0.5)


def group_std(rewards: list[float]) -> float:
    """Sample std of one group's rewards (0 for fewer than two)."""
    if len(rewards) < 2:
        return 0.0
    return float(torch.tensor(rewards, dtype=torch.float64).std(unbiased=True))


def truncated_is_weights(old_logp: torch.Tensor, rollout_logp: torch.Tensor, cap: float) -> torch.Tensor:
    """Truncated importance-sampling weights ``min(exp(old_logp - rollout_logp), cap)`` per token:
    the trainer's log-probs of the sampled tokens over the sampler's, capped (TIS)."""
    return torch.clamp(torch.exp(old_logp.float() - rollout_logp.float()), max=cap)


def k3_kl(logp: torch.Tensor, ref_logp: torch.Tensor) -> torch.Tensor:
    """Schulman's k3 estimator of KL(pi || ref): ``exp(ref - logp) - (ref - logp) - 1`` (>= 0)."""
    d = ref_logp - logp
    return torch.exp(d) - d - 1.0


@dataclass
class LossOutput:
    loss: torch.Tensor  # scalar, differentiable
    per_token: torch.Tensor  # [B, T] unaggregated per-token loss (masked positions included)
    kl: float  # masked token mean of k3 KL (0 without a reference)
    clip_fraction: float  # share of tokens where the clipped branch was taken
    clip_low_fraction: float
    clip_high_fraction: float
    ratio_mean: float
    num_tokens: int
    num_seqs: int


def aggregate(
    per_token: torch.Tensor,
    mask: torch.Tensor,
    loss_type: LossType,
    max_completion_length: int,
    num_seqs: float | None = None,
    num_tokens: float | None = None,
) -> torch.Tensor:
    """Masked reduction of a ``[B, T]`` per-token loss.

    - ``grpo``: mean over each sequence's tokens, then mean over sequences (DeepSeekMath).
    - ``dapo``: sum over all tokens / number of tokens in the batch (token-level).
    - ``dr_grpo``: sum over all tokens / (sequences * max_completion_length) (Dr. GRPO).

    ``num_seqs`` / ``num_tokens`` override the denominators so micro-batches and DDP ranks can
    be normalised by the whole batch: summing the micro-batch losses then equals the loss of
    the full batch.
    """
    m = mask.to(per_token.dtype)
    if num_seqs is None:
        num_seqs = float(per_token.shape[0])
    if loss_type == "grpo":
        seq_len = m.sum(dim=1).clamp(min=1.0)
        return ((per_token * m).sum(dim=1) / seq_len).sum() / max(num_seqs, 1.0)
    if loss_type == "dapo":
        if num_tokens is None:
            num_tokens = float(m.sum())
        return (per_token * m).sum() / max(num_tokens, 1.0)
    if loss_type == "dr_grpo":
        return (per_token * m).sum() / (max(num_seqs, 1.0) * max_completion_length)
    raise ValueError(f"unknown loss_type {loss_type!r}")


def grpo_loss(
    logp: torch.Tensor,
    old_logp: torch.Tensor,
    advantages: torch.Tensor,
    mask: torch.Tensor,
    *,
    clip_ratio: float = 0.2,
    clip_ratio_high: float | None = None,
    ref_logp: torch.Tensor | None = None,
    kl_coeff: float = 0.0,
    loss_type: LossType = "grpo",
    max_completion_length: int = 2048,
    num_seqs: float | None = None,
    num_tokens: float | None = None,
    importance_sampling_level: ISLevel = "token",
    is_weights: torch.Tensor | None = None,
) -> LossOutput:
    """Clipped surrogate ``-min(rho*A, clip(rho, 1-eps_lo, 1+eps_hi)*A) + beta*KL_k3`` per token.

    ``importance_sampling_level="sequence"`` is GSPO (Zheng et al. 2025, eq. 7): one ratio per
    sequence, ``s_i = exp(mean_t(logp - old_logp))`` over its masked tokens, clipped as a whole
    and broadcast to its tokens (gradient flows through every token's log-prob). ``is_weights``
    ``[B, T]`` (detached) multiplies the surrogate per token: the truncated importance-sampling
    correction ``min(pi_old_trainer / pi_rollout, C)`` for a rollout engine whose log-probs
    differ from the trainer's (Yao et al. 2025); the KL term is not weighted.
    """
    clip_hi = clip_ratio if clip_ratio_high is None else clip_ratio_high
    logp = logp.float()
    old_logp = old_logp.float()
    adv = advantages.float().unsqueeze(1)
    log_ratio = logp - old_logp
    if importance_sampling_level == "sequence":
        mf = mask.to(log_ratio.dtype)
        log_ratio = ((log_ratio * mf).sum(dim=1) / mf.sum(dim=1).clamp(min=1.0)).unsqueeze(1).expand_as(logp)
    elif importance_sampling_level != "token":
        raise ValueError(f"importance_sampling_level must be token | sequence, not {importance_sampling_level!r}")
    ratio = torch.exp(log_ratio)
    surr1 = ratio * adv
    surr2 = torch.clamp(ratio, 1.0 - clip_ratio, 1.0 + clip_hi) * adv
    per_token = -torch.minimum(surr1, surr2)
    if is_weights is not None:
        per_token = per_token * is_weights.detach().float()
    kl_tok = None
    if ref_logp is not None and kl_coeff > 0:
        kl_tok = k3_kl(logp, ref_logp.float())
        per_token = per_token + kl_coeff * kl_tok
    loss = aggregate(per_token, mask, loss_type, max_completion_length, num_seqs, num_tokens)

    with torch.no_grad():
        m = mask.bool()
        n = int(m.sum())
        denom = max(n, 1)
        clip_low = ((ratio < 1.0 - clip_ratio) & (adv < 0)) & m
        clip_high = ((ratio > 1.0 + clip_hi) & (adv > 0)) & m
        kl_mean = float((kl_tok * m).sum() / denom) if kl_tok is not None else 0.0
        return LossOutput(
            loss=loss,
            per_token=per_token,
            kl=kl_mean,
            clip_fraction=float((clip_low | clip_high).sum()) / denom,
            clip_low_fraction=float(clip_low.sum()) / denom,
            clip_high_fraction=float(clip_high.sum()) / denom,
            ratio_mean=float((ratio * m).sum() / denom),
            num_tokens=n,
            num_seqs=int(logp.shape[0]),
        )
