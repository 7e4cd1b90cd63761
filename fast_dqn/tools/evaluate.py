"""Evaluate a trained agent:
python -m fast_dqn.tools.evaluate RUN_DIR [--episodes 30] [--video a.mp4] [--best]
python -m fast_dqn.tools.evaluate RUN_DIR --export agent.keras [--best]

Loads the run's latest complete checkpoint, plays full games (all lives, unclipped scores) with
the run's own preprocessing, and prints the mean, the std and, for the 57 games of the DQN
literature, the human-normalized score. --video records the first game at the emulator's
native resolution and frame rate (60 fps for Atari, so it plays in real time). --export
writes the main network instead, as a .keras file that loads without fast-dqn
(fast_dqn.agent.export).
"""

import contextlib
import dataclasses
import json
import os
import secrets
import sys

import gymnasium
import numpy as np

from fast_dqn.errors import ConfigError
from fast_dqn.run.settings.flags import (
    OneLineParser,
    add_version_flag,
    fail,
    parse_count,
    parse_real,
)
from fast_dqn.run.settings.validation import check_seed

ATARI_FPS = 60


class FirstGameRecorder:
    """Writes every frame of the first whole game played through `env` to an MP4 file.

    It sits directly on the raw env, below every wrapper, so it sees each emulator frame. The
    game ends at the next real reset (a lost life is not one) or when the caller closes it.
    H.264 in yuv420p, the one MP4 that browsers, VS Code and every player show: opencv's
    wheels encode only MPEG-4 Part 2, so the frames go to imageio-ffmpeg's own ffmpeg.

    Args:
        path: the MP4 file to publish the video at.
        fps: the video's frames per second; the emulator's own rate plays it in real time.
    """

    def __init__(self, path, fps):
        self.path = path
        # ffmpeg writes under a temporary name; close() links it to `path` only if that is
        # still free, so two evaluations writing one new path never overwrite each other.
        directory, name = os.path.split(os.path.abspath(path))
        self.partial = os.path.join(directory, f".{name}.partial-{os.getpid()}-"
                                    f"{secrets.token_hex(4)}.mp4")
        self.written = None  # the path the video was published at
        self.fps = fps
        self.writer = None
        self.frames = 0
        self.done = False

    def add(self, frame):
        """Write one frame, an RGB array (height, width, 3), unless the first game is over.

        Raises:
            ConfigError: ("video") ffmpeg cannot write the video.
        """
        import imageio_ffmpeg
        if self.done:
            return
        if self.writer is None:
            height, width = frame.shape[:2]
            # macro_block_size 2: yuv420p needs even sides; an odd one is scaled up a pixel.
            self.writer = imageio_ffmpeg.write_frames(
                self.partial, (width, height), fps=self.fps, codec="libx264",
                pix_fmt_in="rgb24", pix_fmt_out="yuv420p", macro_block_size=2,
                # The index first, so that a browser plays it before the whole file loads.
                output_params=["-movflags", "+faststart"], ffmpeg_log_level="error")
            try:
                self.writer.send(None)  # starts ffmpeg
            except (OSError, RuntimeError) as error:
                raise ConfigError("video", f"cannot write '{self.path}' ({error}); give a "
                                  "writable path ending in .mp4")
        self.writer.send(np.ascontiguousarray(frame, np.uint8))
        self.frames += 1

    def game_started(self):
        """A real reset: the first game ends here if it has frames."""
        if self.frames:
            self.close()

    def close(self):
        """End the video; later frames are dropped."""
        if self.writer is not None and not self.done:
            self.writer.close()
        self.done = True

    def publish(self):
        """Link the finished video to its path, or the first free `<stem>-N<ext>`; return that.

        A numbered path is taken where another process took the path meanwhile.

        Raises:
            ConfigError: ("video") the path and its numbered variants are all taken.
        """
        self.close()
        stem, extension = os.path.splitext(self.path)
        candidates = [self.path] + [f"{stem}-{n}{extension}" for n in range(2, 100)]
        try:
            for candidate in candidates:
                try:
                    os.link(self.partial, candidate)
                except FileExistsError:
                    continue
                self.written = candidate
                return candidate
            raise ConfigError("video", f"'{self.path}' and its numbered variants are taken; "
                              "give a new path")
        finally:
            self.discard()

    def discard(self):
        """End the video and remove its partial file; a published video stays."""
        self.close()
        if os.path.lexists(self.partial):
            os.remove(self.partial)


class RecordFrames(gymnasium.Wrapper):
    """Hands each raw frame of `env` to a FirstGameRecorder: render()'s RGB where `use_render`."""

    def __init__(self, env, recorder, use_render):
        super().__init__(env)
        self.recorder = recorder
        self.use_render = use_render

    def _frame(self, obs):
        return self.env.render() if self.use_render else obs

    def reset(self, **kwargs):
        self.recorder.game_started()
        obs, info = self.env.reset(**kwargs)
        self.recorder.add(self._frame(obs))
        return obs, info

    def step(self, action):
        result = self.env.step(action)
        self.recorder.add(self._frame(result[0]))
        return result


def build_eval_env(config, seed, recorder):
    """The run's evaluation env, seeded `seed` at its first reset, `recorder` on its raw frames.

    Raises:
        ConfigError: ("video") a --env game cannot render here.
    """
    from fast_dqn.envs import atari_wrappers as w
    from fast_dqn.envs.environment import SeedOnFirstReset, make_raw_atari_env, wrap_atari
    from fast_dqn.run.components import env_settings
    settings = env_settings(config, evaluation=True)
    if config.env is None:
        raw = make_raw_atari_env(settings.game, settings.sticky_actions,
                                 settings.full_action_space)
        env = wrap_atari(RecordFrames(raw, recorder, True), settings, training=False)
        return SeedOnFirstReset(env, seed)
    try:
        raw = gymnasium.make(config.env, render_mode="rgb_array", disable_env_checker=True)
        raw.reset(seed=seed)
        raw.render()
    except gymnasium.error.DependencyNotInstalled as error:
        raise ConfigError("video", f"{config.env} cannot render here ({error}); drop --video")
    recorder.fps = raw.metadata.get("render_fps") or 30
    env = w.FrameHistory(w.FullGameStats(RecordFrames(raw, recorder, True)),
                         k=config.history_length)
    return SeedOnFirstReset(env, seed)


PROG = "python -m fast_dqn.tools.evaluate"


def build_parser(prog=PROG):
    """The evaluate tool's argument parser, named `prog` in its messages."""
    parser = OneLineParser(prog=prog,
                           description="Play full games with a run's latest checkpoint and "
                           "report the mean, std and human-normalized score.")
    parser.add_argument("run_dir", metavar="RUN_DIR", help="a run directory with checkpoints")
    parser.add_argument("--episodes", type=parse_count, default=30,
                        help="full games to play (default: 30)")
    parser.add_argument("--epsilon", type=parse_real, default=None,
                        help="epsilon of the evaluation policy (default: the run's own "
                        "--eval-epsilon, as its evaluations used: 0.05 in Nature, 0.001 in "
                        "Dopamine, 0 in the classic preset)")
    parser.add_argument("--video", metavar="PATH",
                        help="write the first game to this MP4 file (native frames, real time)")
    parser.add_argument("--best", action="store_true",
                        help="play the weights of the run's best evaluation (RUN_DIR/best) "
                        "instead of its latest checkpoint")
    parser.add_argument("--export", metavar="PATH.keras",
                        help="write the network (the latest checkpoint's main network, or with "
                        "--best the best evaluation's) to PATH.keras, Keras's own format, "
                        "which keras.saving.load_model reads without fast-dqn (TensorFlow and "
                        "JAX tested); no games are played, so --episodes, --epsilon, --seed "
                        "and --video do not apply")
    parser.add_argument("--seed", type=parse_count, default=12_345,
                        help="seed of the games and the epsilon draws (default: 12_345, "
                        "distinct from training's streams)")
    add_version_flag(parser)
    return parser


def _computable(config):
    """The run's config with its compute type resolved again for this machine (its weights are
    float32 whatever the compute type, and evaluate has no --precision)."""
    from fast_dqn.agent.backend_setup import computes_bfloat16, computes_float16
    from fast_dqn.run.settings.validation import resolve_precision
    native = {"bfloat16": computes_bfloat16, "float16": computes_float16}
    if config.mixed_precision or (config.precision in native
                                  and not native[config.precision]()):
        config = dataclasses.replace(config, precision="auto", mixed_precision=False)
    # How the run's train calls compiled and where its samplers acted do not matter here,
    # and some of those choices are JAX's alone: a GPU run evaluates under TensorFlow too.
    config = dataclasses.replace(config, scan_unroll=0, fused_optimizer=False)
    if hasattr(config, "act_on_cpu"):
        config = dataclasses.replace(config, act_on_cpu=False)
    return resolve_precision(config)


# A run training beside evaluate prunes its older checkpoints and replaces best/: a
# checkpoint chosen as the newest may be gone before it is read. Its state is read at once,
# and one that vanished gives way to the newer one, a few times over.
_READ_TRIES = 5


def _read_newest(choose, run_dir, setting, schema):
    """(checkpoint, state) of the newest checkpoint `choose()` returns, checked against `schema`."""
    from fast_dqn.run.storage.array_file import CorruptFile
    from fast_dqn.state_schema import StateMismatch
    failed = set()
    for _ in range(_READ_TRIES):
        checkpoint = choose()
        try:
            return checkpoint, checkpoint.load_state(schema)
        except (FileNotFoundError, CorruptFile) as error:
            # Pruned by the run while being read (its folder may still be going away), or
            # damaged: the one that fails twice is damaged.
            if checkpoint.path in failed:
                raise ConfigError(setting, f"{checkpoint.path} cannot be read ({error}); "
                                  "move it away to use the one before it")
            failed.add(checkpoint.path)
        except (StateMismatch, ValueError) as error:  # ValueError: state.json is not JSON
            raise ConfigError(setting, checkpoint.unfit_state(error))
    raise ConfigError(setting, f"the checkpoints of '{run_dir}' were replaced {_READ_TRIES} "
                      "times while being read (a run is checkpointing fast beside this); try "
                      "again")


def _newest_checkpoint(run_dir, warn):
    from fast_dqn.run.storage.checkpoint import latest_checkpoint
    from fast_dqn.state_schema import WEIGHTS_ONLY
    return _read_newest(lambda: latest_checkpoint(run_dir, "RUN_DIR", warn=warn), run_dir,
                        "RUN_DIR", WEIGHTS_ONLY)


def _best_weights(run_dir, warn):
    """(path, step, mean, weights, identity) of the run's best evaluation, or a ConfigError;
    identity is None for an export written before exports recorded their run's."""
    from fast_dqn.run.storage.array_file import CorruptFile
    from fast_dqn.run.storage.best_weights import best_store
    from fast_dqn.run.storage.checkpoint import UnsupportedFormat

    def choose():
        try:
            best = best_store(run_dir, warn=warn).latest()
        except (CorruptFile, UnsupportedFormat) as error:
            raise ConfigError("best", f"'{run_dir}'s best/ cannot be used ({error}); drop "
                              "--best")
        if best is None:
            raise ConfigError("best", f"'{run_dir}' has no best evaluation yet (best/ is "
                              "written at each evaluation that beats the earlier ones); drop "
                              "--best")
        return best

    from fast_dqn.state_schema import BEST_EXPORT
    best, state = _read_newest(choose, run_dir, "best", BEST_EXPORT)
    if "identity" in state:
        from fast_dqn.state_schema import IDENTITY, StateMismatch, check_state
        try:
            check_state(state["identity"], IDENTITY, "/identity")
        except StateMismatch as error:
            raise ConfigError("best", best.unfit_state(error)) from None
    return best.path, best.step, state["mean"], state["weights"], state.get("identity")


def _check_shapes(weights, expected, run_dir):
    """Refuse best/'s bare weights of another network (or action count) in words, not Keras's."""
    shapes = [np.shape(w) for w in weights]
    wanted = [np.shape(w) for w in expected]
    if shapes != wanted:
        raise ConfigError("best", f"'{run_dir}'s best/ holds weights of another network "
                          f"({len(shapes)} arrays, the first {shapes[:1]}; this run's network "
                          f"has {len(wanted)}, the first {wanted[:1]}): it is not this run's. "
                          "Drop --best, or move best/ away; the next evaluation writes a new "
                          "one")


def evaluation_epsilon(given, config):
    """(epsilon, where it comes from) to evaluate with: --epsilon, else the run's --eval-epsilon.

    The run's own replays what its evaluations logged.
    """
    if given is not None:
        return given, "--epsilon"
    return config.eval_epsilon, "the run's --eval-epsilon"


def _check_new_file(path, setting):
    """Refuse a path for a file evaluate writes unless it is new, in a writable directory: the
    file is published by a hard link, which takes no existing name."""
    directory = os.path.dirname(os.path.abspath(path))
    if not os.path.isdir(directory):
        raise ConfigError(setting, f"'{directory}' does not exist; give a path in an "
                          "existing directory")
    if os.path.islink(path) and not os.path.exists(path):
        raise ConfigError(setting, f"'{path}' is a symbolic link to a missing file; remove "
                          "it or give another path")
    if os.path.isdir(path):
        raise ConfigError(setting, f"'{path}' is a directory; give the path of a new file")
    if os.path.lexists(path):
        raise ConfigError(setting, f"'{path}' exists and would be overwritten; give a new "
                          "path")
    from fast_dqn.run.storage.run_directory import check_writable
    check_writable(directory, setting)  # before the work starts, not a failure after


def _check_video_path(video):
    _check_new_file(video, "video")  # before ffmpeg starts, not a broken pipe after


def _run_config(run_dir):
    """The run's config.json, checked as --resume checks it, resolved for this machine."""
    from fast_dqn.run.resume import saved_values
    from fast_dqn.run.run_kinds import RUN_KINDS
    from fast_dqn.run.settings.validation import check_saved_types, resolve, saved_value_error
    from fast_dqn.run.storage.run_directory import CONFIG_FILE, load_run_config
    saved = load_run_config(run_dir, "RUN_DIR")
    loop = saved["loop"]
    kind = RUN_KINDS.get(loop) if isinstance(loop, str) else None
    if kind is None:  # null or a loop of no script: its settings would be read as another's
        raise ConfigError("RUN_DIR", f"{os.path.join(run_dir, CONFIG_FILE)} has \"loop\": "
                          f"{json.dumps(loop)}, which is not one of {', '.join(RUN_KINDS)}; "
                          "put back the value the run was started with")
    try:
        check_saved_types(saved, run_dir, kind.config_class)
    except ConfigError as error:  # worded as --resume's: here it is about RUN_DIR
        raise ConfigError("RUN_DIR", error.message) from None
    config_class = kind.config_class
    config = config_class(**saved_values(saved, config_class))
    if hasattr(config, "ray_address"):  # evaluation plays here: a cluster is neither asked nor
        config = dataclasses.replace(config, ray_address=None)  # probed
    # Built as a run's parts are; no replay is, so its size need not fit here.
    try:
        return resolve(_computable(config), replay=False)
    except ConfigError as error:  # a value of config.json: named as there, not as a flag
        raise saved_value_error(error, saved, run_dir, setting="RUN_DIR") from None


def _chosen_network(run_dir, best, warn):
    """(what, step, load(learner, identity)): the weights to play or export, read now. load puts
    them into a learner, refusing those of another game or network, as --resume does; identity
    is the run's (fast_dqn.run.training.run_identity)."""
    if best:
        path, step, best_mean, weights, saved = _best_weights(run_dir, warn)

        def load(learner, identity):
            from fast_dqn.run.training import foreign_checkpoint
            foreign = saved is not None and foreign_checkpoint(path, saved, identity)
            if foreign:  # another run's best/, maybe of the same shapes
                raise ConfigError("best", f"{foreign}: it is not this run's; drop --best, or "
                                  f"move {os.path.dirname(path)} away")
            _check_shapes(weights, learner.main.get_weights(), run_dir)
            try:
                learner.set_main_weights(weights)
            except FloatingPointError as error:  # the learner's TrainingDiverged
                raise _diverged(path, error) from None
        return (f"{path} (the best evaluation: agent step {step:,}, mean {best_mean:.2f})",
                step, load)
    checkpoint, state = _newest_checkpoint(run_dir, warn)

    def load(learner, identity):
        from fast_dqn.run.training import foreign_checkpoint
        foreign = foreign_checkpoint(checkpoint.path, state["identity"], identity)
        if foreign:  # a network of another game, maybe of the same shapes
            raise ConfigError("RUN_DIR", f"{foreign}: it is not this run's; put back the "
                              f"run's own checkpoints in '{os.path.dirname(checkpoint.path)}'")
        from fast_dqn.agent.learner import BadCount
        try:
            learner.load_state_dict(state["learner"])
        except BadCount as error:  # a count no run writes: the checkpoint was edited
            raise ConfigError("RUN_DIR", checkpoint.unfit_state(error)) from None
        except ValueError as error:  # weights of another network
            raise ConfigError("RUN_DIR", f"the networks of {checkpoint.path} do not fit "
                              f"the run's config.json ({str(error).splitlines()[0][:160]}"
                              "): was either edited? put back what the run started with")
        except FloatingPointError as error:  # the learner's TrainingDiverged
            raise _diverged(checkpoint.path, error) from None
    return f"{checkpoint.path} (agent step {checkpoint.step:,})", checkpoint.step, load


def _diverged(path, error):
    """Weights with a NaN or an infinity: neither played nor exported."""
    from fast_dqn.run.training import diverged_checkpoint
    return ConfigError("RUN_DIR", diverged_checkpoint(path, error))


def _warn(message):
    print(message, file=sys.stderr)


def evaluate_run(run_dir, episodes, epsilon, seed, video=None, out=None, best=False):
    """Play full games with a run's latest checkpoint, or its best weights, and score them.

    The arguments are the tool's flags (build_parser): `episodes` games at `epsilon` (None:
    the run's own, evaluation_epsilon), seeded `seed`, the first written to the MP4 file
    `video` where given, with best/'s weights where `best`.

    Returns:
        {"step" (agent steps of the weights), "returns" (each game's unclipped score),
        "mean", "std", "min", "max", "human_normalized" (None for a --env game), "video"
        (the path written, or None)}.

    Raises:
        ConfigError: the run, its weights or a path cannot be used, in one line.
    """
    from fast_dqn.agent.backend_setup import keras_backend
    from fast_dqn.loops.evaluation import OneAtATime, game_seeds, play
    from fast_dqn.run.components import build_evaluation_games
    from fast_dqn.run.training import build_learner, run_identity, start_backend
    from fast_dqn.tools.atari_scores import human_normalized
    from fast_dqn.tools.partial_file import writing

    out = out or sys.stdout
    config = _run_config(run_dir)
    what, step, load = _chosen_network(run_dir, best, _warn)
    if video is not None:
        _check_video_path(video)
    # Before anything imports Keras: an unsupported KERAS_BACKEND is one line, and the
    # import's start-up noise (TensorFlow's C++ logging) is filtered (backend_setup).
    keras_backend()
    start_backend(config)
    recorder = FirstGameRecorder(video, ATARI_FPS) if video else None
    # A video needs the raw frames of one Python env; otherwise the run's own evaluation
    # games, --eval-workers at once where it can. The same games either way.
    games = OneAtATime(build_eval_env(config, seed, recorder)) if recorder \
        else build_evaluation_games(config)
    # The video is being written from the first game's first frame to its publication.
    writes = writing(video) if recorder else contextlib.nullcontext()
    try:
        with writes:
            learner = build_learner(config, games.observation_shape, games.num_actions)
            load(learner, run_identity(config, games.observation_shape, games.num_actions))
            epsilon, source = evaluation_epsilon(epsilon, config)
            print(f"evaluating {what}: {episodes} game{'s' * (episodes != 1)} at epsilon "
                  f"{epsilon:g} ({source})", file=out, flush=True)
            returns = play(games, learner.q_values, game_seeds((seed,), 0, episodes),
                           epsilon)
            if recorder:
                recorder.publish()
    finally:
        if recorder:
            recorder.discard()  # a stopped evaluation leaves no half-written video
        games.close()
    mean = float(np.mean(returns))
    result = {"step": step, "returns": returns, "mean": mean,
              "std": float(np.std(returns)), "min": float(np.min(returns)),
              "max": float(np.max(returns)),
              "human_normalized": human_normalized(config.game, mean) if config.game else None,
              "video": recorder.written if recorder else None}
    return result


def _check_export_path(path):
    if not path.endswith(".keras"):
        raise ConfigError("export", f"'{path}' does not end in .keras, the one file name "
                          "Keras saves its own format under; give PATH.keras")
    _check_new_file(path, "export")


def _write_error(error, path):
    """What an OSError while writing the export is to the user, about PATH (Keras's names no
    file). A full, over-quota, read-only or failing disk stays an OSError, which
    fast_dqn.tools.tool_exits words as one line, status 1; any other refusal is a ConfigError."""
    from fast_dqn.errors import STORAGE_ERRORS
    if error.errno in STORAGE_ERRORS:
        return OSError(error.errno, error.strerror or os.strerror(error.errno), path)
    return ConfigError("export", f"cannot write '{path}' ({error.strerror or error}); nothing "
                       "was written: give a path in a directory you can write to")


def export_run(run_dir, path, best=False, out=None):
    """Write the run's main network to `path`, a new .keras file, of built-in layers.

    The network is the latest checkpoint's, or best/'s where `best`; fast_dqn.agent.export
    makes the portable copy. It returns the names of the network's actions, in output order,
    or None where the env has none.

    Raises:
        ConfigError: ("RUN_DIR", "best" or "export") in one line.
    """
    from fast_dqn.agent.backend_setup import keras_backend
    from fast_dqn.tools.partial_file import new_partial, writing

    out = out or sys.stdout
    _check_export_path(path)
    config = _run_config(run_dir)
    what, step, load = _chosen_network(run_dir, best, _warn)
    # Before anything imports Keras (fast_dqn.agent.export does, at its top): an unsupported
    # KERAS_BACKEND is one line, and the import's start-up noise is filtered (backend_setup).
    keras_backend()
    from fast_dqn.agent.export import portable_copy
    from fast_dqn.envs.environment import make_env
    from fast_dqn.run.components import env_settings
    from fast_dqn.run.training import build_learner, run_identity, start_backend

    start_backend(config)
    env = make_env(env_settings(config), seed=0, training=False)
    try:
        actions = (env.unwrapped.get_action_meanings()
                   if hasattr(env.unwrapped, "get_action_meanings") else None)
        learner = build_learner(config, env.observation_space.shape, env.action_space.n)
        identity = run_identity(config, env.observation_space.shape, env.action_space.n)
    finally:
        env.close()
    load(learner, identity)
    name = f"fast_dqn_{(config.game or config.env).replace('/', '_').replace('-', '_')}"
    model = portable_copy(learner.main, name=f"{name}_step_{step}")
    # Written beside, then linked: a stop midway (Ctrl-C, SIGTERM as Terminated, a full disk)
    # leaves no half-written file under PATH, and the finally removes the partial.
    partial = None
    try:
        with writing(path):
            partial = new_partial(path)
            model.save(partial)
            try:
                os.link(partial, path)  # fails where PATH now exists: another export's, kept
            except FileExistsError:
                raise ConfigError("export", f"'{path}' was written by another process "
                                  "meanwhile; it is kept: give a new path")
    except OSError as error:  # Keras lets the disk's own error through, named or not
        raise _write_error(error, path) from None
    finally:
        if partial is not None and os.path.lexists(partial):
            os.remove(partial)
    print(f"exported the network of {what} to {path}: float32, input "
          f"{model.inputs[0].dtype} {tuple(model.inputs[0].shape[1:])}, output the Q-value of "
          f"each of its {env.action_space.n} actions" + (f" ({', '.join(actions)})"
                                                        if actions else ""), file=out)
    return actions


def main(argv=None, prog=PROG):
    """The evaluate tool: parse its command line, evaluate or export; return the exit status."""
    parser = build_parser(prog)
    args = parser.parse_args(argv)
    if args.episodes < 1:
        return fail(parser.prog, ConfigError("episodes", "must be at least 1"))
    if args.epsilon is not None and not 0.0 <= args.epsilon <= 1.0:
        return fail(parser.prog, ConfigError("epsilon", f"must be in [0, 1], got "
                                             f"{args.epsilon}"))
    try:
        check_seed(args.seed)
    except ConfigError as error:
        return fail(parser.prog, error)
    if args.export is not None:
        if args.video is not None:
            return fail(parser.prog, ConfigError("export", "plays no game, so it records no "
                                                 "video; give --export and --video apart"))
        try:
            export_run(args.run_dir, args.export, best=args.best)
        except ConfigError as error:
            return fail(parser.prog, error)
        return 0
    try:
        result = evaluate_run(args.run_dir, args.episodes, args.epsilon, args.seed, args.video,
                              best=args.best)
    except ConfigError as error:
        return fail(parser.prog, error)
    line = (f"mean {result['mean']:.2f} +- {result['std']:.2f} (min {result['min']:g}, "
            f"max {result['max']:g}) over {len(result['returns'])} "
            f"game{'s' * (len(result['returns']) != 1)}")
    if result["human_normalized"] is not None:
        line += f"; human-normalized {100 * result['human_normalized']:.1f}%"
    print(line)
    if result["video"] is not None:
        if result["video"] != args.video:
            print(f"'{args.video}' was written by another process meanwhile; this video is "
                  "kept beside it")
        print(f"video of the first game: {result['video']}")
    return 0


if __name__ == "__main__":
    from fast_dqn.tools.tool_exits import run_tool
    sys.exit(run_tool(PROG, main, then_ignore=True))
