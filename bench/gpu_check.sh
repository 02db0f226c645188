#!/usr/bin/env bash
# The trainer's GPU check (issue 19): a few GRPO steps of the bundled SmolLM2-135M in bf16 with
# LoRA and with full fine-tuning, with model.generate and (if its wheels were carried) vLLM;
# prints step time, tokens/s, peak GPU memory and the held-out change. Needs nothing reachable:
# local reward functions, no reward server, no hub. Finishes in under 8 minutes (hard limit 470 s).
#
#   bash bench/gpu_check.sh                 # on a CUDA machine
#   bash bench/gpu_check.sh --dry --model DIR   # CPU dry run (CI): arguments, model load, one step
#   bash bench/gpu_check.sh --help
set -euo pipefail
cd "$(dirname "$0")/.."
PY="${PYTHON:-.venv/bin/python}"
[ -x "$PY" ] || PY="$(command -v python3)"
export PYTHONPATH="$PWD${PYTHONPATH:+:$PYTHONPATH}"
export HF_HUB_OFFLINE=1 TRANSFORMERS_OFFLINE=1 TOKENIZERS_PARALLELISM=false
exec timeout 470 "$PY" -m trainer.gpu_check "$@"
