"""Several weighted reward sources, scale_rewards modes, truncation masking, the soft overlong
penalty, GSPO and the flagged share: hand-computed values, then the same through a real step."""

from __future__ import annotations

import math
import warnings

import pytest
import torch

import trainer.trainer as trainer_mod
from trainer.config import ConfigError, RewardSource, TrainConfig, load_config
from trainer.loss import batch_std, group_advantages, grpo_loss, truncated_is_weights
from trainer.reward_fns import boxed_format, boxed_integer_match, soft_overlong, truncation_penalty
from trainer.rewards import CallableScorer, RewardMixer
from trainer.rollout import Sequence
from trainer.tasks import TaskItem
from trainer.trainer import GRPOTrainer

# ------------------------------------------------------------------------------ advantages


def test_scale_rewards_group_batch_none_hand_values():
    r = torch.tensor([1.0, 0.0, 1.0, 1.0])
    g = torch.tensor([0, 0, 1, 1])
    # centred by the group mean in every mode: [0.5, -0.5, 0, 0]
    none, _ = group_advantages(r, g, 1e-8, "none")
    assert none.tolist() == pytest.approx([0.5, -0.5, 0.0, 0.0])
    # group: group 0's sample std is sqrt(0.5); group 1 has std 0 -> 0 / eps = 0
    grp, _ = group_advantages(r, g, 1e-8, "group")
    assert grp.tolist() == pytest.approx([0.5 / math.sqrt(0.5), -0.5 / math.sqrt(0.5), 0.0, 0.0], abs=1e-6)
    # batch: sample std of [1, 0, 1, 1] = sqrt(0.75 / 3) = 0.5 -> [1, -1, 0, 0]
    bat, _ = group_advantages(r, g, 0.0, "batch")
    assert bat.tolist() == pytest.approx([1.0, -1.0, 0.0, 0.0], abs=1e-6)
    # the batch std from all-reduced sums (what the trainer does over ranks) is the same number
    assert batch_std(3.0, 3.0, 4.0) == pytest.approx(0.5)
    bat2, _ = group_advantages(r, g, 0.0, "batch", batch_std=0.25)
    assert bat2.tolist() == pytest.approx([2.0, -2.0, 0.0, 0.0], abs=1e-6)
    assert group_advantages(r, g, 1e-8, True)[0].tolist() == grp.tolist()
    assert group_advantages(r, g, 1e-8, False)[0].tolist() == none.tolist()


def test_scale_rewards_config_resolution():
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        assert TrainConfig().reward_scaling == "group"
        assert TrainConfig(loss_type="dr_grpo").reward_scaling == "none"
        assert TrainConfig(scale_rewards="batch").reward_scaling == "batch"
        assert TrainConfig(scale_rewards=False).reward_scaling == "none"
    with pytest.raises(ConfigError, match="scale_rewards"):
        load_config(None, {"scale_rewards": "rank"})


# ------------------------------------------------------------------------------ GSPO and TIS


def test_gspo_sequence_ratio_hand_values_and_gradient():
    # token log-ratios ln 1.1 and ln 1.3, advantage 1, clip 0.2
    old = torch.zeros(1, 2)
    logp = torch.tensor([[math.log(1.1), math.log(1.3)]], requires_grad=True)
    mask = torch.ones(1, 2)
    tok = grpo_loss(logp, old, torch.tensor([1.0]), mask, clip_ratio=0.2)
    # token level: -1.1 and -1.2 (1.3 clipped), mean over the sequence
    assert float(tok.loss.detach()) == pytest.approx(-(1.1 + 1.2) / 2)
    seq = grpo_loss(logp, old, torch.tensor([1.0]), mask, clip_ratio=0.2, importance_sampling_level="sequence")
    s = math.sqrt(1.1 * 1.3)  # exp(mean log-ratio) = geometric mean = 1.19583 < 1.2: unclipped
    assert float(seq.loss.detach()) == pytest.approx(-s, rel=1e-6)
    assert seq.clip_fraction == 0.0 and seq.ratio_mean == pytest.approx(s, rel=1e-6)
    seq.loss.backward()
    # d(-s)/dlogp_t = -s / 2 for each of the two tokens
    assert logp.grad.tolist()[0] == pytest.approx([-s / 2, -s / 2], rel=1e-6)
    # a sequence ratio outside the trust region is clipped as a whole: no gradient
    logp2 = torch.tensor([[math.log(1.5), math.log(1.5)]], requires_grad=True)
    out = grpo_loss(logp2, old, torch.tensor([1.0]), mask, importance_sampling_level="sequence")
    assert float(out.loss.detach()) == pytest.approx(-1.2) and out.clip_high_fraction == 1.0
    out.loss.backward()
    assert logp2.grad.abs().sum() == 0
    # the padded tail does not enter the sequence ratio
    logp3 = torch.tensor([[math.log(1.1), math.log(1.3), 5.0]])
    out3 = grpo_loss(logp3, torch.zeros(1, 3), torch.tensor([1.0]), torch.tensor([[1.0, 1.0, 0.0]]),
                     importance_sampling_level="sequence")
    assert float(out3.loss) == pytest.approx(-s, rel=1e-6)


def test_truncated_importance_sampling_weights():
    w = truncated_is_weights(torch.zeros(1, 2), torch.tensor([[math.log(2.0), -math.log(4.0)]]), cap=2.0)
    assert w.tolist()[0] == pytest.approx([0.5, 2.0])  # exp(0 - ln 2); exp(ln 4) = 4 capped at 2
    logp = torch.zeros(1, 2, requires_grad=True)
    out = grpo_loss(logp, logp.detach(), torch.tensor([1.0]), torch.ones(1, 2), is_weights=w, loss_type="dapo")
    assert float(out.loss.detach()) == pytest.approx(-(0.5 + 2.0) / 2)


# ------------------------------------------------------------------------------ reward sources


def test_soft_overlong_penalty_hand_values():
    # L_max 10, buffer 4: free up to 6 tokens, then linear to -penalty at 10
    kw = dict(max_completion_length=10, buffer=4)
    assert soft_overlong(["x"] * 4, completion_lengths=[3, 6, 7, 10], **kw) == pytest.approx([0, 0, -0.25, -1.0])
    assert soft_overlong(["x"], completion_lengths=[8], penalty=0.5, **kw) == pytest.approx([-0.25])


def test_truncation_penalty_is_length_neutral_below_the_cap():
    # the same lengths as above: only the cut-off completion pays, a long one that ended does not
    got = truncation_penalty(["x"] * 4, truncated=[False, False, False, True], penalty=0.5,
                             completion_lengths=[3, 6, 9, 10], max_completion_length=10)
    assert got == pytest.approx([0.0, 0.0, 0.0, -0.5])


def test_bundled_python_rewards():
    assert boxed_format(["a \\boxed{3}", "no", "\\boxed{1} \\boxed{2}"]) == [1.0, 0.0, 0.0]
    tasks = [{"answer": "12"}, {"answer": "12"}, {"answer": "1/2"}, {"answer": "-3"}]
    got = boxed_integer_match(["\\boxed{12}", "\\boxed{13}", "\\boxed{1/2}", "so \\boxed{-3}"], tasks=tasks)
    assert got == [1.0, 0.0, None, 1.0]


def _code_detail(flags: list[str]) -> dict:
    """A code item's detail as the server writes it (one test, passed), carrying `flags`."""
    return {"kind": "code", "syntax_ok": True, "runs": True, "passed": 1, "total": 1,
            "tests": [{"status": "passed", "time_s": 0.0, "message": ""}], "load_message": "",
            "extract_mode": "raw", "code_chars": 1, "wall_s": 0.0, "runner": "", "flags": flags}


def _server(items):
    """Reward 1 for ids ending in 0, infra error for ids ending in 3, else 0.25; flags on id 1."""
    out = []
    for it in items:
        k = int(it["id"].rsplit("-", 1)[1])
        if k == 3:
            out.append({"id": it["id"], "reward": None, "status": "infra_error", "detail": {}})
            continue
        flags = ["early_exit", "shadowed_name"] if k == 1 else []
        out.append({"id": it["id"], "reward": 1.0 if k == 0 else 0.25, "status": "ok", "detail": _code_detail(flags)})
    return out


def none_for_odd(completions, **_):
    return [None if i % 2 else 2.0 for i in range(len(completions))]


def test_mixer_weights_sources_hand_values():
    sources = [
        RewardSource(name="verifier", kind="server", weight=1.0),
        RewardSource(name="format", fn="trainer.reward_fns:boxed_format", weight=0.5),
        RewardSource(name="odd", fn="tests.trainer.test_reward_sources:none_for_odd", weight=-0.1),
        RewardSource(name="overlong", fn="trainer.reward_fns:soft_overlong", kwargs={"buffer": 4}),
    ]
    scorer = CallableScorer(_server)
    mix = RewardMixer(sources, scorer, max_completion_length=10)
    items = [{"id": f"t-{k}", "completion": c, "task": {"type": "math", "answer": "3"}}
             for k, c in enumerate(["\\boxed{3}", "3", "\\boxed{4}", "\\boxed{3}"])]
    got = mix.submit(items, [5, 8, 10, 2], [False, False, True, False]).result(timeout=10)
    scorer.close()
    # item 0: 1.0 + 0.5*1 - 0.1*2 + 0 = 1.3; item 1: 0.25 + 0 + None + 0.5*(-(8-6)/4 = -0.5) -> -0.25
    # item 2: 0.25 + 0.5 - 0.2 - 1.0 = -0.45; item 3: the server's infra error drops it
    assert [s.reward for s in got[:3]] == pytest.approx([1.3, -0.25, -0.45])
    assert got[1].sources == {"verifier": 0.25, "format": 0.0, "odd": None, "overlong": -0.5}
    assert not got[3].ok and got[3].reward is None
    assert got[1].flags == ["early_exit", "shadowed_name"] and got[0].flags == []


def test_python_only_sources_need_no_server(tiny_cfg):
    cfg = tiny_cfg(reward_sources=[{"name": "len", "fn": "trainer.reward_fns:length_penalty"}], reward_url=[])
    tr = GRPOTrainer(cfg)  # no scorer, no HTTP client
    assert tr.scorer is None
    rec = tr.train_step()
    assert rec["reward/len"] is not None and rec["reward/len"] == pytest.approx(rec["reward_mean"])
    tr.close()
    with pytest.raises(ConfigError, match="module:function"):
        load_config(None, {"reward_sources": [{"name": "x"}]})
    with pytest.raises(ConfigError, match="unique"):
        load_config(None, {"overlong_buffer": 4, "reward_sources": [{"name": "overlong", "fn": "a:b"}]})


# ------------------------------------------------------------------------------ through a step


def _fixed_rollouts(tr: GRPOTrainer, plan: dict[str, list[tuple[str, bool]]]):
    """Replace sampling with fixed completions per prompt: (text, truncated); the rest of the step
    (scoring, advantages, log-probs, forward/backward, optimizer) is the real one."""
    tok = tr.tokenizer
    eos = tok.eos_token_id

    def gen(items, n, temperature):
        rendered = tr._prompts(items)
        out = []
        for j, (it, ptxt) in enumerate(zip(items, rendered, strict=True)):
            pids = torch.tensor(tok(ptxt, add_special_tokens=False)["input_ids"])
            for text, trunc in plan[it.prompt][:n]:
                ids = tok(text, add_special_tokens=False)["input_ids"] + ([] if trunc else [eos])
                out.append(Sequence(pids, torch.tensor(ids), text, trunc, j))
        return out

    tr._gen = gen


def _spy_loss(monkeypatch):
    calls = []
    real = trainer_mod.grpo_loss

    def spy(logp, old, adv, mask, **kw):
        calls.append({"rows": int(logp.shape[0]), "adv": adv.tolist(), "num_seqs": kw["num_seqs"],
                      "num_tokens": kw["num_tokens"], "level": kw["importance_sampling_level"]})
        return real(logp, old, adv, mask, **kw)

    monkeypatch.setattr(trainer_mod, "grpo_loss", spy)
    return calls


def _by_text(items):
    """Server reward from the completion: number of 'a' characters / 4; a flag on 'zz'."""
    return [{"id": it["id"], "reward": it["completion"].count("a") / 4, "status": "ok",
             "detail": _code_detail(["signal_probe"] if "zz" in it["completion"] else [])} for it in items]


PLAN = {
    "P0": [("aaaa", False), ("a", False), ("bbbbbbbbbbbb", True), ("zz", False)],
    "P1": [("aa", False), ("aa", False), ("aaaaaaaaaaaa", True), ("b", False)],
}


def _step(tiny_cfg, monkeypatch, **kw):
    items = [TaskItem("p0", "P0", {"type": "math", "answer": "0"}), TaskItem("p1", "P1", {"type": "math", "answer": "0"})]
    cfg = tiny_cfg(prompts_per_step=2, group_size=4, max_completion_length=12, kl_coeff=0.0, min_group_std=0.0,
                   generation_batch_size=2, **kw)
    tr = GRPOTrainer(cfg, scorer=CallableScorer(_by_text), train_items=items, eval_items=[])
    tr.stream.take = lambda n: items[:n]
    _fixed_rollouts(tr, PLAN)
    calls = _spy_loss(monkeypatch)
    rec = tr.train_step()
    tr.close()
    return rec, calls


def test_mask_truncated_completions_keeps_advantages_drops_tokens(tiny_cfg, monkeypatch):
    rec, calls = _step(tiny_cfg, monkeypatch, mask_truncated_completions=True, scale_rewards="none")
    # rewards P0: [1, .25, 0, 0] mean .3125; P1: [.5, .5, 3, 0] mean 1.0 - truncated ones still count
    assert rec["kept_seqs"] == 6 and rec["masked_truncated"] == 2
    assert sum(c["rows"] for c in calls) == 6 and calls[0]["num_seqs"] == 6
    adv = [a for c in calls for a in c["adv"]]
    assert adv == pytest.approx([1 - 0.3125, 0.25 - 0.3125, 0 - 0.3125, 0.5 - 1, 0.5 - 1, 0 - 1])
    assert calls[0]["num_tokens"] == (4 + 1) + (1 + 1) + (2 + 1) + (2 + 1) * 2 + (1 + 1)  # EOS counted
    rec2, calls2 = _step(tiny_cfg, monkeypatch, mask_truncated_completions=False, scale_rewards="none")
    assert rec2["kept_seqs"] == 8 and rec2["masked_truncated"] == 0 and sum(c["rows"] for c in calls2) == 8


def test_per_source_metrics_flags_and_overlong_in_a_step(tiny_cfg, monkeypatch):
    rec, calls = _step(tiny_cfg, monkeypatch, overlong_buffer=4,
                       reward_sources=[{"name": "verifier", "kind": "server"},
                                       {"name": "fmt", "fn": "trainer.reward_fns:boxed_format", "weight": 2.0}])
    # verifier mean over 8: (1 + .25 + 0 + 0 + .5 + .5 + 3 + 0) / 8; overlong: the two truncated get -1
    assert rec["reward/verifier"] == pytest.approx(5.25 / 8)
    assert rec["reward/fmt"] == 0.0 and rec["reward/overlong"] == pytest.approx(-2 / 8)
    assert rec["reward_mean"] == pytest.approx((5.25 - 2) / 8)
    assert rec["flagged_share"] == pytest.approx(1 / 8) and rec["flags/signal_probe"] == 1
    assert rec["truncated_share"] == pytest.approx(2 / 8)


def test_batch_scaling_in_a_step(tiny_cfg, monkeypatch):
    rec, calls = _step(tiny_cfg, monkeypatch, scale_rewards="batch")
    r = [1, 0.25, 0, 0, 0.5, 0.5, 3, 0]
    m = sum(r) / 8
    sd = math.sqrt(sum((x - m) ** 2 for x in r) / 7)
    want = [(x - 0.3125) / sd for x in r[:4]] + [(x - 1.0) / sd for x in r[4:]]
    assert [a for c in calls for a in c["adv"]] == pytest.approx(want, rel=1e-5)


def test_gspo_in_a_step(tiny_cfg, monkeypatch):
    rec, calls = _step(tiny_cfg, monkeypatch, importance_sampling_level="sequence", num_iterations=2,
                       learning_rate=5e-2)
    assert calls and all(c["level"] == "sequence" for c in calls)
    assert rec["ratio_mean"] != pytest.approx(1.0, abs=1e-9) and math.isfinite(rec["loss"])
