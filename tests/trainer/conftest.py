from __future__ import annotations

import warnings

import pytest

from tests.trainer.tiny import save_tiny


@pytest.fixture(scope="session")
def tiny_model_dir(tmp_path_factory):
    return save_tiny(tmp_path_factory.mktemp("tiny-model"))


@pytest.fixture
def tiny_cfg(tiny_model_dir, tmp_path):
    """A TrainConfig for the tiny model: short completions, small batches, no progress bar."""
    from trainer.config import TrainConfig

    def make(**kw):
        base = dict(
            model=str(tiny_model_dir), state_dir=str(tmp_path / "state"), max_steps=2, prompts_per_step=3,
            group_size=4, max_completion_length=12, num_train_tasks=40, num_eval_tasks=4, eval_every=0,
            save_every=0, learning_rate=1e-3, progress_bar=False, device="cpu", baseline_eval=False,
        )
        base.update(kw)
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            return TrainConfig(**base)

    return make
