"""``grpo-train demo``: SmolLM2-135M-Instruct on bundled arithmetic, on the CPU, in minutes.

Starts a reward server (bwrap sandbox) unless ``--reward-url`` names one, trains one run per
seed against the same held-out set, and prints baseline vs final held-out reward per seed and
over seeds, with the plot paths.
"""

from __future__ import annotations

import json
import signal
import statistics
import sys
import time
from pathlib import Path
from typing import Any

from reward_server.local import SubprocessServer

DEMO_DEFAULTS: dict[str, Any] = {
    "model": "smollm2",
    "tasks": "arithmetic",
    # one-step sums/differences of small numbers: greedy baseline 0.375 on 64 held-out problems and 25-62% of
    # sampled groups all-same (measured), vs 0.188 and 88% on the standard mix, where few groups carry a signal
    "arith_difficulty": "easy",
    "num_train_tasks": 1000,
    "group_size": 8,
    "prompts_per_step": 4,
    "gradient_accumulation_steps": 2,
    # forward/backward 4 sequences at a time: peak RSS ~3 GB instead of 8-10 GB with 16 (measured)
    "micro_batch_size": 4,
    # 64, not 96: steps took 21-97 s on shared cores vs 64-98 s at 96 (generation is most of a step), and a
    # truncated answer scores 0, so "answer briefly, in \\boxed{}" is a signal the model can pick up within 10 steps
    "max_completion_length": 64,
    # SmolLM2-135M at temperature 1.0 rambles: nearly every group scores all-zero and is filtered
    # (measured: 4 of 4 groups per step); at 0.7 about half the groups keep variance
    "temperature": 0.7,
    # LoRA: a third less backward compute than full fine-tuning on 2 CPU cores, and it tolerates
    # the high learning rate a run of a few steps needs
    "lora": {"enabled": True, "r": 16, "alpha": 32},
    "learning_rate": 3e-4,
    "kl_coeff": 0.0,  # no reference forward pass: the run is too short to drift far
    # -0.5 for a completion cut off at the cap, nothing for length below it. Without it a third of seeds drifted
    # into truncated rambles: a group of them scores all 0 and is filtered, so nothing pulled back. DAPO's soft
    # penalty (last 24 tokens, down to -0.5) cured that but grades every length from 40 tokens on, and in a
    # group of wrong answers, normalised to unit std, that is a pure push towards brevity: seed 0 fell to
    # 7-token answers ("6 + 7 = 13") and gained 1 of 64 problems (docs/TRAINER.md)
    "reward_sources": [{"name": "verifier", "kind": "server"},
                       {"name": "truncated", "fn": "trainer.reward_fns:truncation_penalty", "kwargs": {"penalty": 0.5}}],
    "min_group_std": 0.05,
    "max_refill_rounds": 0,
    "eval_every": 0,
    "eval_temperature": 0.0,
    "eval_group_prompts": 8,
    "save_every": 0,
    "export_final": False,
    "device": "cpu",
    "dtype": "float32",
}


# `--set tools=python`: exact big-integer and modular arithmetic, which a 135M model cannot do in its
# head and one line of Python does; the policy's ```python blocks run in a session on the server
TOOL_DEMO_DEFAULTS: dict[str, Any] = {
    "tasks": "bigarith",
    "max_tool_turns": 2,
    # a code block, its output and a boxed answer: 64 tokens cut most trajectories inside the first block
    "max_completion_length": 128,
    "eval_group_prompts": 0,  # the variance check would cost another eval's generation
}
TOOL_DEMO_NUM_EVAL = 16
TOOL_DEMO_MAX_SESSIONS = 64  # the server the demo starts holds a whole eval chunk's sessions (32) at once


def _tool_line(rec: dict[str, Any]) -> str:
    return (f"step {rec['step']}: reward {_fmt(_verifier(rec))}  tool-call rate {rec['tool_call_rate']:.2f}  "
            f"calls/completion {rec['tool_calls_mean']:.2f}  tool errors {rec['tool_error_share']:.2f}  "
            f"truncated {rec['truncated_share']:.2f}  ({rec['step_time_s']:.0f}s)")


def _verifier(rec: dict[str, Any] | None) -> float | None:
    if not rec:
        return None
    return rec.get("reward/verifier", rec.get("reward_mean"))


def _fmt(x: float | None) -> str:
    return "n/a" if x is None else f"{x:.3f}"


def run_demo(seeds: list[int], steps: int, reward_url: str | None, state_dir: str, sandbox: str,
             num_eval: int | None, overrides: dict[str, Any]) -> int:
    from .config import load_config
    from .metrics import plot_metrics, read_metrics
    from .trainer import GRPOTrainer

    root = Path(state_dir)
    root.mkdir(parents=True, exist_ok=True)
    tools = overrides.get("tools") == "python"
    defaults = {**DEMO_DEFAULTS, **(TOOL_DEMO_DEFAULTS if tools else {})}
    if num_eval is None:
        num_eval = TOOL_DEMO_NUM_EVAL if tools else 64
    server = None
    # a SIGTERM must not orphan the server the demo started (it runs in its own session)
    signal.signal(signal.SIGTERM, lambda *_: sys.exit(143))
    if reward_url is None:
        print(f"starting reward server (sandbox={sandbox}) ...", flush=True)
        extra = ["--sandbox-option", f"max_sessions={TOOL_DEMO_MAX_SESSIONS}"] if tools else []
        server = SubprocessServer.start(["--sandbox", sandbox, "--text-logs", *extra],
                                        log_path=root / "reward-server.log", timeout_s=90)
        reward_url = server.url
        print(f"reward server at {reward_url}", flush=True)
    results = []
    shared_baseline = None
    try:
        # one model load shared by all seeds would be faster, but each run must start from the
        # untouched base weights, so each seed loads afresh (~15 s)
        for seed in seeds:
            cfg = load_config(None, {**defaults, "max_steps": steps, "num_eval_tasks": num_eval,
                                     "seed": seed, "state_dir": str(root / f"seed-{seed}"),
                                     "reward_url": [reward_url], **overrides})
            sd = Path(cfg.state_dir)
            if (sd / "metrics.jsonl").exists() and not cfg.resume:
                (sd / "metrics.jsonl").unlink()
            t0 = time.perf_counter()
            tr = GRPOTrainer(cfg, step_hook=(lambda _t, rec: print(_tool_line(rec), flush=True)) if tools else None)
            if results and shared_baseline is not None:
                # greedy baseline on the same held-out set from the same base weights: identical
                # for every seed, so it is computed once
                tr.baseline = dict(shared_baseline)
                tr.logger.log(tr.baseline)
            try:
                res = tr.train()
            finally:
                tr.close()
            png = plot_metrics(sd / "metrics.jsonl", sd / "reward.png", f"GRPO demo, seed {seed}")
            shared_baseline = res.get("baseline")
            # the verifier's share of correct answers, not the shaped total (which includes the penalty)
            b = _verifier(res.get("baseline"))
            f = _verifier(res.get("final"))
            train = [r for r in read_metrics(sd / "metrics.jsonl") if r.get("kind") == "train"]
            trunc = (train[0]["truncated_share"], train[-1]["truncated_share"]) if train else (None, None)
            results.append({"seed": seed, "baseline": b, "final": f, "steps": res["step"],
                            "truncated_first": trunc[0], "truncated_last": trunc[1],
                            "wall_s": time.perf_counter() - t0, "plot": str(png)})
            if tools:
                rate = [(r or {}).get("tool_call_rate") for r in (res.get("baseline"), res.get("final"))]
                results[-1].update(tool_rate_baseline=rate[0], tool_rate_final=rate[1],
                                   tool_rate_per_step=[r["tool_call_rate"] for r in train],
                                   reward_per_step=[_verifier(r) for r in train])
                print(f"seed {seed}: held-out tool-call rate {_fmt(rate[0])} -> {_fmt(rate[1])}", flush=True)
            print(f"seed {seed}: held-out reward baseline {_fmt(b)} -> final {_fmt(f)} "
                  f"({res['step']} steps, {time.perf_counter() - t0:.0f}s, truncated {_fmt(trunc[0])} -> "
                  f"{_fmt(trunc[1])})  plot: {png}", flush=True)
    finally:
        if server is not None:
            server.stop()
    deltas = [r["final"] - r["baseline"] for r in results if r["final"] is not None and r["baseline"] is not None]
    summary: dict[str, Any] = {"runs": results, "config": {**defaults, "max_steps": steps, **overrides}}
    if deltas:
        summary["mean_delta"] = statistics.mean(deltas)
        summary["stdev_delta"] = statistics.stdev(deltas) if len(deltas) > 1 else None
        base = [r["baseline"] for r in results]
        fin = [r["final"] for r in results]
        print(f"\nheld-out reward over {len(results)} seed(s): baseline {statistics.mean(base):.3f} -> final "
              f"{statistics.mean(fin):.3f}  (mean change {summary['mean_delta']:+.3f}"
              + (f", sd {summary['stdev_delta']:.3f}" if summary["stdev_delta"] is not None else "") + ")")
    (root / "summary.json").write_text(json.dumps(summary, indent=1))
    print(f"summary: {root / 'summary.json'}")
    return 0
