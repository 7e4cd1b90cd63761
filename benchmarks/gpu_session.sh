#!/usr/bin/env bash
# Every GPU row docs/gpu.md carries, measured in one device call of at most 9 minutes:
#
#   bash benchmarks/gpu_session.sh            # everything, in the order below; one table last
#   bash benchmarks/gpu_session.sh groups     # or one part alone: learner|groups|loops|suite|pong
#
# Parts, each alone on the machine and each with its own time limit, so that the call ends
# inside its 9 minutes whatever happens (the pong run takes whatever time is left):
#   learner  the learner alone, batch 32, float32, replay on the device: K = 1, 64 and 256;
#            then K = 64 without XLA's deterministic kernels and with the scan's body as a
#            command buffer (CUDA graph), to say what each would buy
#   groups   runs as a batch axis: the learner at K = 64 for G = 1, 2, 4, 8 and 16 runs in
#            one call; then a suite of 8 Dopamine-protocol runs (4 games x 2 seeds) for 100 s
#            twice, as 8 processes and as 2 run groups of 4 (--runs-per-process 4), each
#            with the 49-game estimate its rate gives
#   loops    the Nature loop; the samplers alone and the fast loop at W = 16, 32 and 64,
#            the loop over 4 target periods (a window of one period holds a compile: 1,067
#            where the steady state was 4,337); then the samplers at W = 64 and the fast
#            loop at W = 32 in two groups that take turns (--sampler-groups 2)
#   suite    `fast-dqn suite` of 4 Dopamine-protocol runs sharing the GPU, 100 s: the sum of
#            their agent steps/s
#   pong     `pong-fastest` at W = 16 until the mean of 100 games reaches 18 (the run's own
#            clock), in whole minutes of what is left; resumed if runs/gpu-pong exists from
#            an earlier call on the same warm machine
#
# Outputs go to $OUT (the device tool's folder, packed there as table.md and gpu-session.tgz;
# ./gpu-out elsewhere). The header names the GPU, the cores, the backend and the commit: give
# every figure with them.
set -uo pipefail
part=${1:-all}
case $part in all|learner|groups|loops|suite|pong) ;; *)
    echo "gpu_session.sh: unknown part '$part'; use all, learner, groups, loops, suite or pong" >&2
    exit 2 ;;
esac
out=${OUT:-gpu-out}
mkdir -p "$out"
export KERAS_BACKEND=${KERAS_BACKEND:-jax} PYTHONUNBUFFERED=1
budget=${GPU_SESSION_SECONDS:-540}  # the whole call; the device tool allows 600
start=$SECONDS
left() { echo $((budget - (SECONDS - start))); }
# A part runs when asked for and when its own time limit still fits in what is left, so
# the call ends inside its budget; a part skipped shows "not measured" in the table.
wants() {
    { [ "$part" = all ] || [ "$part" = "$1" ]; } || return 1
    if [ "$(left)" -lt "$2" ]; then echo "== $1 skipped: $(left) s left, it needs $2"; return 1; fi
}
{
    echo "commit $(git rev-parse --short HEAD 2>/dev/null || echo unknown), $(date -u +%FT%TZ)"
    nvidia-smi -L 2>/dev/null || echo "no nvidia-smi"
    echo "cores $(nproc), load average $(cut -d' ' -f1-3 /proc/loadavg)"
    grep -m1 '^model name' /proc/cpuinfo
    echo "Keras backend $KERAS_BACKEND"
} | tee "$out/header.txt"

if wants learner 160; then
    echo "== learner ($(left) s left)"
    timeout 100 python3 -m benchmarks.learner --batch-sizes 32 --precisions float32 \
        --updates-per-call 1,64,256 --replay-device device --repeats 1 --seconds 1 \
        2>&1 | tee "$out/learner.txt"
    echo "-- without deterministic kernels" | tee -a "$out/learner.txt"
    XLA_FLAGS="--xla_gpu_deterministic_ops=false" timeout 30 python3 -m benchmarks.learner \
        --batch-sizes 32 --precisions float32 --updates-per-call 64 --replay-device device \
        --repeats 1 --seconds 1 2>&1 | tee -a "$out/learner.txt"
    echo "-- the scan's body as a command buffer" | tee -a "$out/learner.txt"
    XLA_FLAGS="--xla_gpu_deterministic_ops=true --xla_gpu_enable_command_buffer=FUSION,CUBLAS,CUBLASLT,CUSTOM_CALL,CUDNN,WHILE,CONDITIONAL" \
        timeout 30 python3 -m benchmarks.learner --batch-sizes 32 --precisions float32 \
        --updates-per-call 64 --replay-device device --repeats 1 --seconds 1 \
        2>&1 | tee -a "$out/learner.txt"
fi

if wants groups 330; then
    echo "== groups ($(left) s left)"
    timeout 100 python3 -m benchmarks.learner --batch-sizes 32 --precisions float32 \
        --updates-per-call 64 --replay-device device --runs 1,2,4,8,16 --repeats 1 \
        --seconds 1 2>&1 | tee "$out/groups-learner.txt"
    for way in processes groups; do
        flags=(--parallel 8)
        [ "$way" = groups ] && flags=(--parallel 2 --runs-per-process 4)
        rm -rf "runs/gpu-suite-8-$way"
        timeout -s INT 100 python3 -m fast_dqn suite --games pong,breakout,qbert,seaquest \
            --seeds 2 --timesteps 10000000 --preset dopamine "${flags[@]}" --plain \
            --interval 15 --logdir "runs/gpu-suite-8-$way" 2>&1 | tee "$out/suite-8-$way.txt"
        sleep 5  # the runs' own SIGINT checkpoints
    done
fi

if wants loops 330; then
    echo "== loops ($(left) s left)"
    # The Nature loop is slow (about 300 agent steps/s): 10,000 measured steps.
    timeout 50 python3 -m benchmarks.speedtest --epsilon 0.1 --steps 10000 --only nature \
        --csv "$out/nature.csv" 2>&1 | tee "$out/loops.txt"
    timeout 190 python3 -m benchmarks.speedtest --workers 16,32,64 --epsilon 0.1 \
        --steps 40000 --csv "$out/speedtest.csv" \
        --only samplers-16,samplers-32,samplers-64,fast-16-on-on,fast-32-on-on,fast-64-on-on \
        2>&1 | tee -a "$out/loops.txt"
    timeout 80 python3 -m benchmarks.speedtest --workers 32,64 --epsilon 0.1 --steps 40000 \
        --only samplers-64,fast-32-on-on --sampler-groups 2 \
        --csv "$out/two-groups.csv" 2>&1 | tee -a "$out/loops.txt"
fi

if wants suite 110; then
    echo "== suite ($(left) s left)"
    rm -rf runs/gpu-suite
    timeout -s INT 100 python3 -m fast_dqn suite --games pong,breakout,qbert,seaquest \
        --seeds 1 --timesteps 10000000 --preset dopamine --parallel 4 --plain \
        --interval 15 --logdir runs/gpu-suite 2>&1 | tee "$out/suite.txt"
    sleep 5  # the runs' own SIGINT checkpoints
fi

if wants pong 100; then
    minutes=$(( ($(left) - 40) / 60 ))
    echo "== pong ($minutes min for it)"
    if [ "$minutes" -ge 1 ]; then
        # Watched: stopped with a checkpoint once the mean of 100 games reaches 18, or at the
        # budget; a later call on the same warm machine resumes it.
        timeout -s INT $(( minutes * 60 + 30 )) python3 -m benchmarks.learning \
            --preset pong-fastest --seed 0 --minutes "$minutes" --thresholds 18 --resume \
            --logdir runs/gpu-pong -- --workers 16 2>&1 | tail -20 | tee "$out/pong.txt"
        cp runs/gpu-pong/episodes.csv "$out/episodes.csv" 2>/dev/null
        cp runs/gpu-pong/config.json "$out/config.json" 2>/dev/null
    else
        echo "no time left for pong-fastest" | tee "$out/pong.txt"
    fi
fi

echo "== the table"
python3 -m benchmarks.gpu_table "$out" | tee "$out/table.md"
if [ -n "${OUT:-}" ]; then
    # The device tool brings back at most 8 files: the table, and the rest in one archive.
    (cd "$out" && tar czf ../gpu-session.tgz --exclude=table.md . && find . -mindepth 1 \
        ! -name table.md -delete && mv ../gpu-session.tgz .)
fi
