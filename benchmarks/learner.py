"""The learner alone: Nature-CNN train steps per second, variants measured side by side, and
how close they come to what this machine's matmuls reach.

Variants alternate within one process, repeat after repeat, so machine noise hits them alike.
A variant is a batch size, a compute type (and XLA or not), the minibatches per call and
where replay is gathered. The Keras backend is the
process's (KERAS_BACKEND); under JAX everything is compiled by XLA, so --xla changes nothing:

    python -m benchmarks.learner                                  # float32 vs bfloat16, 32..256
    python -m benchmarks.learner --batch-sizes 32 --precisions float32 --xla both
    KERAS_BACKEND=jax python -m benchmarks.learner --precisions float32
    python -m benchmarks.learner --batch-sizes 32 --precisions float32 \
        --updates-per-call 1,16,64,256 --replay-device host,device   # K per compiled call

Runs as a batch axis: --runs G trains G runs' updates in one compiled call (a run group,
fast_dqn.agent.run_group; JAX only), each run its own initial weights and minibatch indices,
and prints updates/s per run and in all:

    KERAS_BACKEND=jax python -m benchmarks.learner --batch-sizes 32 --precisions float32 \
        --updates-per-call 64 --replay-device device --runs 1,2,4,8,16

Each update's minibatch is drawn from a full replay by the fast loop's own TrainCalls: K
minibatches per compiled call, gathered on the host and copied in one transfer, or gathered
on the device from replay's mirror there.

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
        # waits for the queued products; float32 first: TF converts no bfloat16 scalar
        return float(ops.convert_to_numpy(ops.cast(c[0, 0], "float32")))

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


def filled_replay(rng, network, capacity, workers=8):
    """A full replay of random frames (Atari) or vectors (CartPole), as the fast loop's."""
    from fast_dqn.agent.replay_memory import ReplayMemory
    if network == "mlp":
        replay = ReplayMemory(capacity, (4,), 1, frame_dtype=np.float32, num_shards=workers)
        frames = rng.normal(size=(capacity // workers, 4)).astype(np.float32)
    else:
        replay = ReplayMemory(capacity, (84, 84), 4, num_shards=workers)
        frames = rng.integers(0, 256, (capacity // workers, 84, 84), dtype=np.uint8)
    actions = 2 if network == "mlp" else 6
    for shard in range(workers):
        ends = rng.random(len(frames)) < 2e-3
        replay.add_batch(frames, rng.integers(0, actions, len(frames)),
                         rng.normal(size=len(frames)), ends, ends, shard=shard)
    return replay


def build(network, precision, options, num_actions=6):
    """A learner of `network` ("cnn" or "mlp") in `precision`, compiled with CompileOptions."""
    from fast_dqn.agent.learner import DQNLearner, make_optimizer
    from fast_dqn.agent.q_network import mlp, nature_cnn
    if network == "mlp":  # CartPole's: the classic preset's network and optimizer
        return DQNLearner(lambda: mlp((1, 4), 2, dtype_policy=POLICIES[precision]),
                          make_optimizer("adam", 3e-4, 1.5e-4), options)
    return DQNLearner(lambda: nature_cnn((4, 84, 84), num_actions, POLICIES[precision]),
                      make_optimizer("rmsprop", 2.5e-4, loss_scaling=precision == "float16"),
                      options)


class GroupCalls:
    """TrainCalls' draw and train for a run group of G runs, as one compiled call.

    The G runs share one host replay (the benchmark's runs differ only in their weights and
    indices), but each has its own copy on the device, as a group's runs have.
    """

    def __init__(self, learners, padded, replay, batch_size, on_device):
        from fast_dqn.agent.run_group import RunGroup
        self.group, self.replay, self.batch_size = RunGroup(learners, padded), replay, batch_size
        self.learner = learners[0]
        self.mirrors = self.group.mirror_replays([replay] * len(learners)) if on_device \
            else None

    def draw(self, count):
        drawn = [self.replay.sample_indices_many(count, self.batch_size)
                 for _ in self.group.members]
        if self.mirrors is None:
            from fast_dqn.agent.batch import Batch
            gathered = [self.replay.gather_many(*d) for d in drawn]
            return Batch(*(np.stack(field) for field in zip(*gathered)))
        return np.stack([d[0] for d in drawn]), np.stack([d[1] for d in drawn])

    def train(self, drawn):
        if self.mirrors is None:
            return self.group.train_many(drawn)
        return self.group.train_from_replay(self.mirrors, *drawn)


def calls_for(args, replay, variant):
    """TrainCalls of one learner, or GroupCalls of G, for a variant (b, p, x, k, d, G)."""
    from fast_dqn.agent.compile_options import CompileOptions
    from fast_dqn.agent.train_calls import TrainCalls
    b, p, x, k, d, g = variant
    if g == 1:
        return TrainCalls(build(args.network, p, CompileOptions(xla=x)), replay, b,
                          on_device=d == "device")
    import keras
    learners = []
    for seed in range(g + 1):  # each run its own initial weights, as its seed gives them
        keras.utils.set_random_seed(seed)
        learners.append(build(args.network, p, CompileOptions(xla=x)))
    return GroupCalls(learners[:g], learners[g], replay, b, on_device=d == "device")


def main():
    parser = argparse.ArgumentParser(description=__doc__,
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--network", choices=("cnn", "mlp"), default="cnn",
                        help="cnn: the Nature CNN on 84x84 frames; mlp: CartPole's MLP "
                        "(256, 256), Adam, where fixed cost is most of an update")
    parser.add_argument("--batch-sizes", default="32,64,128,256")
    parser.add_argument("--precisions", default="float32,bfloat16", help=",".join(POLICIES))
    parser.add_argument("--xla", choices=("off", "on", "both"), default="off")
    parser.add_argument("--updates-per-call", default="1",
                        help="minibatches per compiled call (K), as the fast loop's trainer "
                        "trains them, e.g. 1,16,64,256")
    parser.add_argument("--replay-device", default="host",
                        help="host: K minibatches gathered in numpy, copied in one transfer; "
                        "device: replay mirrored on the device, gathered there; e.g. "
                        "host,device")
    parser.add_argument("--runs", default="1",
                        help="G, runs trained as one run group in one call (JAX only), e.g. "
                        "1,2,4,8,16; updates/s are per run, and G times that in all")
    parser.add_argument("--replay-capacity", type=int, default=100_000,
                        help="the replay the minibatches come from")
    parser.add_argument("--repeats", type=int, default=3)
    parser.add_argument("--seconds", type=float, default=6.0,
                        help="timed seconds per variant and repeat (the update count follows)")
    parser.add_argument("--threads", type=int, default=0,
                        help="TF intra-op threads (JAX sizes its own pool)")
    args = parser.parse_args()

    from fast_dqn.agent.backend_setup import configure_backend, device_line
    # first: it hides TensorFlow's start-up noise, and sets XLA's flags before JAX starts
    print(device_line(*configure_backend(0, args.threads)))

    rng = np.random.default_rng(0)
    replay = filled_replay(rng, args.network, args.replay_capacity)
    xlas = {"off": [False], "on": [True], "both": [False, True]}[args.xla]
    variants = [(b, p, x, k, d, g) for p in args.precisions.split(",")
                for b in map(int, args.batch_sizes.split(",")) for x in xlas
                for k in map(int, args.updates_per_call.split(","))
                for d in args.replay_device.split(",")
                for g in map(int, args.runs.split(","))]
    calls, updates = {}, {}
    for v in variants:
        k = v[3]
        calls[v] = calls_for(args, replay, v)

        def run(count, c=calls[v], k=k):
            for _ in range(count):
                c.train(c.draw(k))
        run(3)  # compile and warm up
        t = time.perf_counter()
        run(2)
        updates[v] = max(2, int(args.seconds * 2 / (time.perf_counter() - t)))
    peaks = {p: [] for p in {v[1] for v in variants}}
    rates = {v: [] for v in variants}
    for _ in range(args.repeats):
        for p in peaks:
            peaks[p].append(matmul_peak(p))
        for v in variants:
            c, k = calls[v], v[3]
            t = time.perf_counter()
            for _ in range(updates[v]):
                c.train(c.draw(k))
            rates[v].append(updates[v] * k * v[5] / (time.perf_counter() - t))
    peak = {p: statistics.median(r) for p, r in peaks.items()}
    first = statistics.median(rates[variants[0]]) * variants[0][0]
    print(f"cores {os.cpu_count()}, load average before: "
          f"{' '.join(f'{x:.2f}' for x in os.getloadavg())}")
    print("matmul peak (4096², median of "
          f"{args.repeats}): " + ", ".join(f"{p} {g / 1e9:.0f} GFLOP/s" for p, g in peak.items()))
    main_network = calls[variants[0]].learner.main
    flops = {b: train_step_flops(main_network, b) for b in {v[0] for v in variants}}
    print(f"network {args.network}; train step: "
          f"{flops[variants[0][0]] / variants[0][0] / 1e6:.2f} MFLOP per sample")
    print(f"| batch | compute | xla | per call | replay | runs | updates/s per run | "
          f"updates/s in all | samples/s in all | × first | agent steps/s in all at "
          f"train_freq batch/8 | GFLOP/s | of {'/'.join(peak)} peak |")
    print("|---|---|---|---|---|---|---|---|---|---|---|---|---|")
    for v in variants:
        b, p, x, k, d, g = v
        m = statistics.median(rates[v])  # in all: G runs' updates
        achieved = m * flops[b]
        print(f"| {b} | {p} | {'on' if x else 'off'} | {k} | {d} | {g} | {m / g:,.1f} | "
              f"{m:,.1f} | {m * b:,.0f} | {m * b / first:.2f} | {m * b / 8:,.0f} | "
              f"{achieved / 1e9:.1f} | {achieved / peak[p]:.3f} |")


if __name__ == "__main__":
    main()
