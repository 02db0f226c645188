"""Subprocess / torchrun entry for the resume and DDP tests (tiny model, local fake scorer).

usage: python -m tests.trainer.worker MODEL_DIR STATE_DIR OUT_JSON [--steps N] [--resume] [--hang-at K]
       [--lora] [--fsdp] [--fixed] [--prompts N] [--dump PATH]

``--fixed`` replaces sampling with completions fixed by the prompt (scoring, advantages, log-probs,
forward/backward and the optimizer stay real), so runs with different world sizes see the same
batch; ``--dump`` saves the trained weights (whole, gathered from the shards) for comparison.
"""

from __future__ import annotations

import argparse
import hashlib
import json
import os
import time
import warnings


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("model_dir")
    ap.add_argument("state_dir")
    ap.add_argument("out")
    ap.add_argument("--steps", type=int, default=4)
    ap.add_argument("--resume", action="store_true")
    ap.add_argument("--hang-at", type=int, default=0, help="sleep forever in the hook of this step")
    ap.add_argument("--lora", action="store_true")
    ap.add_argument("--fsdp", action="store_true")
    ap.add_argument("--fixed", action="store_true")
    ap.add_argument("--prompts", type=int, default=2, help="prompts per step per process")
    ap.add_argument("--dump", default="")
    a = ap.parse_args()

    import torch

    torch.set_num_threads(1)
    from tests.trainer.tiny import digit_reward
    from trainer import sharding
    from trainer.config import TrainConfig
    from trainer.metrics import read_metrics
    from trainer.rewards import CallableScorer
    from trainer.trainer import GRPOTrainer

    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        cfg = TrainConfig(
            model=a.model_dir, state_dir=a.state_dir, max_steps=a.steps, prompts_per_step=a.prompts, group_size=4,
            max_completion_length=10, num_train_tasks=30, num_eval_tasks=0, eval_every=0, save_every=1,
            keep_checkpoints=2, learning_rate=1e-2, progress_bar=False, device="cpu", baseline_eval=False,
            resume=a.resume, min_group_std=0.0, gradient_accumulation_steps=2, kl_coeff=0.04,
            lora={"enabled": a.lora, "r": 2, "target_modules": ["q_proj", "v_proj"]},
            parallelism="fsdp" if a.fsdp else "ddp", num_iterations=2 if a.fixed else 1,
            micro_batch_size=3,
        )

    seen: list[str] = []

    def hook(tr, rec):
        if a.hang_at and tr.step == a.hang_at:
            # the pid (torchrun starts its workers in new sessions), in one write: both ranks share the pipe
            os.write(1, f"HANG {os.getpid()}\n".encode())
            time.sleep(3600)

    tr = GRPOTrainer(cfg, scorer=CallableScorer(digit_reward), step_hook=hook)
    start_step, start_pos = tr.step, tr.stream.position
    orig = tr._rollout_round

    def spy(items, *args, **kw):
        seen.extend(t.id for t in items)
        return orig(items, *args, **kw)

    tr._rollout_round = spy
    if a.fixed:
        fix_rollouts(tr)

    def full_params() -> dict[str, torch.Tensor]:
        # every rank gathers every trainable tensor, in the same order (a collective under FSDP)
        return {n: sharding.full_tensor(p.detach()).cpu().float().clone()
                for n, p in sorted(tr.policy.named_parameters()) if p.requires_grad}

    def digest() -> str:
        h = hashlib.sha256()
        for n, t in full_params().items():
            h.update(n.encode())
            h.update(t.numpy().tobytes())
        return h.hexdigest()

    init = digest()
    res = tr.train()
    losses = [r["loss"] for r in read_metrics(os.path.join(a.state_dir, "metrics.jsonl")) if r["kind"] == "train"] \
        if tr.is_main else []
    final = full_params()
    tr.close()
    rank = int(os.environ.get("RANK", 0))
    if a.dump and rank == 0:
        torch.save(final, a.dump)
    out = {
        "rank": rank, "start_step": start_step, "start_position": start_pos, "step": res["step"],
        "data_position": res["data_position"], "init_digest": init, "digest": digest(), "seen": seen,
        "losses": losses,
    }
    path = a.out.replace("RANK", str(rank))
    with open(path, "w") as f:
        json.dump(out, f)


def fix_rollouts(tr) -> None:
    """Completions fixed by the prompt text: k-th of a group is a digit/letter mix of length k+2."""
    import torch

    from trainer.rollout import Sequence

    tok = tr.tokenizer

    def gen(items, n, temperature):
        out = []
        for j, (it, ptxt) in enumerate(zip(items, tr._prompts(items), strict=True)):
            pids = torch.tensor(tok(ptxt, add_special_tokens=False)["input_ids"])
            for k in range(n):
                text = "".join(it.prompt[(k * 7 + i) % len(it.prompt)] if (i + k) % 3 else str(i % 10)
                               for i in range(k + 2))
                ids = tok(text, add_special_tokens=False)["input_ids"] + [tok.eos_token_id]
                out.append(Sequence(pids, torch.tensor(ids), text, False, j))
        return out

    tr._gen = gen


if __name__ == "__main__":
    main()
