"""Our emulator (ale-py) beside the one Dopamine's published runs used (atari-py's ALE 0.6).

    python -m benchmarks.emulator_compare --atari-py DIR [--game breakout] [--games 2000]
        [--frames 50000] [--seed 0]

Why: Breakout's iteration 0 under --preset dopamine is above Dopamine's five runs in all our
runs (docs/learning.md). Iteration 0 is mostly play at high epsilon, so an emulator that
scores random play differently would show there first. atari-py is not a dependency of
fast-dqn; build a release of it (0.2.6 and 0.1.1 ship the ROMs) into a folder of its own:

    pip download atari-py==0.2.6 --no-deps --no-binary :all: -d /tmp/src
    pip install --no-build-isolation --no-deps --target /tmp/atari026 /tmp/src/atari-py-0.2.6.tar.gz

and pass that folder as --atari-py. Two checks, each on both emulators:

1. Same actions and emulator seed, without and with sticky actions (0.25): `--frames`
   emulator frames of one uniform random action sequence (each action held 4 frames, the game
   reset when it ends); every frame's reward, end flag, lives and grayscale screen compared.
   Equal without sticky actions: the two emulate this ROM alike. Equal with them: their
   sticky-action draws are the same stream too.
2. Uniform random play under Dopamine's protocol: sticky actions 0.25, 4 frames an agent step
   (a game's end stops the step), the minimal action set, a game cut at 27,000 agent steps,
   no no-op starts. Prints the mean return and length of `--games` games with their standard
   errors, and the difference in standard errors.
"""

import argparse
import hashlib
import sys

import numpy as np

FRAME_SKIP = 4
MAX_AGENT_STEPS = 27_000


class Emulator:
    """One ALE, from ale-py or from atari-py, behind the four calls the checks make."""

    def __init__(self, kind, game, seed, sticky):
        if kind == "ale-py":
            import ale_py
            from ale_py import roms
            ale_py.ALEInterface.setLoggerMode(ale_py.LoggerMode.Error)
            self.ale, rom = ale_py.ALEInterface(), str(roms.get_rom_path(game))
            self.ale.setInt("random_seed", seed)
            self.ale.setFloat("repeat_action_probability", sticky)
            self.ale.loadROM(rom)
        else:
            import atari_py
            self.ale, rom = atari_py.ALEInterface(), atari_py.get_game_path(game)
            self.ale.setInt(b"random_seed", seed)
            self.ale.setFloat(b"repeat_action_probability", sticky)
            self.ale.loadROM(rom.encode())
        with open(rom, "rb") as f:
            self.rom_md5 = hashlib.md5(f.read()).hexdigest()
        self.actions = list(self.ale.getMinimalActionSet())

    def act(self, index):
        return float(self.ale.act(self.actions[index]))

    def screen(self):
        return np.asarray(self.ale.getScreenGrayscale()).reshape(210, 160)


def same_actions(kinds, game, frames, seed, sticky):
    emulators = [Emulator(kind, game, seed, sticky) for kind in kinds]
    for e in emulators:
        e.ale.reset_game()
    rng = np.random.default_rng(seed)
    n = len(emulators[0].actions)
    first_difference, games, reward = None, 0, 0.0
    for frame in range(frames):
        if frame % FRAME_SKIP == 0:
            action = int(rng.integers(n))
        seen = []
        for e in emulators:
            r = e.act(action)
            seen.append((r, e.ale.game_over(), e.ale.lives(), e.screen()))
        (r0, over0, lives0, screen0), (r1, over1, lives1, screen1) = seen
        if first_difference is None and (r0 != r1 or over0 != over1 or lives0 != lives1
                                         or not np.array_equal(screen0, screen1)):
            first_difference = frame
        reward += r0
        if over0 or over1:
            games += 1
            for e in emulators:
                e.ale.reset_game()
    return first_difference, games, reward


def random_play(kind, game, games, seed):
    e = Emulator(kind, game, seed, sticky=0.25)
    rng = np.random.default_rng(seed)
    n = len(e.actions)
    returns, lengths = [], []
    for _ in range(games):
        e.ale.reset_game()
        total, steps = 0.0, 0
        while steps < MAX_AGENT_STEPS:
            action = int(rng.integers(n))
            for _ in range(FRAME_SKIP):
                total += e.act(action)
                if e.ale.game_over():
                    break
            steps += 1
            if e.ale.game_over():
                break
        returns.append(total)
        lengths.append(steps)
    return np.array(returns), np.array(lengths)


def mean_and_error(values):
    return values.mean(), values.std(ddof=1) / np.sqrt(len(values))


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--atari-py", required=True,
                        help="the folder atari-py was installed into (pip install --target)")
    parser.add_argument("--game", default="breakout")
    parser.add_argument("--games", type=int, default=2000)
    parser.add_argument("--frames", type=int, default=50_000)
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--only", choices=["same-actions", "random-play"])
    args = parser.parse_args(argv)
    sys.path.insert(0, args.atari_py)
    kinds = ["ale-py", "atari-py"]
    import importlib.metadata

    import ale_py
    import atari_py  # noqa: F401  (fails here, with its path, if --atari-py is wrong)
    md5 = [Emulator(kind, args.game, 0, 0.0).rom_md5 for kind in kinds]
    print(f"ale-py {ale_py.__version__} against atari-py "
          f"{importlib.metadata.version('atari-py')}, {args.game}; "
          f"ROM md5 {md5[0]} / {md5[1]} ({'the same' if md5[0] == md5[1] else 'DIFFERENT'})")
    if args.only != "random-play":
        for sticky in (0.0, 0.25):
            first, games, reward = same_actions(kinds, args.game, args.frames, args.seed, sticky)
            print(f"same actions and seed, sticky actions {sticky}, {args.frames:,} frames "
                  f"({games} games, reward {reward:g}): "
                  + ("identical at every frame" if first is None
                     else f"first difference at frame {first:,}"))
    if args.only != "same-actions":
        results = {}
        for kind in kinds:
            returns, lengths = random_play(kind, args.game, args.games, args.seed)
            (m, se), (lm, lse) = mean_and_error(returns), mean_and_error(lengths)
            results[kind] = (m, se)
            print(f"{kind:9s} uniform random, sticky 0.25, {args.games} games: return "
                  f"{m:.3f} ± {se:.3f}, length {lm:.1f} ± {lse:.1f} agent steps")
        (m0, s0), (m1, s1) = results.values()
        print(f"difference {m0 - m1:+.3f} = {(m0 - m1) / np.hypot(s0, s1):+.1f} standard errors")


if __name__ == "__main__":
    main()
