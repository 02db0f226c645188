"""Every benchmark of the project in one run, one table of ratios against the baselines, and a
plot of throughput vs concurrency (docker host, bwrap host, the baselines).

    python bench/run_all.py                    # full: ~10-15 min on 2 cores
    python bench/run_all.py --quick            # smaller corpora: ~4 min
    python bench/run_all.py --only sandbox,load --out bench/results

Runs, each as its own process (so one failing does not hide the others):

    sandbox   bench/sandbox_throughput.py --corpus canonical --concurrency 1,2,4 --json ...
    e2e       bench/server_e2e.py --sandbox bwrap / docker      (HTTP end-to-end vs the pool alone)
    math      bench/math_bench.py                               (ours vs Math-Verify, when installed)
    load      bench/load_test.py --sandbox bwrap / docker --faults --json ...

Writes OUT/summary.json, OUT/ratios.md, OUT/throughput.png and each benchmark's raw output
(OUT/*.log, OUT/*.json). Docker parts are skipped when no engine or image answers.
"""

from __future__ import annotations

import argparse
import json
import os
import re
import subprocess
import sys
import time
from pathlib import Path

HERE = Path(__file__).resolve().parent
ROOT = HERE.parent
sys.path.insert(0, str(ROOT))


def run(name: str, cmd: list[str], out: Path, timeout: float) -> tuple[int, str]:
    print(f"[run_all] {name}: {' '.join(cmd)}", flush=True)
    t0 = time.perf_counter()
    env = {**os.environ, "PYTHONPATH": os.pathsep.join([str(ROOT), os.environ.get("PYTHONPATH", "")])}
    try:
        p = subprocess.run(cmd, cwd=ROOT, env=env, capture_output=True, text=True, timeout=timeout)
        code, text = p.returncode, p.stdout + "\n--- stderr ---\n" + p.stderr[-20000:]
    except subprocess.TimeoutExpired as e:
        code, text = 124, f"timed out after {timeout}s\n{e.stdout or ''}"
    (out / f"{name}.log").write_text(text)
    print(f"[run_all] {name}: exit {code} in {time.perf_counter() - t0:.0f} s", flush=True)
    return code, text


def docker_ok() -> bool:
    try:
        from sandbox.hosts import docker_available
        from sandbox.hosts.docker import DockerHost

        return docker_available() and DockerHost.image_present(DockerHost.default_image())
    except Exception:  # noqa: BLE001
        return False


# ---- parsing each benchmark's output -------------------------------------------------------


def parse_e2e(text: str) -> dict | None:
    m = re.search(r"HTTP / pool-only: ([\d.]+)x \(best\), ([\d.]+)x \(median\)", text)
    rates = re.findall(r"^(pool only \(in-process\)|HTTP end-to-end)\s+([\d.]+)\s+([\d.]+)\s+([\d.]+)", text, re.M)
    mism = re.search(r"verdict mismatches between the paths: (\d+)", text)
    if not m:
        return None
    out = {"http_over_pool_best": float(m.group(1)), "http_over_pool_median": float(m.group(2)),
           "mismatches": int(mism.group(1)) if mism else None}
    for name, best, _med, rate in rates:
        key = "pool" if name.startswith("pool") else "http"
        out[f"{key}_best_s"] = float(best)
        out[f"{key}_per_s"] = float(rate)
    return out


def parse_math(text: str) -> list[dict]:
    rows = []
    for line in text.splitlines():
        cells = [c.strip() for c in line.strip().strip("|").split("|")]
        if len(cells) == 9 and cells[1].endswith("%") and not cells[0].startswith("-"):
            rows.append({"name": cells[0], "acc_all": float(cells[1][:-1]) / 100, "acc_nc": float(cells[2][:-1]) / 100,
                         "false_positives": cells[3], "p50_ms": float(cells[4]), "p99_ms": float(cells[5]),
                         "total_s": float(cells[8])})
    return rows


# ---- the table and the plot ------------------------------------------------------------------


def ratio_rows(summary: dict) -> list[tuple[str, str, str, str]]:
    """(what, measured, baseline, ratio) rows."""
    rows: list[tuple[str, str, str, str]] = []
    sb = summary.get("sandbox") or []
    by = {(o["method"], o["concurrency"]): o for o in sb}
    targets = {"docker run": 50.0, "subprocess": 2.0}
    for conc in sorted({o["concurrency"] for o in sb}):
        for host in ("docker host", "bwrap host"):
            h = by.get((host, conc))
            if not h:
                continue
            # the docker host runs the image's python: its own-build baselines when measured
            label = " [image's python]" if host == "docker host" and ("subprocess [image's python]", conc) in by else ""
            for base in ("docker run", f"subprocess{label}", f"floor (fork, in-process){label}"):
                b = by.get((base, conc))
                if b and b["rate"]:
                    t = targets.get(base.split(" [")[0])
                    r = h["rate"] / b["rate"]
                    verdict = "" if t is None else f" (target >= {t:g}x: {'met' if r >= t else 'MISSED'})"
                    rows.append((f"sandbox c={conc}: {host}", f"{h['rate']:.1f}/s", f"{base} {b['rate']:.1f}/s",
                                 f"{r:.2f}x{verdict}"))
    for kind, e in (summary.get("e2e") or {}).items():
        if e:
            r = e["http_over_pool_median"]
            rows.append((f"server e2e ({kind}): HTTP time", f"{e.get('http_best_s', float('nan')):.2f} s best",
                         f"pool alone {e.get('pool_best_s', float('nan')):.2f} s",
                         f"{r:.2f}x median, {e['http_over_pool_best']:.2f}x best (target <= 1.3x: "
                         f"{'met' if r <= 1.3 else 'MISSED'})"))
    math_rows = summary.get("math") or []
    ours = next((m for m in math_rows if m["name"].startswith("ours (sequential")), None)
    mv = next((m for m in math_rows if m["name"].startswith("Math-Verify")), None)
    if ours and mv:
        rows.append(("math: accuracy, non-contested", f"{ours['acc_nc']:.1%}", f"Math-Verify {mv['acc_nc']:.1%}",
                     f"{ours['acc_nc'] / mv['acc_nc']:.3f}x"))
        rows.append(("math: p50 per case", f"{ours['p50_ms']:.1f} ms", f"Math-Verify {mv['p50_ms']:.1f} ms",
                     f"{ours['p50_ms'] / mv['p50_ms']:.2f}x"))
    elif ours:
        rows.append(("math: accuracy, non-contested", f"{ours['acc_nc']:.1%}", "Math-Verify not installed", "-"))
    for kind, lr in (summary.get("load") or {}).items():
        phases = {p["phase"]: p for p in (lr or {}).get("phases", [])}
        load, faults = phases.get("load"), phases.get("faults")
        if load:
            rows.append((f"load ({kind}): mixed batches", f"{load['items_per_s']} items/s, p99 {load['latency_p99_s']} s",
                         f"p50 {load['latency_p50_s']} s", f"{load['problems']} problems, codes {load['codes']}"))
        if load and faults and load["items_per_s"]:
            rows.append((f"load ({kind}): with runner kills", f"{faults['items_per_s']} items/s",
                         f"no faults {load['items_per_s']} items/s",
                         f"{faults['items_per_s'] / load['items_per_s']:.2f}x, {faults.get('runners_killed')} kills, "
                         f"{faults['problems']} problems"))
    return rows


def print_table(rows: list[tuple[str, str, str, str]]) -> str:
    lines = ["| benchmark | measured | baseline | ratio |", "|---|---|---|---|"]
    lines += [f"| {a} | {b} | {c} | {d} |" for a, b, c, d in rows]
    text = "\n".join(lines)
    print("\n" + text)
    return text


def plot(sandbox: list[dict], path: Path, corpus: str = "canonical") -> None:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    styles = {"docker host": ("tab:blue", "o", "-"), "bwrap host": ("tab:green", "s", "-"),
              "subprocess": ("tab:gray", "^", "--"), "docker run": ("tab:red", "v", "--"),
              "floor (fork, in-process)": ("black", "x", ":")}
    fig, ax = plt.subplots(figsize=(7, 4.5), dpi=110)
    for method in sorted({o["method"] for o in sandbox}, key=lambda m: list(styles).index(m) if m in styles else 99):
        pts = sorted((o["concurrency"], o["rate"]) for o in sandbox if o["method"] == method)
        c, m, ls = styles.get(method, (None, ".", "-"))
        ax.plot([p[0] for p in pts], [p[1] for p in pts], marker=m, linestyle=ls, color=c, label=method)
    ax.set_xlabel("concurrency (jobs in flight)")
    ax.set_ylabel("completions / s")
    ax.set_yscale("log")
    ax.set_xticks(sorted({o["concurrency"] for o in sandbox}))
    ax.set_title(f"Sandbox throughput, HumanEval {corpus} corpus ({os.cpu_count()} cores)")
    ax.grid(True, which="both", alpha=0.3)
    ax.legend()
    fig.tight_layout()
    fig.savefig(path)
    print(f"[run_all] plot: {path}")


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--quick", action="store_true", help="smaller corpora (minutes)")
    ap.add_argument("--only", default="sandbox,e2e,math,load")
    ap.add_argument("--concurrency", default="1,2,4")
    ap.add_argument("--corpus", default="canonical", choices=["canonical", "mixed"],
                    help="sandbox_throughput corpus (the targets are set on canonical; mixed adds hangs)")
    ap.add_argument("--out", default=str(ROOT / "bench" / "results"))
    ap.add_argument("--plot", default=None, help="PNG path (default OUT/throughput.png)")
    ap.add_argument("--from-json", default=None, help="only redo the table and plot from an earlier summary.json")
    a = ap.parse_args(argv)
    out = Path(a.out)
    out.mkdir(parents=True, exist_ok=True)
    py = sys.executable
    only = set(a.only.split(","))
    kinds = ["bwrap"] + (["docker"] if docker_ok() else [])
    if "docker" not in kinds:
        print("[run_all] no Docker engine or image: docker parts skipped", flush=True)

    summary: dict = {"cpus": os.cpu_count(), "quick": a.quick, "corpus": a.corpus, "kinds": kinds, "started": time.strftime("%Y-%m-%d %H:%M")}
    if a.from_json:
        summary = json.loads(Path(a.from_json).read_text())
    else:
        if "sandbox" in only:
            js = out / "sandbox_throughput.json"
            cmd = [py, str(HERE / "sandbox_throughput.py"), "--corpus", a.corpus, "--concurrency", a.concurrency,
                   "--json", str(js)]
            if a.quick:
                cmd += ["--limit", "40", "--docker-run-limit", "16"]
            code, _ = run("sandbox_throughput", cmd, out, 1800)
            summary["sandbox"] = json.loads(js.read_text()) if code == 0 and js.exists() else None
        if "e2e" in only:
            summary["e2e"] = {}
            for k in kinds:
                cmd = [py, str(HERE / "server_e2e.py"), "--sandbox", k, "--pool", "2"]
                if a.quick:
                    cmd += ["--prompts", "16", "--rounds", "1"]
                code, text = run(f"server_e2e_{k}", cmd, out, 1200)
                summary["e2e"][k] = parse_e2e(text) if code == 0 else None
        if "math" in only:
            code, text = run("math_bench", [py, str(HERE / "math_bench.py")], out, 1200)
            summary["math"] = parse_math(text) if code == 0 else None
        if "load" in only:
            summary["load"] = {}
            for k in kinds:
                js = out / f"load_{k}.json"
                cmd = [py, str(HERE / "load_test.py"), "--sandbox", k, "--faults", "--json", str(js),
                       "--requests", "24" if a.quick else "80", "--rss-batches", "30" if a.quick else "100"]
                code, _ = run(f"load_test_{k}", cmd, out, 1200)
                summary["load"][k] = json.loads(js.read_text()) if js.exists() else None
                if summary["load"][k] is not None:
                    summary["load"][k]["exit_code"] = code
        (out / "summary.json").write_text(json.dumps(summary, indent=1))

    table = print_table(ratio_rows(summary))
    (out / "ratios.md").write_text(table + "\n")
    if summary.get("sandbox"):
        plot(summary["sandbox"], Path(a.plot) if a.plot else out / "throughput.png", summary.get("corpus", "canonical"))
    failed = [k for k in ("sandbox", "e2e", "math", "load") if k in summary and not summary[k]]
    if failed:
        print(f"[run_all] no figures from: {', '.join(failed)} (see the logs in {out})")
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
