from typer.testing import CliRunner

from trainer.cli import app
from trainer.estimate import algorithm_lines, cost_usd


def test_seed_figures():
    r = CliRunner().invoke(app, ["estimate", "--params", "8.2e9"])
    assert r.exit_code == 0, r.output
    lines = [" ".join(ln.split()) for ln in r.output.splitlines()]
    assert any(ln.startswith("PPO 295.2 GB") for ln in lines)
    assert any(ln.startswith("DPO 147.6 GB") for ln in lines)
    assert any(ln.startswith("DPO 131.2 GB with precomputed reference log-probs") for ln in lines)
    assert any(ln.startswith("GRPO 131.2 GB with KL off") for ln in lines)
    assert any(ln.startswith("GRPO 147.6 GB with KL on") for ln in lines)
    assert [round(x.gb, 1) for x in algorithm_lines(8.2e9)] == [295.2, 147.6, 131.2, 131.2, 147.6]


def test_cost(tmp_path):
    assert cost_usd(1000, 36.0, 2.0) == 20.0
    m = tmp_path / "metrics.jsonl"
    m.write_text('{"kind":"train","step":1,"step_time_s":10}\n{"kind":"train","step":2,"step_time_s":30}\n'
                 '{"kind":"train","step":3,"step_time_s":20}\n')
    r = CliRunner().invoke(app, ["estimate", "--metrics", str(m), "--steps", "360", "--price-per-hour", "3"])
    assert r.exit_code == 0, r.output
    assert "20.00 s/step" in r.output and "$6.00" in r.output


def test_configured_model_and_lora(tiny_model_dir):
    r = CliRunner().invoke(app, ["estimate", "--model", str(tiny_model_dir), "--lora-r", "2",
                                 "--set", "lora.enabled=true"])
    assert r.exit_code == 0, r.output
    assert "configured model" in r.output and "GRPO+LoRA" in r.output and "LoRA r=2" in r.output


def test_plot_command(tmp_path):
    m = tmp_path / "metrics.jsonl"
    recs = [{"kind": "eval", "tag": "baseline", "step": 0, "reward_mean": 0.2}]
    recs += [{"kind": "train", "step": s, "reward_mean": 0.1 * s, "filtered_share": 0.5} for s in range(1, 6)]
    recs += [{"kind": "eval", "tag": "final", "step": 5, "reward_mean": 0.4}]
    import json

    m.write_text("".join(json.dumps(r) + "\n" for r in recs))
    r = CliRunner().invoke(app, ["plot", str(tmp_path)])
    assert r.exit_code == 0, r.output
    png = tmp_path / "reward.png"
    assert r.output.strip() == str(png) and png.read_bytes()[:4] == b"\x89PNG"
