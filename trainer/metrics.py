"""Metrics: the step's statistics (StepStats), JSONL file (one record per train step / eval),
optional TensorBoard / wandb / trackio, PNG plot."""

from __future__ import annotations

import importlib
import json
import math
import sys
from dataclasses import dataclass, field, fields
from pathlib import Path
from typing import Any

import torch

from . import dist

try:  # the verifier's flag vocabulary: one fixed set of per-kind counters on every rank
    from sandbox.runner.flags import KINDS as FLAG_KINDS
except ImportError:  # pragma: no cover - the trainer installed without the sandbox package
    FLAG_KINDS = frozenset()


def peak_memory_mb(device: torch.device) -> float | None:
    """Peak GPU memory allocated by this process (CUDA); None elsewhere (the trainer keeps the
    host's running peak itself, see ``GRPOTrainer.peak_rss_mb``)."""
    if device.type == "cuda":
        return torch.cuda.max_memory_allocated(device) / 2**20
    return None


@dataclass
class UpdateStats:
    """The update's statistics on one rank: the loss summed over passes (mean over iterations),
    the rest weighted by each pass's loss tokens; :meth:`record` reduces them over ranks."""

    loss: float = 0.0
    kl: float = 0.0
    clip_fraction: float = 0.0
    clip_low_fraction: float = 0.0
    clip_high_fraction: float = 0.0
    ratio_mean: float = 0.0
    tokens: float = 0.0
    grad_norm: float = 0.0  # of the last iteration, already global (clip_grad_norm_ over all shards)

    WEIGHTED = ("kl", "clip_fraction", "clip_low_fraction", "clip_high_fraction", "ratio_mean")

    def add(self, out: Any, iterations: int) -> None:
        """One pass's ``LossOutput``."""
        self.loss += float(out.loss.detach()) / iterations
        self.tokens += out.num_tokens
        for k in self.WEIGHTED:
            setattr(self, k, getattr(self, k) + getattr(out, k) * out.num_tokens)

    def record(self, world: int) -> dict[str, float]:
        red = dist.all_reduce([getattr(self, k) for k in self.WEIGHTED] + [self.tokens, self.loss])
        rec = {k: v / max(red[-2], 1.0) for k, v in zip(self.WEIGHTED, red, strict=False)}
        # each rank's loss is world x its share of the global sum: the batch loss is the rank mean
        rec["loss"] = red[-1] / world
        rec["grad_norm"] = self.grad_norm
        return rec

    @classmethod
    def empty(cls) -> dict[str, float]:
        return {**dict.fromkeys(cls.WEIGHTED, 0.0), "loss": 0.0, "grad_norm": 0.0}


def _max(default: float = 0.0) -> Any:
    return field(default=default, metadata={"reduce": "max"})


@dataclass
class StepStats:
    """What one rank saw in one step; :meth:`reduced` sums (or maxes) every field over ranks, by
    name. Per-source and per-flag dicts have the same keys on every rank (built from the config
    and the flag vocabulary), reduced in sorted key order."""

    completions: float = 0.0  # sampled (scored or not)
    tokens: float = 0.0  # completion tokens sampled
    truncated: float = 0.0  # completions that hit max_completion_length
    infra_errors: float = 0.0  # server could not score: dropped from the group, not scored 0
    reward_n: float = 0.0  # scored completions
    reward_sum: float = 0.0
    reward_sq: float = 0.0
    flagged: float = 0.0  # scored completions the verifier flagged as a hack attempt
    groups: float = 0.0
    filtered: float = 0.0
    filtered_all_same: float = 0.0
    kept_groups: float = 0.0
    kept_seqs: float = 0.0  # sequences in the loss (after truncation masking)
    masked_truncated: float = 0.0  # kept sequences left out of the loss by mask_truncated_completions
    loss_tokens: float = 0.0
    tool_seqs: float = 0.0  # completions that ran at least one code block (tools=python)
    tool_calls: float = 0.0  # code blocks run
    tool_errors: float = 0.0  # code blocks that raised, timed out or lost their session
    gen_time: float = 0.0
    logprob_time: float = 0.0
    wait: float = 0.0  # blocked on reward futures
    step_time: float = 0.0
    len_max: float = _max()
    source_sum: dict[str, float] = field(default_factory=dict)
    source_n: dict[str, float] = field(default_factory=dict)
    flag_counts: dict[str, float] = field(default_factory=dict)

    @classmethod
    def for_sources(cls, names: list[str]) -> StepStats:
        return cls(source_sum=dict.fromkeys(names, 0.0), source_n=dict.fromkeys(names, 0.0),
                   flag_counts=dict.fromkeys(sorted(FLAG_KINDS), 0.0))

    def add_scored(self, reward: float, sources: dict[str, float | None], flags: list[str]) -> None:
        self.reward_n += 1
        self.reward_sum += reward
        self.reward_sq += reward * reward
        for k, v in sources.items():
            if v is not None and k in self.source_sum:
                self.source_sum[k] += v
                self.source_n[k] += 1
        if flags:
            self.flagged += 1
            for f in flags:
                if f in self.flag_counts:
                    self.flag_counts[f] += 1

    def add_tools(self, extra: dict[str, Any]) -> None:
        """One completion's tool use (``Sequence.extra`` of a multi-turn rollout; nothing otherwise)."""
        calls = int(extra.get("tool_calls", 0))
        self.tool_seqs += float(calls > 0)
        self.tool_calls += calls
        self.tool_errors += int(extra.get("tool_errors", 0))

    def reduced(self) -> StepStats:
        """The same statistics summed (``len_max``: maxed) over every rank."""
        if not dist.active():
            return self
        sums, maxes, dicts = [], [], []
        for f in fields(self):
            v = getattr(self, f.name)
            if isinstance(v, dict):
                dicts.append(f.name)
            elif f.metadata.get("reduce") == "max":
                maxes.append(f.name)
            else:
                sums.append(f.name)
        flat = [getattr(self, n) for n in sums]
        for n in dicts:
            d = getattr(self, n)
            flat += [d[k] for k in sorted(d)]
        red = dist.all_reduce(flat)
        red_max = dist.all_reduce([getattr(self, n) for n in maxes], op="max")
        out = StepStats(**{n: v for n, v in zip(sums, red[: len(sums)], strict=True)},
                        **{n: v for n, v in zip(maxes, red_max, strict=True)})
        pos = len(sums)
        for n in dicts:
            d = getattr(self, n)
            keys = sorted(d)
            setattr(out, n, dict(zip(keys, red[pos : pos + len(keys)], strict=True)))
            pos += len(keys)
        return out

    def record(self) -> dict[str, Any]:
        """Named rates of the (reduced) statistics, as logged."""
        n = self.reward_n
        mean = self.reward_sum / n if n else None
        var = max(0.0, self.reward_sq / n - mean * mean) if mean is not None else None
        rec: dict[str, Any] = {
            "reward_mean": mean,
            "reward_std": math.sqrt(var) if var is not None else None,
            "filtered_share": self.filtered / max(self.groups, 1.0),
            "filtered_groups": int(self.filtered),
            "groups": int(self.groups),
            "kept_groups": int(self.kept_groups),
            "kept_seqs": int(self.kept_seqs),
            "masked_truncated": int(self.masked_truncated),
            "infra_errors": int(self.infra_errors),
            "truncated_share": self.truncated / max(self.completions, 1.0),
            "completion_len_mean": self.tokens / max(self.completions, 1.0),
            "completion_len_max": int(self.len_max),
            "flagged_share": self.flagged / n if n else 0.0,
            # tools=python: the share of completions that ran code, code blocks per completion, and
            # the share of runs that raised / timed out / lost their session
            "tool_call_rate": self.tool_seqs / max(self.completions, 1.0),
            "tool_calls_mean": self.tool_calls / max(self.completions, 1.0),
            "tool_error_share": self.tool_errors / max(self.tool_calls, 1.0),
        }
        for k in self.source_sum:
            rec[f"reward/{k}"] = self.source_sum[k] / self.source_n[k] if self.source_n[k] else None
        for k, v in self.flag_counts.items():
            rec[f"flags/{k}"] = int(v)
        return rec


class MetricsLogger:
    """Every record to ``metrics.jsonl``; numeric fields also to TensorBoard and to wandb /
    trackio (``report_to``; each import-guarded: a tracker that is not installed is named once
    and skipped). wandb and trackio share one API (``init(project, config, ...)``, ``log``,
    ``finish``), so one code path serves both."""

    TRACKERS = ("wandb", "trackio")

    def __init__(self, state_dir: str | Path, tensorboard: bool = False, enabled: bool = True,
                 report_to: list[str] | None = None, project: str = "verireward-grpo",
                 run_config: dict[str, Any] | None = None):
        self.enabled = enabled
        self.path = Path(state_dir) / "metrics.jsonl"
        self._tb = None
        self._trackers: list[Any] = []
        if enabled:
            self.path.parent.mkdir(parents=True, exist_ok=True)
            if tensorboard:
                try:
                    from torch.utils.tensorboard import SummaryWriter

                    self._tb = SummaryWriter(str(Path(state_dir) / "tb"))
                except ImportError:  # pragma: no cover
                    print("tensorboard not installed; TensorBoard logging disabled", file=sys.stderr)
            for name in report_to or []:
                try:
                    mod = importlib.import_module(name)
                except ImportError:
                    print(f"report_to: {name} is not installed (pip install {name}); not logging to it",
                          file=sys.stderr)
                    continue
                mod.init(project=project, config=run_config or {}, name=Path(state_dir).name)
                self._trackers.append(mod)

    @staticmethod
    def _scalars(record: dict[str, Any]) -> dict[str, float]:
        kind = record.get("kind", "train")
        tag = record.get("tag")
        prefix = f"{kind}/{tag}" if kind == "eval" and tag else kind
        return {f"{prefix}/{k}": v for k, v in record.items()
                if isinstance(v, int | float) and not isinstance(v, bool) and k != "step"
                and math.isfinite(float(v))}

    def log(self, record: dict[str, Any]) -> None:
        if not self.enabled:
            return
        clean = {k: (None if isinstance(v, float) and not math.isfinite(v) else v) for k, v in record.items()}
        with open(self.path, "a") as f:
            f.write(json.dumps(clean) + "\n")
        step = int(record.get("step", 0))
        if self._tb is not None:
            kind = record.get("kind", "train")
            for k, v in record.items():
                if isinstance(v, int | float) and not isinstance(v, bool) and k != "step":
                    self._tb.add_scalar(f"{kind}/{k}", v, step)
            self._tb.flush()
        if self._trackers:
            scalars = self._scalars(record)
            for t in self._trackers:
                t.log(scalars, step=step)

    def log_table(self, name: str, rows: list[dict[str, Any]], step: int) -> None:
        """An eval's completions table to the trackers that take tables (wandb)."""
        for t in self._trackers:
            table_cls = getattr(t, "Table", None)
            if table_cls is None or not rows:
                continue
            cols = list(rows[0])
            t.log({name: table_cls(columns=cols, data=[[json.dumps(r[c]) if isinstance(r[c], dict | list) else r[c]
                                                         for c in cols] for r in rows])}, step=step)

    def close(self) -> None:
        if self._tb is not None:
            self._tb.close()
        for t in self._trackers:
            t.finish()
        self._trackers = []


def read_metrics(path: str | Path) -> list[dict[str, Any]]:
    out = []
    with open(path) as f:
        for line in f:
            line = line.strip()
            if line:
                out.append(json.loads(line))
    return out


def plot_metrics(metrics_path: str | Path, out_png: str | Path, title: str | None = None) -> Path:
    """Training reward (per step, with a moving average) and held-out reward over steps."""
    import matplotlib.pyplot as plt

    fig = metrics_figure(read_metrics(metrics_path), title)
    out_png = Path(out_png)
    out_png.parent.mkdir(parents=True, exist_ok=True)
    fig.savefig(out_png, dpi=100)
    plt.close(fig)
    return out_png


def metrics_figure(recs: list[dict[str, Any]], title: str | None = None):
    """The figure of :func:`plot_metrics`: training reward and the filtered share (its own 0-1
    axis) on the left, held-out reward (markers) on the right."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    # a resumed run may repeat steps: the last record of a step wins
    train: dict[int, dict] = {}
    evals: dict[int, dict] = {}
    for r in recs:
        if r.get("kind") == "train":
            train[int(r["step"])] = r
        elif r.get("kind") == "eval":
            evals[int(r["step"])] = r
    fig, axes = plt.subplots(1, 2, figsize=(11, 4))
    ax = axes[0]
    if train:
        steps = sorted(train)
        rew = [train[s].get("reward_mean") for s in steps]
        ax.plot(steps, rew, ".", alpha=0.4, label="train reward (step)")
        k = max(2, len(steps) // 8) if len(steps) > 3 else 1
        ma = [sum(x for x in rew[max(0, i - k + 1) : i + 1] if x is not None)
              / max(1, sum(1 for x in rew[max(0, i - k + 1) : i + 1] if x is not None)) for i in range(len(rew))]
        ax.plot(steps, ma, "-", label=f"moving avg ({k})")
        # the filtered share is a fraction of groups, not a reward: its own axis on the right
        filt = [train[s].get("filtered_share") for s in steps]
        ax2 = ax.twinx()
        ax2.plot(steps, filt, ":", color="tab:gray", label="filtered share (right axis)")
        ax2.set_ylim(0.0, 1.0)
        ax2.set_ylabel("filtered share of groups")
    ax.set_xlabel("step")
    ax.set_ylabel("reward")
    ax.set_title("training")
    handles, labels = ax.get_legend_handles_labels()
    if train:
        h2, l2 = ax2.get_legend_handles_labels()
        handles, labels = handles + h2, labels + l2
    if handles:
        ax.legend(handles, labels, fontsize=8)
    ax = axes[1]
    if evals:
        steps = sorted(evals)
        # markers only: held-out evals are a few points apart, a line between them would claim
        # values nobody measured
        ax.plot(steps, [evals[s].get("reward_mean") for s in steps], "o", label="held-out reward")
    ax.set_xlabel("step")
    ax.set_title("held-out")
    if ax.get_legend_handles_labels()[0]:
        ax.legend(fontsize=8)
    if title:
        fig.suptitle(title)
    fig.tight_layout()
    return fig
