"""Subprocess / torchrun entry for the resume and DDP tests (tiny model, local fake scorer).

usage: python -m tests.trainer.worker MODEL_DIR STATE_DIR OUT_JSON [--steps N] [--resume] [--hang-at K]
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
    a = ap.parse_args()

    import torch

    torch.set_num_threads(1)
    from tests.trainer.tiny import digit_reward
    from trainer.config import TrainConfig
    from trainer.rewards import CallableScorer
    from trainer.trainer import GRPOTrainer

    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        cfg = TrainConfig(
            model=a.model_dir, state_dir=a.state_dir, max_steps=a.steps, prompts_per_step=2, group_size=4,
            max_completion_length=10, num_train_tasks=30, num_eval_tasks=0, eval_every=0, save_every=1,
            keep_checkpoints=2, learning_rate=1e-2, progress_bar=False, device="cpu", baseline_eval=False,
            resume=a.resume, min_group_std=0.0, gradient_accumulation_steps=2, kl_coeff=0.04,
            lora={"enabled": a.lora, "r": 2, "target_modules": ["q_proj", "v_proj"]},
        )

    seen: list[str] = []

    def hook(tr, rec):
        if a.hang_at and tr.step == a.hang_at:
            print("HANG", flush=True)
            time.sleep(3600)

    tr = GRPOTrainer(cfg, scorer=CallableScorer(digit_reward), step_hook=hook)
    start_step, start_pos = tr.step, tr.stream.position
    orig = tr._rollout_round

    def spy(items, *args, **kw):
        seen.extend(t.id for t in items)
        return orig(items, *args, **kw)

    tr._rollout_round = spy

    def digest() -> str:
        h = hashlib.sha256()
        for n, p in sorted(tr.policy.named_parameters()):
            if p.requires_grad:
                h.update(n.encode())
                h.update(p.detach().cpu().float().numpy().tobytes())
        return h.hexdigest()

    init = digest()
    res = tr.train()
    tr.close()
    rank = int(os.environ.get("RANK", 0))
    out = {
        "rank": rank, "start_step": start_step, "start_position": start_pos, "step": res["step"],
        "data_position": res["data_position"], "init_digest": init, "digest": digest(), "seen": seen,
    }
    path = a.out.replace("RANK", str(rank))
    with open(path, "w") as f:
        json.dump(out, f)


if __name__ == "__main__":
    main()
