import warnings

import pytest
from typer.testing import CliRunner

from trainer.cli import app
from trainer.config import ConfigError, TrainConfig, load_config, parse_overrides


def test_reference_defaults():
    c = TrainConfig()
    assert (c.group_size, c.clip_ratio, c.kl_coeff, c.epsilon, c.max_completion_length) == (8, 0.2, 0.04, 1e-8, 2048)
    assert c.temperature == 1.0 and c.min_group_std == 0.05 and c.loss_type == "grpo"
    assert c.scale_by_std and not TrainConfig(loss_type="dr_grpo").scale_by_std


def test_temperature_warning():
    with warnings.catch_warnings(record=True) as w:
        warnings.simplefilter("always")
        TrainConfig(temperature=0.3)
    assert any("lose diversity" in str(x.message) for x in w)
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        TrainConfig(temperature=0.8)


def test_invalid_settings_fail_early_with_every_problem():
    with pytest.raises(ConfigError) as e:
        load_config(None, {"group_size": 1, "clip_ratio": 1.5, "epsilon": 0, "loss_type": "ppo"})
    msg = str(e.value)
    assert "loss_type" in msg
    with pytest.raises(ConfigError) as e:
        load_config(None, {"group_size": 1, "clip_ratio": 1.5, "epsilon": 0})
    msg = str(e.value)
    assert "group_size must be >= 2" in msg and "clip_ratio" in msg and "epsilon" in msg
    with pytest.raises(ConfigError, match="grup_size"):
        load_config(None, {"grup_size": 4})
    with pytest.raises(ConfigError, match="price_per_hour"):
        load_config(None, {"max_cost_usd": 5})


def test_yaml_then_flags(tmp_path):
    p = tmp_path / "c.yaml"
    p.write_text("group_size: 4\nlora:\n  enabled: true\n  r: 4\nkl_coeff: 0.1\n")
    c = load_config(p, parse_overrides(["lora.r=8", "kl_coeff=0", "reward_url=http://a:1,http://b:2"]))
    assert c.group_size == 4 and c.lora.enabled and c.lora.r == 8 and c.kl_coeff == 0
    assert c.reward_url == ["http://a:1", "http://b:2"]


def test_cli_reports_bad_config():
    r = CliRunner().invoke(app, ["--group-size", "1", "--print-config"])
    assert r.exit_code == 2
    assert "group_size must be >= 2" in r.output
    r = CliRunner().invoke(app, ["--group-size", "4", "--set", "lora.r=2", "--print-config"])
    assert r.exit_code == 0, r.output
    assert "group_size: 4" in r.output and "r: 2" in r.output


def test_demo_defaults_are_a_valid_config_with_the_truncation_penalty():
    # the demo's reward: the verifier plus -0.5 for a completion cut off at the cap, no soft buffer
    from trainer.demo import DEMO_DEFAULTS

    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        cfg = load_config(None, {**DEMO_DEFAULTS, "state_dir": "/tmp/unused", "reward_url": ["http://x"]})
    assert [s.name for s in cfg.all_reward_sources] == ["verifier", "truncated"]
    trunc = cfg.all_reward_sources[1]
    assert trunc.fn == "trainer.reward_fns:truncation_penalty" and trunc.kwargs == {"penalty": 0.5}
    assert cfg.overlong_buffer == 0
