#!/usr/bin/env bash
# Every GPU row docs/gpu.md carries, measured in one call of this script of at most 9 minutes:
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
#            an earlier call on the same warm machine (runs/cpu-pong with GPU_SESSION_CPU=1)
#
# Outputs go to OUT, a folder the script creates, or one that is empty (default: a new
# runs/gpu-session-<UTC time>). It refuses a folder that holds anything (".", a checkout, a
# folder of yours), /, and $HOME, in one line before it starts: it never writes beside, or
# removes, what it did not write. With OUT given, it packs the files it wrote into
# OUT/gpu-session.tgz beside table.md, so that they come back as two files, and removes only
# those. The suites' runs go to a new runs/gpu-suites-<UTC time>-XXXX folder each call (not
# under OUT, where hundreds of MB of checkpoints would be packed; never a fixed name, which
# it would have to empty first), kept for you to delete.
#
# Without a GPU (nvidia-smi -L lists none, or the Keras backend sees none) it says so in one
# line and stops: its figures would be the CPU's in GPU rows. GPU_SESSION_CPU=1 measures the
# CPU instead (the GPU hidden from both backends), and the table labels every row a CPU
# figure. GPU_SESSION_SECONDS sets the whole call's budget (default 540).
#
# The header names the GPU, the cores, the backend and the commit: give every figure with them.
set -uo pipefail
start=$SECONDS
part=${1:-all}
case $part in all|learner|groups|loops|suite|pong) ;; *)
    echo "gpu_session.sh: unknown part '$part'; use all, learner, groups, loops, suite or pong" >&2
    exit 2 ;;
esac
budget=${GPU_SESSION_SECONDS:-540}  # the whole call; a 10-minute slot with a margin
cpu=${GPU_SESSION_CPU:-0}
stamp=$(date -u +%Y%m%d-%H%M%S)
out=${OUT:-runs/gpu-session-$stamp}

# Every check comes before anything is written or measured (session_checks.sh).
source "$(dirname -- "$0")/session_checks.sh"
me=gpu_session.sh
check_cpu_choice
[[ $budget =~ ^[0-9]+$ ]] || refuse "GPU_SESSION_SECONDS='$budget' is not a whole number of" \
    "seconds; give e.g. GPU_SESSION_SECONDS=540"
check_out_folder
check_device

mkdir -p -- "$out" || refuse "cannot create $named; give OUT a folder you can write"
export KERAS_BACKEND=${KERAS_BACKEND:-jax} PYTHONUNBUFFERED=1
# The files the session writes into OUT: the only ones it packs, and then removes.
ours=(header.txt learner.txt groups-learner.txt suite-8-processes.txt suite-8-groups.txt
      loops.txt nature.csv speedtest.csv two-groups.csv suite.txt pong.txt episodes.csv
      config.json)
suites=""
suites_folder() {  # a new folder for the suites' runs, made the first time one runs
    if [ -z "$suites" ]; then
        mkdir -p runs && suites=$(mktemp -d "runs/gpu-suites-$stamp-XXXX") || exit 1
        echo "the suites' runs go to $suites (kept: delete it when done)"
    fi
}
# The suites' 100 s must stand for a whole run, whose steps are nearly all played at the
# final ε: ε reaches the Nature protocol's 0.1 just past the warm-up (the rows say so).
steady=(--eps-end 0.1 --eps-decay-steps 1000)
left() { echo $((budget - (SECONDS - start))); }
# A part runs when asked for and when its own time limit still fits in what is left, so
# the call ends inside its budget; a part skipped shows "not measured" in the table.
wants() {
    { [ "$part" = all ] || [ "$part" = "$1" ]; } || return 1
    if [ "$(left)" -lt "$2" ]; then echo "== $1 skipped: $(left) s left, it needs $2"; return 1; fi
}
write_header

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
    suites_folder
    for way in processes groups; do
        flags=(--parallel 8)
        [ "$way" = groups ] && flags=(--parallel 2 --runs-per-process 4)
        timeout -s INT 100 python3 -m fast_dqn suite --games pong,breakout,qbert,seaquest \
            --seeds 2 --timesteps 10000000 --preset dopamine "${flags[@]}" --plain \
            --interval 15 --logdir "$suites/suite-8-$way" -- "${steady[@]}" 2>&1 \
            | tee "$out/suite-8-$way.txt"
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
    suites_folder
    timeout -s INT 100 python3 -m fast_dqn suite --games pong,breakout,qbert,seaquest \
        --seeds 1 --timesteps 10000000 --preset dopamine --parallel 4 --plain \
        --interval 15 --logdir "$suites/suite" -- "${steady[@]}" 2>&1 | tee "$out/suite.txt"
    sleep 5  # the runs' own SIGINT checkpoints
fi

if wants pong 100; then
    minutes=$(( ($(left) - 40) / 60 ))
    echo "== pong ($minutes min for it)"
    if [ "$minutes" -ge 1 ]; then
        # Watched: stopped with a checkpoint once the mean of 100 games reaches 18, or at the
        # budget; a later call on the same warm machine resumes it. The CPU's run is another
        # run: one run's clock must not add a CPU's minutes to a GPU's.
        pong=runs/gpu-pong
        [ "$cpu" = 1 ] && pong=runs/cpu-pong
        timeout -s INT $(( minutes * 60 + 30 )) python3 -m benchmarks.learning \
            --preset pong-fastest --seed 0 --minutes "$minutes" --thresholds 18 --resume \
            --logdir "$pong" -- --workers 16 2>&1 | tail -20 | tee "$out/pong.txt"
        cp "$pong/episodes.csv" "$out/episodes.csv" 2>/dev/null
        cp "$pong/config.json" "$out/config.json" 2>/dev/null
    else
        echo "no time left for pong-fastest" | tee "$out/pong.txt"
    fi
fi

echo "== the table"
status=0
python3 -m benchmarks.gpu_table "$out" | tee "$out/table.md" || status=1
if [ -n "${OUT:-}" ]; then
    # OUT ends as two files, table.md and the rest packed, for machines that hand back only a
    # few. Only the files this call wrote are packed, then removed once the archive is whole.
    packed=()
    for name in "${ours[@]}"; do [ -f "$out/$name" ] && packed+=("$name"); done
    if [ ${#packed[@]} -gt 0 ]; then
        if tar czf "$out/gpu-session.tgz.partial" -C "$out" "${packed[@]}" && \
                mv -- "$out/gpu-session.tgz.partial" "$out/gpu-session.tgz"; then
            (cd -- "$out" && rm -f -- "${packed[@]}")
        else
            rm -f -- "$out/gpu-session.tgz.partial"
            echo "gpu_session.sh: packing $out failed; its files stay as they are" >&2
            status=1
        fi
    fi
fi
exit $status
