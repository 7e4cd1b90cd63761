#!/usr/bin/env bash
# Many questions in one GPU call of at most 4 minutes (benchmarks/probe.py says what):
#
#   bash benchmarks/gpu_probe.sh        # first in any GPU session, before gpu_session.sh
#
# The update's variants side by side (K, deterministic kernels, the scan's unroll, float32,
# TF32 and bfloat16 products, the fused optimizer step), a profile of one K = 64 call (the
# kernels per update, the ten costliest), and the fast loop at W = 32 in two groups for
# K = 8, 16, 32 and 64 (acting latency while training and alone, the trainer's call, the
# main thread's Python cost per round at W = 64). Always JAX: the probe measures its calls.
#
# Outputs go to OUT, a new or empty folder (default: a new runs/gpu-probe-<UTC time>):
# header.txt, probe.md (the table) and probe.json (every figure). The folder rules, the
# stop without a GPU and GPU_SESSION_CPU=1 are gpu_session.sh's (session_checks.sh); on a
# CPU the probe runs at --tiny's sizes, in under a minute, and says so.
set -uo pipefail
cpu=${GPU_SESSION_CPU:-0}
stamp=$(date -u +%Y%m%d-%H%M%S)
out=${OUT:-runs/gpu-probe-$stamp}
export KERAS_BACKEND=jax PYTHONUNBUFFERED=1

source "$(dirname -- "$0")/session_checks.sh"
me=gpu_probe.sh
check_cpu_choice
check_out_folder
check_device

mkdir -p -- "$out" || refuse "cannot create $named; give OUT a folder you can write"
write_header
sizes=()
[ "$cpu" = 1 ] && sizes=(--tiny)
timeout 235 python3 -m benchmarks.probe "${sizes[@]}" --seconds 215 --out "$out"
