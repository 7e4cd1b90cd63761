"""Checkpoint size and time with --save-replay, on a full replay of real Atari frames.

    python -m benchmarks.checkpoint [--game pong] [--capacity 1_000_000] [--distinct 100_000]

Plays `--distinct` agent steps of the game with a random policy on the vector env (8 games, as the
fast loop's samplers), tiles them until the replay is full, then times a checkpoint save, the
verification of the newest checkpoint and the load back into the replay, and prints the size
on disk. zstd's window is far shorter than one tile, so tiling does not flatter compression.
"""

import argparse
import os
import resource
import shutil
import tempfile
import time

import numpy as np


def real_frames(game, count, workers=8, seed=0):
    from ale_py.vector_env import AtariVectorEnv
    env = AtariVectorEnv(game, workers, num_threads=2, frameskip=4, stack_num=1,
                         img_height=84, img_width=84, grayscale=True, maxpool=True,
                         noop_max=30, use_fire_reset=True)
    env.reset(seed=seed)
    rng = np.random.default_rng(seed)
    frames = np.empty((workers, count // workers, 84, 84), np.uint8)
    for t in range(count // workers):
        obs, *_ = env.step(rng.integers(0, 6, workers).astype(np.int32))
        frames[:, t] = obs[:, -1]
    env.close()
    return frames


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--capacity", type=lambda s: int(float(s)), default=1_000_000)
    parser.add_argument("--distinct", type=lambda s: int(float(s)), default=100_000)
    parser.add_argument("--game", default="pong")
    parser.add_argument("--dir", default=None, help="where to write (default: a temp dir)")
    args = parser.parse_args(argv)

    from fast_dqn.agent.replay_memory import ReplayMemory
    from fast_dqn.run.storage.checkpoint import CheckpointStore

    workers = 8
    replay = ReplayMemory(args.capacity, (84, 84), 4, num_shards=workers)
    start = time.perf_counter()
    frames = real_frames(args.game, args.distinct, workers)
    per_shard, n = replay.shard_capacity, frames.shape[1]
    for begin in range(0, per_shard, n):
        end = min(per_shard, begin + n)
        replay.frames[:, begin:end] = frames[:, :end - begin]
    rng = np.random.default_rng(1)
    replay.actions[:] = rng.integers(0, 6, replay.actions.shape)
    replay.rewards[:] = rng.choice([-1.0, 0.0, 1.0], replay.rewards.shape, p=[.01, .98, .01])
    replay.terminals[:] = rng.random(replay.terminals.shape) < 0.001
    replay.episode_ends[:] = replay.terminals
    replay.sizes[:] = per_shard
    print(f"{args.game}: filled {replay.capacity:,} frames "
          f"({replay.frames.nbytes / 2**30:.2f} GiB) in {time.perf_counter() - start:.0f} s",
          flush=True)

    directory = args.dir or tempfile.mkdtemp(prefix="fast-dqn-checkpoint-")
    try:
        store = CheckpointStore(directory)
        start = time.perf_counter()
        path = store.save(1, {"replay": replay.state_dict()}, replay.arrays())
        save_s = time.perf_counter() - start
        size = sum(os.path.getsize(os.path.join(path, f)) for f in os.listdir(path))
        start = time.perf_counter()
        checkpoint = store.latest()
        verify_s = time.perf_counter() - start
        original = replay.frames[:, ::997].copy()
        replay.frames[:] = 0
        start = time.perf_counter()
        checkpoint.load_replay(replay.arrays())
        load_s = time.perf_counter() - start
        assert np.array_equal(replay.frames[:, ::997], original), "the replay did not round-trip"
        raw = sum(a.nbytes for a in replay.arrays().values())
        print(f"raw replay {raw / 2**30:.2f} GiB -> checkpoint {size / 2**20:.1f} MiB "
              f"({raw / size:.0f}x)")
        print(f"save {save_s:.1f} s ({raw / save_s / 2**30:.2f} GiB/s), verify {verify_s:.1f} s, "
              f"load {load_s:.1f} s ({raw / load_s / 2**30:.2f} GiB/s)")
        peak = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss * 1024  # KiB on Linux
        print(f"peak RSS {peak / 2**30:.2f} GiB")
    finally:
        if not args.dir:
            shutil.rmtree(directory, ignore_errors=True)


if __name__ == "__main__":
    main()
