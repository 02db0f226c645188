import math

import pytest
import torch

from trainer.loss import aggregate, group_advantages, group_std, grpo_loss, k3_kl


def test_group_advantages_hand_values():
    r = torch.tensor([1.0, 0.0, 0.0, 1.0, 0.5, 0.5])
    g = torch.tensor([0, 0, 0, 0, 1, 1])
    adv, std = group_advantages(r, g, epsilon=1e-8)
    s = math.sqrt(1 / 3)  # sample std of [1, 0, 0, 1]
    a = 0.5 / (s + 1e-8)
    assert adv.tolist() == pytest.approx([a, -a, -a, a, 0.0, 0.0], abs=1e-6)
    assert std.tolist() == pytest.approx([s] * 4 + [0.0, 0.0], abs=1e-6)
    adv_dr, _ = group_advantages(r, g, scale=False)
    assert adv_dr.tolist() == pytest.approx([0.5, -0.5, -0.5, 0.5, 0.0, 0.0])


def test_group_advantages_uneven_groups_and_singletons():
    # a group thinned by infra errors to 3 items, and one reduced to a single item
    r = torch.tensor([0.2, 0.5, 0.8, 0.9])
    g = torch.tensor([7, 7, 7, 3])
    adv, _ = group_advantages(r, g, epsilon=0.0)
    assert adv.tolist() == pytest.approx([-1.0, 0.0, 1.0, 0.0], abs=1e-6)  # std of [.2,.5,.8] = .3
    assert group_std([0.2, 0.5, 0.8]) == pytest.approx(0.3)
    assert group_std([1.0]) == 0.0


def _lp(ratio):
    return torch.tensor([[math.log(ratio)]]), torch.zeros(1, 1)


@pytest.mark.parametrize(
    "adv, ratio, loss, clipped_low, clipped_high, grad",
    [
        (1.0, 1.5, -1.2, 0, 1, 0.0),  # positive advantage, ratio above 1+eps: clipped, no gradient
        (-1.0, 0.5, 0.8, 1, 0, 0.0),  # negative advantage, ratio below 1-eps: clipped, no gradient
        (1.0, 0.5, -0.5, 0, 0, -0.5),  # positive advantage, ratio below: unclipped branch is the min
        (-1.0, 1.5, 1.5, 0, 0, 1.5),  # negative advantage, ratio above: unclipped (pessimistic) branch
        (2.0, 1.1, -2.2, 0, 0, -2.2),  # inside the trust region
    ],
)
def test_clipped_surrogate_both_sides(adv, ratio, loss, clipped_low, clipped_high, grad):
    logp, old = _lp(ratio)
    logp.requires_grad_(True)
    out = grpo_loss(logp, old, torch.tensor([adv]), torch.ones(1, 1), clip_ratio=0.2)
    assert float(out.loss.detach()) == pytest.approx(loss, abs=1e-6)
    assert out.clip_low_fraction == clipped_low
    assert out.clip_high_fraction == clipped_high
    out.loss.backward()
    # d/dlogp of -ratio*A is -ratio*A; zero on the clipped branch
    assert float(logp.grad) == pytest.approx(grad, abs=1e-6)


def test_clip_higher():
    logp, old = _lp(1.25)
    out = grpo_loss(logp, old, torch.tensor([1.0]), torch.ones(1, 1), clip_ratio=0.2, clip_ratio_high=0.28)
    assert float(out.loss) == pytest.approx(-1.25)
    assert out.clip_fraction == 0
    out = grpo_loss(logp, old, torch.tensor([1.0]), torch.ones(1, 1), clip_ratio=0.2)
    assert float(out.loss) == pytest.approx(-1.2)


def test_k3_kl_hand_value_and_weight():
    logp = torch.tensor([[-1.0]])
    ref = torch.tensor([[-2.0]])
    expected = math.exp(-1.0) - (-1.0) - 1.0  # exp(ref-logp) - (ref-logp) - 1
    assert float(k3_kl(logp, ref)) == pytest.approx(expected)
    assert float(k3_kl(logp, logp)) == 0.0
    out = grpo_loss(logp, logp.clone(), torch.tensor([0.0]), torch.ones(1, 1), ref_logp=ref, kl_coeff=0.1)
    assert float(out.loss) == pytest.approx(0.1 * expected)
    assert out.kl == pytest.approx(expected)
    # kl_coeff 0 ignores the reference entirely
    out0 = grpo_loss(logp, logp.clone(), torch.tensor([0.0]), torch.ones(1, 1), ref_logp=ref, kl_coeff=0.0)
    assert float(out0.loss) == 0.0 and out0.kl == 0.0


def test_masked_aggregation_per_loss_type():
    per_tok = torch.tensor([[1.0, 2.0, 3.0], [4.0, 100.0, 100.0]])
    mask = torch.tensor([[1, 1, 1], [1, 0, 0]])
    assert float(aggregate(per_tok, mask, "grpo", 4)) == pytest.approx((2.0 + 4.0) / 2)
    assert float(aggregate(per_tok, mask, "dapo", 4)) == pytest.approx(10.0 / 4)
    assert float(aggregate(per_tok, mask, "dr_grpo", 4)) == pytest.approx(10.0 / (2 * 4))


@pytest.mark.parametrize("loss_type", ["grpo", "dapo", "dr_grpo"])
def test_micro_batches_add_up_to_the_full_batch(loss_type):
    torch.manual_seed(0)
    B, T = 6, 5
    logp = -torch.rand(B, T)
    old = logp + 0.3 * torch.randn(B, T)
    ref = logp + 0.2 * torch.randn(B, T)
    adv = torch.randn(B)
    mask = (torch.rand(B, T) > 0.3).float()
    mask[:, 0] = 1
    kw = dict(kl_coeff=0.04, loss_type=loss_type, max_completion_length=8)
    full = grpo_loss(logp, old, adv, mask, ref_logp=ref, **kw).loss
    n_seqs, n_tok = float(B), float(mask.sum())
    parts = sum(
        grpo_loss(logp[s], old[s], adv[s], mask[s], ref_logp=ref[s], num_seqs=n_seqs, num_tokens=n_tok, **kw).loss
        for s in (slice(0, 2), slice(2, 6))
    )
    assert float(parts) == pytest.approx(float(full), rel=1e-5)


def test_ratio_one_gives_policy_gradient():
    # num_iterations == 1: old = logp.detach(), ratio 1, grad = -A / len per token (grpo)
    logp = torch.tensor([[-0.5, -0.7], [-0.1, -0.2]], requires_grad=True)
    adv = torch.tensor([1.0, -2.0])
    mask = torch.tensor([[1.0, 1.0], [1.0, 0.0]])
    out = grpo_loss(logp, logp.detach(), adv, mask)
    out.loss.backward()
    assert logp.grad.flatten().tolist() == pytest.approx([-0.25, -0.25, 1.0, 0.0])


@pytest.mark.parametrize("temperature,start", [(0.7, 0), (1.0, 2), (0.0, 1)])
def test_selective_log_softmax_matches_autograd_values_and_gradients(temperature, start):
    # the hand-written backward against autograd's own log_softmax + gather, in float64, on a
    # [B, L, V] logits tensor with positions before `start` and after start+T that it must ignore
    from trainer.logprobs import selective_log_softmax

    g = torch.Generator().manual_seed(0)
    B, T, V = 3, 4, 11
    logits = torch.randn(B, start + T + 1, V, generator=g, dtype=torch.float64, requires_grad=True)
    targets = torch.randint(0, V, (B, T), generator=g)
    w = torch.randn(B, T, generator=g, dtype=torch.float64)  # an arbitrary upstream gradient
    t = temperature if temperature > 0 else 1.0
    ref = torch.log_softmax(logits[:, start : start + T] / t, -1).gather(-1, targets.unsqueeze(-1)).squeeze(-1)
    (ref_grad,) = torch.autograd.grad((ref * w).sum(), logits)
    got = selective_log_softmax(logits, targets, start, temperature)
    assert got.dtype == torch.float32 and got.shape == (B, T)
    assert torch.allclose(got.double(), ref, atol=1e-6)
    (grad,) = torch.autograd.grad((got.double() * w).sum(), logits)
    assert torch.allclose(grad, ref_grad, atol=1e-6)
    assert torch.all(grad[:, :start] == 0) and torch.all(grad[:, start + T :] == 0)
    before = logits.detach().clone()
    selective_log_softmax(logits, targets, start, temperature).sum().backward()
    assert torch.equal(logits.detach(), before)  # the in-place work of forward and backward is on copies


def test_selective_log_softmax_bf16_logits_give_bf16_gradient():
    from trainer.logprobs import selective_log_softmax

    logits = torch.randn(2, 3, 7, dtype=torch.bfloat16, requires_grad=True)
    targets = torch.tensor([[1, 2], [3, 4]])
    lp = selective_log_softmax(logits, targets, 0, 0.5)
    ref = torch.log_softmax(logits[:, :2].float() / 0.5, -1).gather(-1, targets.unsqueeze(-1)).squeeze(-1)
    assert torch.allclose(lp, ref, atol=1e-5)
    lp.sum().backward()
    assert logits.grad.dtype == torch.bfloat16 and torch.all(logits.grad[:, 2] == 0)
