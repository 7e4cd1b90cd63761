# Shared by gpu_session.sh and gpu_probe.sh, which source it: the checks that come before
# anything is written or measured (so that a refusal costs seconds and changes nothing),
# and the header that names the machine. The caller sets `me` (its name), `out` (OUT or its
# default), `stamp` (the UTC time) and `cpu` (GPU_SESSION_CPU: 0, or 1 to measure the CPU).

refuse() { echo "$me: $*" >&2; exit 2; }

check_cpu_choice() {
    [[ $cpu = 0 || $cpu = 1 ]] || refuse "GPU_SESSION_CPU='$cpu'; give GPU_SESSION_CPU=1 to" \
        "measure the CPU, or leave it unset"
}

# OUT: a new or empty folder, never /, $HOME, a checkout, or a folder holding anything.
check_out_folder() {
    new="give OUT a new or empty folder (e.g. OUT=runs/gpu-out-$stamp); nothing was changed"
    real=$(realpath -m -- "$out" 2>/dev/null) || refuse "OUT=$out is no path; $new"
    named="OUT=$out"
    [ "$real" = "$out" ] || named="OUT=$out ($real)"
    checkout=$(git rev-parse --show-toplevel 2>/dev/null)
    ours_checkout=$(git -C "$(dirname -- "$0")" rev-parse --show-toplevel 2>/dev/null)
    for unsafe in "/:the root folder" "${HOME:-}:your home folder" "$checkout:a checkout" \
            "$ours_checkout:this checkout"; do
        path=${unsafe%:*}
        [ -n "$path" ] && [ "$real" = "$(realpath -m -- "$path")" ] && \
            refuse "$named is ${unsafe##*:}, not a folder for the session alone; $new"
    done
    if [ -e "$real" ] || [ -L "$out" ]; then
        [ -d "$real" ] || refuse "$named is not a folder; $new"
        [ -e "$real/.git" ] && refuse "$named holds a .git: a checkout is no output folder; $new"
        entries=$(ls -A -- "$real/" 2>/dev/null) || refuse "$named cannot be read; $new"
        [ -z "$entries" ] || refuse "$named is not empty (it holds ${entries%%$'\n'*}): the" \
            "session writes only into a new or empty folder, and never removes what it did not" \
            "write; $new"
    fi
}

# A GPU the driver lists and the backend sees; or, with cpu=1, the GPU hidden from both.
check_device() {
    if [ "$cpu" = 1 ]; then
        # Every figure is then the CPU's, and labelled so: no backend may find the GPU.
        export JAX_PLATFORMS=cpu CUDA_VISIBLE_DEVICES=""
    else
        nocpu="its figures would be the CPU's in GPU rows. Run it where there is a GPU, or give"
        nocpu+=" GPU_SESSION_CPU=1 to measure the CPU, labelled as such; nothing was changed"
        no_gpu() { echo "$me: $*: $nocpu" >&2; exit 3; }
        gpus=$(nvidia-smi -L 2>/dev/null) && grep -q '^GPU ' <<<"$gpus" || \
            no_gpu "no GPU here (nvidia-smi -L lists none)"
        # The backend the parts run on must see it too (not only the driver).
        case ${KERAS_BACKEND:-jax} in
            jax) probe='import jax; seen = jax.devices()[0].platform == "gpu"' ;;
            tensorflow) probe='import tensorflow as tf
seen = bool(tf.config.list_physical_devices("GPU"))' ;;
            *) probe='seen = True' ;;  # the parts name the device they ran on
        esac
        KERAS_BACKEND=${KERAS_BACKEND:-jax} python3 -c "$probe
raise SystemExit(not seen)" >/dev/null 2>&1 || no_gpu "nvidia-smi lists a GPU but" \
            "${KERAS_BACKEND:-jax} sees none (its GPU build is missing: docs/gpu.md)"
    fi
}

write_header() {
    {
        echo "commit $(git rev-parse --short HEAD 2>/dev/null || echo unknown), $(date -u +%FT%TZ)"
        nvidia-smi -L 2>/dev/null || echo "no nvidia-smi"
        if [ "$cpu" = 1 ]; then
            echo "device CPU (GPU_SESSION_CPU=1): every figure is the CPU's, none a GPU's"
        else
            echo "device GPU"
        fi
        echo "cores $(nproc), load average $(cut -d' ' -f1-3 /proc/loadavg)"
        grep -m1 '^model name' /proc/cpuinfo
        echo "Keras backend $KERAS_BACKEND"
    } | tee "$out/header.txt"
}
