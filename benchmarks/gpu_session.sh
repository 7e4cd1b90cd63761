#!/usr/bin/env bash
# Every GPU measurement docs/gpu.md asks for, in as few calls as a 30-minute lease allows.
# Each part fits one 10-minute device call; run them in order, each in its own call:
#
#   bash benchmarks/gpu_session.sh learner   # the learner: K per call x replay's place (~5 min)
#   bash benchmarks/gpu_session.sh loops     # the loops and the samplers alone, W = 8..64 (~8 min)
#   bash benchmarks/gpu_session.sh pong      # pong-fastest to a mean of 100 games at 18 (~9 min)
#   bash benchmarks/gpu_session.sh pong      # again: resumes the same run, if still short of 18
#
# Outputs go to $OUT (the device tool's folder; ./gpu-out elsewhere). Give every figure with
# the GPU's name, the core count, the backend and the commit: the header lines say them.
set -uo pipefail
part=${1:?usage: gpu_session.sh learner|loops|pong}
out=${OUT:-gpu-out}
mkdir -p "$out"
export KERAS_BACKEND=${KERAS_BACKEND:-jax} PYTHONUNBUFFERED=1
{
    echo "commit $(git rev-parse --short HEAD 2>/dev/null || echo unknown), $(date -u +%FT%TZ)"
    nvidia-smi -L 2>/dev/null || echo "no nvidia-smi"
    echo "cores $(nproc), load average $(cut -d' ' -f1-3 /proc/loadavg)"
    grep -m1 '^model name' /proc/cpuinfo
} | tee "$out/$part-header.txt"

case $part in
learner)
    # The fixed cost per call, then amortized over K: batch 32 (Nature) and 128 (pong-fastest).
    timeout 560 python3 -m benchmarks.learner --batch-sizes 32,128 --precisions float32,bfloat16 \
        --updates-per-call 1,16,64,256 --replay-device host,device --repeats 3 --seconds 2 \
        2>&1 | tee "$out/learner.txt"
    ;;
loops)
    # Nature ratios at epsilon 0.1: the fast loop at W = 8..64 with the trainer's busy
    # fraction, the learner's ceiling and the samplers alone at each W.
    timeout 560 python3 -m benchmarks.speedtest --workers 8,16,32,64 --epsilon 0.1 \
        --repeats 1 --steps 20000 --csv "$out/speedtest.csv" \
        --only nature,fast-8-on-on,fast-16-on-on,fast-32-on-on,fast-64-on-on,learner,samplers-8,samplers-16,samplers-32,samplers-64 \
        2>&1 | tee "$out/speedtest.txt"
    ;;
pong)
    # One sitting per call; the machine keeps runs/ while warm, so a second call resumes.
    run=runs/gpu-pong
    if [ -f "$run/config.json" ]; then args=(--resume "$run"); else
        args=(--preset pong-fastest --workers 16 --evaluate 0 --logdir "$run"); fi
    timeout -s INT 540 python3 run_fast_dqn.py "${args[@]}" 2>&1 | tail -60 | tee "$out/pong.txt"
    cp "$run/episodes.csv" "$run/config.json" "$out/" 2>/dev/null
    ;;
*)
    echo "gpu_session.sh: unknown part '$part'; use learner, loops or pong" >&2
    exit 2
    ;;
esac
