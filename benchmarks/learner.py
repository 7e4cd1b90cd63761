"""The learner alone: Nature-CNN train steps per second, variants measured side by side, and
how close they come to what this machine's matmuls reach.

Variants alternate within one process, repeat after repeat, so machine noise hits them alike.
A variant is a batch size and a compute type (and XLA or not). The Keras backend is the
process's (KERAS_BACKEND); under JAX everything is compiled by XLA, so --xla changes nothing:

    python -m benchmarks.learner                                  # float32 vs bfloat16, 32..256
    python -m benchmarks.learner --batch-sizes 32 --precisions float32 --xla both
    KERAS_BACKEND=jax python -m benchmarks.learner --precisions float32

For each it prints updates/s and samples/s (medians), the ratio to the first variant, the
agent steps/s the learner allows at its train_freq (batch / 8 agent steps per minibatch keeps
Nature's 8 samples per agent step, as Lapan's 2nd edition, ch. 9, samples 32 x N after N
environment steps: Chapter09/02_n_envs.py lines 27-28 and 48), its FLOP/s, and that as a fraction of
the peak of its compute type: the median rate of a large matmul, measured in the same process.

FLOPs of one train step are counted from the network's layers, 2 per multiply-add: the
target network's forward pass on s', the main network's on s, and its backward pass, twice
the forward work of every layer but the first (whose input needs no gradient). Biases,
activations, the loss and the optimizer are left out: under 1% of the total here.
"""

import argparse
import os
import statistics
import time

import numpy as np

os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")

POLICIES = {"float32": None, "bfloat16": "mixed_bfloat16", "float16": "mixed_float16"}


def layer_macs(model):
    """Multiply-adds of one sample's forward pass, per Conv2D and Dense layer, in order."""
    import keras
    macs = []
    for layer in model.layers:
        if isinstance(layer, keras.layers.Conv2D):
            h, w, out = layer.output.shape[1:]
            kh, kw, cin, _ = layer.kernel.shape
            macs.append(h * w * out * kh * kw * cin)
        elif isinstance(layer, keras.layers.Dense):
            cin, out = layer.kernel.shape
            macs.append(cin * out)
    return macs


def train_step_flops(model, batch_size, double=False):
    macs = layer_macs(model)
    forward = sum(macs)
    backward = 2 * forward - macs[0]  # no gradient for the input of the first layer
    passes = forward * (3 if double else 2)  # target on s' (and main on s' for double), main on s
    return 2 * batch_size * (passes + backward)


def matmul_peak(dtype, n=4096, repeats=5, seconds=0.25):
    """FLOP/s of an n x n matmul in `dtype` on this process's Keras backend: the median of
    `repeats` timings of as many products, queued back to back, as fill about `seconds`.

    Only one element of the last product comes back to the host. Reading a whole product
    back timed the copy of its 64 MB, not the GPU: one H100 showed 1.5 TFLOP/s that way."""
    import keras
    from keras import ops
    a = ops.cast(keras.random.normal((n, n), seed=0), dtype)
    if keras.backend.backend() == "jax":
        import jax
        step = jax.jit(lambda x: ops.matmul(x, x))
    else:
        import tensorflow as tf
        step = tf.function(lambda x: ops.matmul(x, x))

    def products(count):
        for _ in range(count):
            c = step(a)
        return float(ops.convert_to_numpy(c[0, 0]))  # waits for the queued products

    products(1)  # compiles
    t = time.perf_counter()
    products(1)
    count = min(1000, max(1, round(seconds / (time.perf_counter() - t))))
    rates = []
    for _ in range(repeats):
        t = time.perf_counter()
        products(count)
        rates.append(count * 2 * n ** 3 / (time.perf_counter() - t))
    return statistics.median(rates)


def make_batch(rng, b):
    from fast_dqn.agent.batch import Batch
    return Batch.of(rng.integers(0, 256, (b, 4, 84, 84), dtype=np.uint8), rng.integers(0, 6, b),
                    rng.normal(size=b), rng.integers(0, 256, (b, 4, 84, 84), dtype=np.uint8),
                    np.zeros(b), 0.99)


def main():
    parser = argparse.ArgumentParser(description=__doc__,
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--batch-sizes", default="32,64,128,256")
    parser.add_argument("--precisions", default="float32,bfloat16", help=",".join(POLICIES))
    parser.add_argument("--xla", choices=("off", "on", "both"), default="off")
    parser.add_argument("--repeats", type=int, default=3)
    parser.add_argument("--seconds", type=float, default=6.0,
                        help="timed seconds per variant and repeat (the update count follows)")
    parser.add_argument("--threads", type=int, default=0,
                        help="TF intra-op threads (JAX sizes its own pool)")
    args = parser.parse_args()

    from fast_dqn.agent.backend_setup import configure_backend, device_line
    # first: it hides TensorFlow's start-up noise, and sets XLA's flags before JAX starts
    print(device_line(*configure_backend(0, args.threads)))

    from fast_dqn.agent.learner import DQNLearner, make_optimizer
    from fast_dqn.agent.q_network import nature_cnn

    rng = np.random.default_rng(0)
    xlas = {"off": [False], "on": [True], "both": [False, True]}[args.xla]
    variants = [(b, p, x) for p in args.precisions.split(",")
                for b in map(int, args.batch_sizes.split(",")) for x in xlas]
    learners, batches, updates = {}, {}, {}
    for b, p, x in variants:
        learner = DQNLearner(lambda: nature_cnn((4, 84, 84), 6, POLICIES[p]),
                             make_optimizer("rmsprop", 2.5e-4, loss_scaling=p == "float16"),
                             xla=x)
        batches[b] = batches.get(b) or make_batch(rng, b)
        for _ in range(5):  # compile and warm up
            learner.train(batches[b])
        t = time.perf_counter()
        for _ in range(5):
            learner.train(batches[b])
        updates[b, p, x] = max(5, int(args.seconds * 5 / (time.perf_counter() - t)))
        learners[b, p, x] = learner
    peaks = {p: [] for p in {p for _, p, _ in variants}}
    rates = {v: [] for v in variants}
    for _ in range(args.repeats):
        for p in peaks:
            peaks[p].append(matmul_peak(p))
        for v in variants:
            t = time.perf_counter()
            for _ in range(updates[v]):
                learners[v].train(batches[v[0]])
            rates[v].append(updates[v] / (time.perf_counter() - t))
    peak = {p: statistics.median(r) for p, r in peaks.items()}
    first = statistics.median(rates[variants[0]]) * variants[0][0]
    print(f"cores {os.cpu_count()}, load average before: "
          f"{' '.join(f'{x:.2f}' for x in os.getloadavg())}")
    print("matmul peak (4096², median of "
          f"{args.repeats}): " + ", ".join(f"{p} {g / 1e9:.0f} GFLOP/s" for p, g in peak.items()))
    flops = {b: train_step_flops(learners[variants[0]].main, b) for b in batches}
    print(f"train step: {flops[variants[0][0]] / variants[0][0] / 1e6:.1f} MFLOP per sample")
    print(f"| batch | compute | xla | updates/s | samples/s | × first | agent steps/s at "
          f"train_freq batch/8 | GFLOP/s | of {'/'.join(peak)} peak |")
    print("|---|---|---|---|---|---|---|---|---|")
    for b, p, x in variants:
        m = statistics.median(rates[b, p, x])
        achieved = m * flops[b]
        print(f"| {b} | {p} | {'on' if x else 'off'} | {m:.1f} | {m * b:,.0f} | "
              f"{m * b / first:.2f} | {m * b / 8:,.0f} | {achieved / 1e9:.0f} | "
              f"{achieved / peak[p]:.2f} |")


if __name__ == "__main__":
    main()
