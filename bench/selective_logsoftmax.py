"""Selective log-softmax (trainer/logprobs.py) against the plain autograd form it replaced.

Forward + backward of ``log softmax(h @ W.T / temperature)[target]`` on the update's shape (rows x
completion tokens x vocab, SmolLM2's 49152 by default), the LM head matmul included, each variant
in its own child process so peak RSS is its own. Prints a table: seconds per pass (median) and
peak RSS, ours beside the baseline.

    python bench/selective_logsoftmax.py --rows 16 --tokens 64 --threads 2
"""

from __future__ import annotations

import argparse
import json
import resource
import statistics
import subprocess
import sys
import time
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))


def child(a: argparse.Namespace) -> dict:
    import torch
    import torch.nn.functional as F

    from trainer.logprobs import selective_log_softmax

    torch.set_num_threads(a.threads)
    g = torch.Generator().manual_seed(0)
    W = torch.randn(a.vocab, a.hidden, generator=g) * 0.02
    h0 = torch.randn(a.rows, a.tokens + 1, a.hidden, generator=g)
    tg = torch.randint(0, a.vocab, (a.rows, a.tokens), generator=g)

    def plain(logits):  # what token_logprobs did before: per-row log_softmax, gather, stack
        lg = logits[:, :-1, :]
        return torch.stack([F.log_softmax(lg[i].float() / a.temperature, -1).gather(-1, tg[i].unsqueeze(-1)).squeeze(-1)
                            for i in range(lg.shape[0])])

    def selective(logits):
        return selective_log_softmax(logits, tg, 0, a.temperature)

    fn = plain if a.child == "plain" else selective
    times = []
    for _ in range(a.repeats):
        h = h0.clone().requires_grad_(True)
        t0 = time.perf_counter()
        fn(h @ W.t()).sum().backward()
        times.append(time.perf_counter() - t0)
    return {"times": times, "peak_mb": resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024}


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--rows", type=int, default=16)
    ap.add_argument("--tokens", type=int, default=64)
    ap.add_argument("--vocab", type=int, default=49152)
    ap.add_argument("--hidden", type=int, default=576)
    ap.add_argument("--temperature", type=float, default=0.7)
    ap.add_argument("--repeats", type=int, default=5)
    ap.add_argument("--threads", type=int, default=2)
    ap.add_argument("--child", choices=["plain", "selective"], help=argparse.SUPPRESS)
    a = ap.parse_args()
    if a.child:
        print(json.dumps(child(a)))
        return 0
    passed = [f"--{k}={v}" for k, v in vars(a).items() if k != "child"]
    res = {}
    for kind in ("plain", "selective"):
        out = subprocess.run([sys.executable, __file__, *passed, "--child", kind], capture_output=True, text=True,
                             check=True, cwd=REPO)
        res[kind] = json.loads(out.stdout.strip().splitlines()[-1])
    print(f"\n{a.rows} rows x {a.tokens} tokens x {a.vocab} vocab, hidden {a.hidden}, {a.threads} threads, "
          f"forward + backward incl. the LM head matmul, median of {a.repeats}\n")
    print(f"{'variant':>10} {'s/pass':>7} {'peak RSS MB':>11}")
    for kind in ("plain", "selective"):
        r = res[kind]
        print(f"{kind:>10} {statistics.median(r['times']):>7.2f} {r['peak_mb']:>11.0f}")
    p, s = (statistics.median(res[k]["times"]) for k in ("plain", "selective"))
    print(f"\nselective / plain: time {s / p:.2f}x, peak {res['selective']['peak_mb'] / res['plain']['peak_mb']:.2f}x")
    return 0


if __name__ == "__main__":
    sys.exit(main())
