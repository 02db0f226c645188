#!/usr/bin/env bash
# A/B of two trees (each with its own sandbox image) on the docker host, interleaved A B A B ...
#
#   bash bench/ab_throughput.sh TREE_A IMAGE_A TREE_B IMAGE_B [ROUNDS] [PASSES]
#   e.g. bash bench/ab_throughput.sh /work/wt/base verireward-sandbox:base . verireward-sandbox:latest 3 3
#
# Per round and tree: bench/sandbox_throughput.py (docker host, subprocess and `docker run`
# at c=2, the issue-15 figures: docker host / docker run and / subprocess in the same run),
# then bench/cpu_per_job.py (CPU ms per job by process class; wall clock on a shared machine is
# noise, CPU time much less). Each tree runs its own bench scripts and its own runner code (the
# docker host mounts the tree's sandbox/ into the container); cpu_per_job.py is this tree's.
# Prints one line per run and the medians per tree; raw lines go to $OUT (default /tmp/ab.txt).
# SIMULTANEOUS=1: only cpu_per_job.py, A and B at the same time in each round (each at c=2), so a
# shared machine's load falls on both alike (its CPU figures then carry both pools' contention).
set -euo pipefail
A=$(cd "$1" && pwd); IA=$2; B=$(cd "$3" && pwd); IB=$4; ROUNDS=${5:-3}; PASSES=${6:-3}
HERE=$(cd "$(dirname "$0")" && pwd)
PY=${PYTHON:-python3}
OUT=${OUT:-/tmp/ab.txt}
: > "$OUT"
run() {  # tree image label
  local tree=$1 image=$2 label=$3 tp cpu
  tp=$(cd "$tree" && VERIREWARD_SANDBOX_IMAGE=$image PYTHONPATH=$tree nice -n 10 "$PY" bench/sandbox_throughput.py \
        --methods docker,subprocess,docker-run --repeat 1 --passes "$PASSES" --concurrency 2 --docker-run-limit 24 2>/dev/null \
        | grep '^c=2 docker host' || true)
  cpu=$(cd "$tree" && VERIREWARD_SANDBOX_IMAGE=$image PYTHONPATH=$tree nice -n 10 "$PY" "$HERE/cpu_per_job.py" \
        --passes "$PASSES" --concurrency 2 --label "$label" --json 2>/dev/null | tail -1)
  echo "$label | $tp | $cpu" | tee -a "$OUT"
}
cpu_only() {  # tree image label
  local cpu
  cpu=$(cd "$1" && VERIREWARD_SANDBOX_IMAGE=$2 PYTHONPATH=$1 nice -n 10 "$PY" "$HERE/cpu_per_job.py" \
        --passes "$PASSES" --concurrency 2 --label "$3" --json 2>/dev/null | tail -1)
  echo "$3 | (simultaneous) | $cpu" >> "$OUT"
}
for _ in $(seq "$ROUNDS"); do
  if [ "${SIMULTANEOUS:-0}" = "1" ]; then
    cpu_only "$A" "$IA" A &
    cpu_only "$B" "$IB" B
    wait
    tail -2 "$OUT"
  else
    run "$A" "$IA" A
    run "$B" "$IB" B
  fi
done
"$PY" - "$OUT" <<'PY'
import json, re, statistics as st, sys
rows = {"A": [], "B": []}
for line in open(sys.argv[1]):
    label, tp, cpu = (p.strip() for p in line.split("|", 2))
    run = re.search(r"([\d.]+)x docker run", tp)
    sub = re.search(r"([\d.]+)x subprocess", tp)
    rows[label].append((float(run.group(1)) if run else float("nan"), float(sub.group(1)) if sub else float("nan"),
                        json.loads(cpu) if cpu.startswith("{") else {}))
for label, rs in rows.items():
    if not rs:
        continue
    cpu = {k: st.median(r[2].get(k, 0.0) for r in rs) for k in ("total", "candidates", "vr-super", "vr-spawner",
                                                                  "vr-verdict", "client")}
    walls = [r for r in rs if r[0] == r[0]]  # none in SIMULTANEOUS mode (nan)
    wall = (f"median {st.median(r[0] for r in walls):.1f}x docker run, {st.median(r[1] for r in walls):.2f}x subprocess; "
            if walls else "")
    print(f"{label}: {wall}CPU ms/job " + " ".join(f"{k}={v:.3f}" for k, v in cpu.items()))
if rows["A"] and rows["B"]:
    pairs = [b[2].get("total", 0) / a[2]["total"] for a, b in zip(rows["A"], rows["B"]) if a[2].get("total")]
    print("B/A CPU per job, per round:", " ".join(f"{x:.3f}" for x in pairs))
PY
