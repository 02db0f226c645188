"""Metrics: JSONL file (one record per train step / eval), optional TensorBoard, PNG plot."""

from __future__ import annotations

import json
import math
import sys
from pathlib import Path
from typing import Any

import torch

from .memory import max_rss_mb


def peak_memory_mb(device: torch.device) -> float:
    if device.type == "cuda":
        return torch.cuda.max_memory_allocated(device) / 2**20
    return max_rss_mb()


class MetricsLogger:
    def __init__(self, state_dir: str | Path, tensorboard: bool = False, enabled: bool = True):
        self.enabled = enabled
        self.path = Path(state_dir) / "metrics.jsonl"
        self._tb = None
        if enabled:
            self.path.parent.mkdir(parents=True, exist_ok=True)
            if tensorboard:
                try:
                    from torch.utils.tensorboard import SummaryWriter

                    self._tb = SummaryWriter(str(Path(state_dir) / "tb"))
                except ImportError:  # pragma: no cover
                    print("tensorboard not installed; TensorBoard logging disabled", file=sys.stderr)

    def log(self, record: dict[str, Any]) -> None:
        if not self.enabled:
            return
        clean = {k: (None if isinstance(v, float) and not math.isfinite(v) else v) for k, v in record.items()}
        with open(self.path, "a") as f:
            f.write(json.dumps(clean) + "\n")
        if self._tb is not None:
            step = int(record.get("step", 0))
            kind = record.get("kind", "train")
            for k, v in record.items():
                if isinstance(v, int | float) and not isinstance(v, bool) and k != "step":
                    self._tb.add_scalar(f"{kind}/{k}", v, step)
            self._tb.flush()

    def close(self) -> None:
        if self._tb is not None:
            self._tb.close()


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
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    recs = read_metrics(metrics_path)
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
        filt = [train[s].get("filtered_share") for s in steps]
        ax.plot(steps, filt, ":", label="filtered share")
    ax.set_xlabel("step")
    ax.set_ylabel("reward")
    ax.set_title("training")
    if ax.get_legend_handles_labels()[0]:
        ax.legend(fontsize=8)
    ax = axes[1]
    if evals:
        steps = sorted(evals)
        ax.plot(steps, [evals[s].get("reward_mean") for s in steps], "o-", label="held-out reward")
    ax.set_xlabel("step")
    ax.set_title("held-out")
    if ax.get_legend_handles_labels()[0]:
        ax.legend(fontsize=8)
    if title:
        fig.suptitle(title)
    fig.tight_layout()
    out_png = Path(out_png)
    out_png.parent.mkdir(parents=True, exist_ok=True)
    fig.savefig(out_png, dpi=100)
    plt.close(fig)
    return out_png
