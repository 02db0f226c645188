"""Our GRPO trainer vs TRL's GRPOTrainer with our reward adapter, one after the other in one run.

Same model (SmolLM2-135M-Instruct by default, LoRA r=16 on every linear layer), same training
prompts in the same order (our TaskStream's order is given to TRL unshuffled), same chat
template, same settings (4 prompts x 8 completions per optimizer step in two accumulation
chunks, temperature 0.7, 64 completion tokens, lr 3e-4, beta 0, loss_type grpo, group
scaling, no group filtering on our side so both train on every group, no activation checkpointing
(TRL defaults it on)), the same reward server.
Each trainer runs in its own child process; the parent samples the child's resident set every
0.1 s, so peak memory is measured the same way for both. Step time: ours from its step
records, TRL's from a callback around each optimizer step (generation included in both).
Held-out: the same greedy eval (64 problems, scored by the server) on each trained model.

    nice -n 19 python bench/trainer_vs_trl.py --steps 6 --seeds 0,1      # prints the table
    python bench/trainer_vs_trl.py --model DIR --steps 1 --num-eval 2     # a quick smoke run

Needs `pip install trl` (TRL is not a dependency of the project).
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile
import threading
import time
import warnings
from pathlib import Path
from typing import Any

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))

SETTINGS = dict(group_size=8, prompts_per_step=4, gradient_accumulation_steps=2, max_completion_length=64,
                temperature=0.7, learning_rate=3e-4, lora_r=16, lora_alpha=32)
# rows of one accumulation chunk: TRL's per_device_train_batch_size, and our micro_batch_size by default
PER_CHUNK = SETTINGS["prompts_per_step"] * SETTINGS["group_size"] // SETTINGS["gradient_accumulation_steps"]


def _rss_mb(pid: int) -> float:
    try:
        with open(f"/proc/{pid}/status") as f:
            for line in f:
                if line.startswith("VmRSS:"):
                    return int(line.split()[1]) / 1024.0
    except OSError:
        pass
    return 0.0


def run_child(args: list[str]) -> tuple[dict[str, Any], float]:
    """Run one trainer in a child; returns its JSON result and its peak resident set (MB)."""
    with tempfile.NamedTemporaryFile(suffix=".json", delete=False) as f:
        out = f.name
    p = subprocess.Popen([sys.executable, __file__, *args, "--out", out], cwd=REPO)
    peak = 0.0

    def sample() -> None:
        nonlocal peak
        while p.poll() is None:
            peak = max(peak, _rss_mb(p.pid))
            time.sleep(0.1)

    t = threading.Thread(target=sample, daemon=True)
    t.start()
    rc = p.wait()
    t.join()
    if rc != 0:
        raise RuntimeError(f"child {args[:2]} exited with {rc}")
    res = json.loads(Path(out).read_text())
    os.unlink(out)
    return res, peak


class Phases:
    """Per-phase wall time of one child, the same hooks on both sides (``--phases``): generate
    calls, backbone forward passes outside generate (with grad = the update's, without = log-prob
    passes), backward, clip + optimizer step, blocking reward calls; each step's rest is "other"
    (tokenisation, collation, the loss, statistics, logging). Wall times in the main thread."""

    NAMES = ("generate", "forward_grad", "forward_nograd", "backward", "optimizer", "rewards_blocked")

    def __init__(self) -> None:
        self.total = dict.fromkeys(self.NAMES, 0.0)
        self._depth = 0  # inside generate: its forwards are generation's

    def _wrap(self, owner: Any, attr: str, name: str | None) -> None:
        fn = getattr(owner, attr)
        me = self

        def timed(*args, **kwargs):
            import torch

            if name is None:  # the backbone: charged only outside generate
                if me._depth:
                    return fn(*args, **kwargs)
                key = "forward_grad" if torch.is_grad_enabled() else "forward_nograd"
            else:
                key = name
            me._depth += key == "generate"
            t0 = time.perf_counter()
            try:
                return fn(*args, **kwargs)
            finally:
                me._depth -= key == "generate"
                if key != "generate" or not me._depth:
                    me.total[key] += time.perf_counter() - t0

        setattr(owner, attr, timed)

    def install(self, rewards: tuple[Any, str] | None = None) -> None:
        import torch
        from transformers.generation.utils import GenerationMixin
        from transformers.models.llama import modeling_llama

        self._wrap(GenerationMixin, "generate", "generate")
        self._wrap(modeling_llama.LlamaModel, "forward", None)
        self._wrap(torch.autograd, "backward", "backward")
        self._wrap(torch.optim.AdamW, "step", "optimizer")
        self._wrap(torch.nn.utils, "clip_grad_norm_", "optimizer")
        if rewards is not None:
            self._wrap(*rewards, "rewards_blocked")

    def snapshot(self) -> dict[str, float]:
        return dict(self.total)


def per_step(snaps: list[dict[str, float]], times: list[float]) -> list[dict[str, float]]:
    """Phase times of each step from cumulative snapshots taken at each step's start and end."""
    out = []
    for (a, b), t in zip(zip(snaps[0::2], snaps[1::2], strict=True), times, strict=True):
        d = {k: b[k] - a[k] for k in a}
        d["other"] = t - sum(d.values())
        d["step"] = t
        out.append(d)
    return out


def data(a: argparse.Namespace):
    from trainer.tasks import TaskStream, build_split

    train, held = build_split("arithmetic", 1000, a.num_eval, 1234, "easy")
    order = TaskStream(train, seed=a.seed).take(a.steps * SETTINGS["prompts_per_step"])
    return train, held, order


def heldout(model, tok, items, url: str) -> float:
    """Greedy completions of the held-out prompts, scored by the server: the mean reward."""
    from trainer.rewards import HttpScorer
    from trainer.rollout import generate, render_prompts

    sc = HttpScorer([url])
    try:
        seqs = []
        for k in range(0, len(items), 16):
            part = items[k : k + 16]
            for s in generate(model, tok, render_prompts(tok, [t.prompt for t in part]), 1,
                              SETTINGS["max_completion_length"], 0.0):
                seqs.append((part[s.prompt_index], s))
        res = sc.submit([{"id": f"h{i}", "completion": s.text, "task": t.task}
                         for i, (t, s) in enumerate(seqs)]).result(timeout=600)
    finally:
        sc.close()
    return sum(float(r.reward or 0.0) for r in res) / max(len(res), 1)


def child_ours(a: argparse.Namespace) -> dict[str, Any]:
    import torch

    from trainer.config import load_config
    from trainer.trainer import GRPOTrainer

    torch.set_num_threads(a.threads)
    train, held, _ = data(a)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        cfg = load_config(None, {
            "model": a.model, "state_dir": tempfile.mkdtemp(prefix="ours-"), "max_steps": a.steps, "seed": a.seed,
            "group_size": SETTINGS["group_size"], "prompts_per_step": SETTINGS["prompts_per_step"],
            "gradient_accumulation_steps": SETTINGS["gradient_accumulation_steps"],
            # rows per forward/backward pass as TRL's per_device_train_batch_size (one chunk), unless told
            "micro_batch_size": a.micro_batch if a.micro_batch is not None else PER_CHUNK,
            "max_completion_length": SETTINGS["max_completion_length"], "temperature": SETTINGS["temperature"],
            "learning_rate": SETTINGS["learning_rate"], "kl_coeff": 0.0, "loss_type": "grpo", "min_group_std": 0.0,
            "lora": {"enabled": True, "r": SETTINGS["lora_r"], "alpha": SETTINGS["lora_alpha"]},
            "reward_url": [a.url], "device": "cpu", "dtype": "float32", "baseline_eval": False, "eval_every": 0,
            "save_every": 0, "export_final": False, "progress_bar": False, "num_eval_tasks": 0,
        })
    tr = GRPOTrainer(cfg, train_items=train, eval_items=[])
    base = heldout(tr.policy, tr.tokenizer, held, a.url) if a.with_baseline else None
    phases, snaps = Phases(), []
    if a.phases:
        from trainer.rewards import WaitClock

        phases.install((WaitClock, "result"))
    steps: list[float] = []
    tr.step_hook = lambda _t, rec: steps.append(rec["step_time_s"])
    tr.cfg.eval_every = 0
    tr.eval_items = []
    try:
        while tr.step < cfg.max_steps:
            snaps.append(phases.snapshot())
            rec = tr.train_step()
            snaps.append(phases.snapshot())
            tr.step_hook(tr, rec)
    finally:
        tr.close()
    return {"steps": steps, "baseline": base, "final": heldout(tr.policy, tr.tokenizer, held, a.url),
            "phases": per_step(snaps, steps) if a.phases else None}


def child_trl(a: argparse.Namespace) -> dict[str, Any]:
    import torch
    from datasets import Dataset
    from peft import LoraConfig
    from transformers import TrainerCallback
    from trl import GRPOConfig, GRPOTrainer

    from reward_server.compat.trl import make_trl_reward_func
    from trainer.config import TrainConfig
    from trainer.model import load_policy, load_tokenizer

    torch.set_num_threads(a.threads)
    _, held, order = data(a)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        tcfg = TrainConfig(model=a.model, device="cpu", dtype="float32")
    tok = load_tokenizer(tcfg)
    model = load_policy(tcfg, torch.device("cpu"))
    # GGUF weights are dequantised to fp32 on load (the same tensors our trainer trains), but transformers
    # keeps the GGUF quantizer on the model and Trainer refuses to train a "GGUF-quantized" one: drop it
    # with the quantizer's own remover (hf_quantizer, quantization_config, is_quantized)
    if getattr(model, "hf_quantizer", None) is not None:
        model.hf_quantizer.remove_quantization_config(model)
    ds = Dataset.from_list([{"prompt": [{"role": "user", "content": t.prompt}], "task": json.dumps(t.task)}
                            for t in order])
    per_chunk = PER_CHUNK
    args = GRPOConfig(
        output_dir=tempfile.mkdtemp(prefix="trl-"), use_cpu=True, bf16=False, seed=a.seed, max_steps=a.steps,
        per_device_train_batch_size=per_chunk, gradient_accumulation_steps=SETTINGS["gradient_accumulation_steps"],
        num_generations=SETTINGS["group_size"], max_completion_length=SETTINGS["max_completion_length"],
        temperature=SETTINGS["temperature"], top_p=1.0, learning_rate=SETTINGS["learning_rate"], beta=0.0,
        loss_type="grpo", scale_rewards="group", lr_scheduler_type="constant", warmup_steps=0,
        adam_beta2=0.99, weight_decay=0.0, max_grad_norm=1.0, shuffle_dataset=False, logging_steps=1,
        save_strategy="no", report_to=[], disable_tqdm=True,
        gradient_checkpointing=False,  # TRL turns it on by default; ours is off: the same work per step
    )
    steps: list[float] = []
    phases, snaps = Phases(), []
    if a.phases:
        phases.install((GRPOTrainer, "_calculate_rewards"))

    class Timer(TrainerCallback):
        def on_step_begin(self, *_a, **_k):
            snaps.append(phases.snapshot())
            self.t0 = time.perf_counter()

        def on_step_end(self, *_a, **_k):
            steps.append(time.perf_counter() - self.t0)
            snaps.append(phases.snapshot())

    targets = ["q_proj", "k_proj", "v_proj", "o_proj", "gate_proj", "up_proj", "down_proj"]
    trainer = GRPOTrainer(model=model, processing_class=tok, args=args, train_dataset=ds,
                          reward_funcs=[make_trl_reward_func(a.url)], callbacks=[Timer()],
                          peft_config=LoraConfig(r=SETTINGS["lora_r"], lora_alpha=SETTINGS["lora_alpha"],
                                                 lora_dropout=0.0, target_modules=targets, task_type="CAUSAL_LM"))
    trainer.train()
    return {"steps": steps, "final": heldout(trainer.model, tok, held, a.url),
            "phases": per_step(snaps, steps) if a.phases else None}


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--model", default="smollm2")
    ap.add_argument("--steps", type=int, default=6)
    ap.add_argument("--seeds", default="0")
    ap.add_argument("--num-eval", type=int, default=64)
    ap.add_argument("--threads", type=int, default=2, help="torch threads per trainer (the same for both)")
    ap.add_argument("--reward-url", default=None, help="a running server (default: start one, bwrap)")
    ap.add_argument("--json", default=None, help="also write the results here")
    ap.add_argument("--micro-batch", type=int, default=None,
                    help="our micro_batch_size (default: TRL's per-device batch, one accumulation chunk)")
    ap.add_argument("--phases", action="store_true",
                    help="also time each step's phases (generate, forward, backward, optimizer, rewards) on both sides")
    ap.add_argument("--child", choices=["ours", "trl"], help=argparse.SUPPRESS)
    ap.add_argument("--seed", type=int, default=0, help=argparse.SUPPRESS)
    ap.add_argument("--url", help=argparse.SUPPRESS)
    ap.add_argument("--with-baseline", action="store_true", help=argparse.SUPPRESS)
    ap.add_argument("--out", help=argparse.SUPPRESS)
    a = ap.parse_args()
    if a.child:
        res = child_ours(a) if a.child == "ours" else child_trl(a)
        Path(a.out).write_text(json.dumps(res))
        return 0

    from reward_server.local import SubprocessServer

    server = None
    url = a.reward_url
    if url is None:
        server = SubprocessServer.start(["--sandbox", "bwrap", "--text-logs"],
                                        log_path=Path(tempfile.gettempdir()) / "trainer_vs_trl-server.log")
        url = server.url
    rows = []
    try:
        for seed in [int(s) for s in a.seeds.split(",")]:
            common = ["--model", a.model, "--steps", str(a.steps), "--num-eval", str(a.num_eval), "--seed", str(seed),
                      "--url", url, "--threads", str(a.threads),
                      *(["--micro-batch", str(a.micro_batch)] if a.micro_batch is not None else []),
                      *(["--phases"] if a.phases else [])]
            ours, ours_peak = run_child(["--child", "ours", *common, "--with-baseline"])
            trl, trl_peak = run_child(["--child", "trl", *common])
            rows.append({"seed": seed, "ours": ours, "trl": trl, "ours_peak_mb": ours_peak, "trl_peak_mb": trl_peak})
    finally:
        if server is not None:
            server.stop()
    print(f"\n{a.steps} steps, {SETTINGS}, model {a.model}, {a.threads} threads each\n")
    print(f"{'seed':>4} {'ours s/step':>11} {'TRL s/step':>10} {'ratio':>6} {'ours peak MB':>12} {'TRL peak MB':>11} "
          f"{'ratio':>6} {'baseline':>8} {'ours final':>10} {'TRL final':>9}")
    for r in rows:
        o, t = statistics.median(r["ours"]["steps"]), statistics.median(r["trl"]["steps"])
        print(f"{r['seed']:>4} {o:>11.2f} {t:>10.2f} {o / t:>6.2f} {r['ours_peak_mb']:>12.0f} {r['trl_peak_mb']:>11.0f} "
              f"{r['ours_peak_mb'] / r['trl_peak_mb']:>6.2f} {r['ours']['baseline']:>8.3f} {r['ours']['final']:>10.3f} "
              f"{r['trl']['final']:>9.3f}")
    if a.phases:
        print("\nper-phase wall time (s), median over steps (see Phases)\n")
        names = [*Phases.NAMES, "other", "step"]
        print(f"{'seed':>4} {'side':>5} " + " ".join(f"{n:>15}" for n in names))
        for r in rows:
            for side in ("ours", "trl"):
                ph = r[side]["phases"]
                print(f"{r['seed']:>4} {side:>5} " + " ".join(f"{statistics.median(p[n] for p in ph):>15.2f}"
                                                               for n in names))
    if a.json:
        Path(a.json).write_text(json.dumps(rows, indent=1))
    return 0


if __name__ == "__main__":
    sys.exit(main())
