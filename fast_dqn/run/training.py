"""A run from its Config: its parts assembled (built by fast_dqn.run.components), restored from a
checkpoint, and either loop run with them."""

import contextlib
import dataclasses
import json

from fast_dqn.agent.backend_setup import configure_backend, device_line
from fast_dqn.agent.compile_cache import compile_clock
from fast_dqn.envs.environment import (
    EnvStateMismatch,
    check_env_state,
    env_state,
    load_env_state,
    make_env,
)
from fast_dqn.errors import ConfigError
from fast_dqn.loops.evaluation import Evaluator
from fast_dqn.loops.minibatch_schedule import MinibatchSchedule
from fast_dqn.rng_streams import ACTION_RNG_STREAM, EVAL_RNG_STREAM, rng_for
from fast_dqn.run.components import (
    build_evaluation_games,
    build_learner,
    build_local_backend,
    build_replay,
    env_settings,
    loop_settings,
    ray_sampler_builders,
    ray_settings,
)
from fast_dqn.run.logs.console_lines import (
    games_restart_line,
    groups_line,
    refill_line,
    replay_line,
    resumed_line,
)
from fast_dqn.run.logs.monitor import Monitor
from fast_dqn.run.logs.progress import RunProgress, make_console
from fast_dqn.run.logs.tensorboard_log import TensorBoardLog
from fast_dqn.run.resume import plan_given_on_resume
from fast_dqn.run.settings.hyperparameters import RESUME_OVERRIDES, learning_settings
from fast_dqn.run.settings.validation import has_type, resolve
from fast_dqn.run.storage.best_weights import BestWeights
from fast_dqn.run.storage.checkpoint import Checkpointer, CheckpointStore, fall_back
from fast_dqn.run.storage.run_directory import load_run_config, mark_checkpointed
from fast_dqn.state_schema import FAST_RUN, NATURE_RUN, StateMismatch, check_state


def start_backend(config):
    """Set up the Keras backend for the run, and print the line that says on what it trains.

    The networks go where the backend puts them by default: the first GPU, if any.

    Args:
        config: the run's resolved config (its seed, threads and precision).
    """
    backend, devices = configure_backend(config.seed, config.threads, config.deterministic,
                                         config.matmul_precision)
    print(device_line(backend, devices, config.precision,
                      chosen=getattr(config, "precision_chosen", False)), flush=True)
    if not config.deterministic:
        print("deterministic kernels: off (--no-deterministic): a seed no longer repeats its "
              "run on a GPU", flush=True)
    if backend == "jax":
        from fast_dqn.agent.compile_cache import use_cache
        print(use_cache(), flush=True)


def diverged_checkpoint(path, error):
    """Why a checkpoint holding a NaN or an infinity is refused, and what to do.

    Nothing can go on from it. The checkpoint does not say how the value got there (an edit,
    damage, or a diverged network saved by a fast-dqn that checked only the losses), so the
    message names each, and the fix for each.

    Args:
        path: the checkpoint's folder, which the message names.
        error: the TrainingDiverged that names what is not finite.

    Returns:
        One message.
    """
    where = getattr(error, "where", None)
    what = f"{where} is not finite" if where else str(error)
    return (f"{path} holds a NaN or an infinity ({what}): it was edited or damaged, or saved "
            "by a fast-dqn that checked only the losses after its training diverged; nothing "
            f"can go on from it: {fall_back(path, otherwise='start a new run')} (after a "
            "divergence, one with a lower --lr, or for --env smaller rewards)")


def unfit_networks(checkpoint, error, unrecorded):
    """Why a checkpoint's networks that do not fit this run's are refused, naming both edits.

    Either config.json or the checkpoint may be the one edited. `unrecorded`: the settings the
    checkpoint does not record (an earlier release's), which check_settings could not compare.
    """
    names = ", ".join(json.dumps(name) for name in unrecorded)
    return (f"{checkpoint.path}: its networks do not fit the ones this run's settings build "
            f"({str(error).splitlines()[0][:160]}); it records no {names}, so either "
            "config.json was edited there (put back the values the run started with) or the "
            f"checkpoint was edited ({fall_back(checkpoint.path)})")


def check_settings(config, recorded, step):
    """Refuse a config.json that differs from the settings the checkpoint was trained with.

    A hand edit of one that shapes the networks or replay would load it wrongly, or not at all.
    `recorded` is the checkpoint's {setting: value} (learning_settings). Raises StateMismatch
    for a recorded value of no kind the setting takes, ConfigError for a setting config.json now
    gives another value.
    """
    current = learning_settings(config)
    # Only the settings both know: a later release's new setting is not an edit.
    fields = {f.name: f for f in dataclasses.fields(config.as_config())}
    for name in sorted(set(recorded) & set(current)):
        value, field = recorded[name], fields.get(name)
        # config.json's types are checked as it is read: a value of no kind the setting
        # takes was edited into the checkpoint.
        if field and not (has_type(value, field.type) or value is None and (
                field.default is None or current[name] is None)):
            raise StateMismatch(f"/settings/{name} is {value!r}, not a value "
                                f"\"{name}\" takes")
        if recorded[name] != current[name]:
            raise ConfigError("resume", f"config.json has \"{name}\": "
                              f"{_as_saved(config, name, current[name])}, but the checkpoint "
                              "of step "
                              f"{step:,} was trained with {json.dumps(recorded[name])}; "
                              "put that value back (only "
                              f"{', '.join(RESUME_OVERRIDES)} may change on resume)")


def _as_saved(config, name, value):
    """A setting as config.json writes it, and what it resolved to where that differs (null is
    the optimizer's own default, say)."""
    try:
        saved = load_run_config(config.logdir, "resume").get(name, value)
    except ConfigError:
        saved = value
    if saved == value:
        return json.dumps(value)
    return f"{json.dumps(saved)} (which this run resolves to {json.dumps(value)})"


def run_identity(config, observation_shape, num_actions):
    """What a checkpoint must match to be this run's: its game or env, and its network's ends.

    Args:
        config: the run's config, whose game or env it names.
        observation_shape: one observation's shape, as the network takes it.
        num_actions: the game's action count, the network's outputs.

    Returns:
        {"game", "env", "num_actions", "observation_shape"}, as a checkpoint's "identity".
    """
    return {"game": config.game, "env": config.env, "num_actions": int(num_actions),
            "observation_shape": tuple(observation_shape)}


def foreign_checkpoint(path, saved, identity):
    """Why a checkpoint trained on another game or network is not this run's, or None.

    Args:
        path: the checkpoint's folder, which the sentence names.
        saved: the checkpoint's "identity" (run_identity's shape).
        identity: this run's (run_identity).

    Returns:
        The start of a sentence naming both, to which the caller adds its fix; or None.
    """
    if saved == identity:
        return None
    return (f"{path} was trained on {_described(saved)}, but config.json describes "
            f"{_described(identity)}")


def _described(identity):
    """A run's game and network inputs in words: 'pong (6 actions, 4 stacked 84x84 frames)'."""
    shape = tuple(identity["observation_shape"])
    inputs = (f"{shape[0]} stacked {shape[1]}x{shape[2]} frames" if len(shape) == 3
              else f"observations of shape {shape}")
    return f"{identity['game'] or identity['env']} ({identity['num_actions']} actions, {inputs})"


def _fits(state, schema):
    try:
        check_state(state, schema)
    except StateMismatch:
        return False
    return True


def load_run_state(checkpoint, schema):
    """The checkpoint's state, checked against `schema` (the loop's).

    The other loop's state means config.json's "loop" was edited, and is refused as such
    (ConfigError), not as a damaged file (StateMismatch).
    """
    state = checkpoint.load_state()
    mine, theirs = ("dqn", "fast") if schema is NATURE_RUN else ("fast", "dqn")
    if not _fits(state, schema) and _fits(state, {"dqn": NATURE_RUN, "fast": FAST_RUN}[theirs]):
        raise ConfigError("resume", f"{checkpoint.path} is a checkpoint of a \"{theirs}\" "
                          f"run, but config.json says \"loop\": \"{mine}\": it was edited; put "
                          f"back \"loop\": \"{theirs}\" and resume it with that loop's script")
    check_state(state, schema)  # what does not fit, named
    return state


@contextlib.contextmanager
def unfit_state_refused(checkpoint):
    """Turn a checkpoint state that a part cannot load into one line naming the checkpoint.

    Around the loading only: a bug elsewhere keeps its traceback. A ConfigError already says
    more (settings edited in config.json) and passes through; with `checkpoint` None, every
    error does.
    """
    try:
        yield
    except ConfigError:
        raise
    except (StateMismatch, TypeError, KeyError, IndexError, ValueError) as error:
        if checkpoint is None:
            raise
        raise ConfigError("resume", checkpoint.unfit_state(error)) from error


@contextlib.contextmanager
def unfit_games_refused(checkpoint):
    """Turn a saved game that does not fit this run's env into one ConfigError line.

    The wrapper stack follows settings that check_settings compares, so only an edit gets here.
    """
    try:
        yield
    except EnvStateMismatch as error:
        raise ConfigError("resume", f"the games saved in {checkpoint.path} do not fit this "
                          f"run's env ({error}); was config.json edited? put back the values "
                          "the run started with")


class NatureGamePart:
    """The Nature loop's part of a checkpoint: its game, mid-episode, and its next observation."""

    def __init__(self, env):
        self.env = env

    def state_dict(self):
        return {"env": env_state(self.env)}

    def check_state_dict(self, state):
        """Raise, changing nothing, unless the whole state's game and observation fit this env."""
        check_env_state(self.env, state["env"])
        obs, shape = state["loop"]["obs"], tuple(self.env.observation_space.shape)
        if obs.shape != shape:
            raise StateMismatch(f"/loop/obs has shape {obs.shape}, not the observations' "
                                f"{shape}")

    def load_state_dict(self, state):
        # The env is rebuilt around the saved game: later checkpoints save the new one.
        self.env = load_env_state(self.env, state["env"])


class SamplerGamesPart:
    """The fast loop's part of a checkpoint: its games, and the transitions held since a sync."""

    def __init__(self, backend):
        self.backend = backend

    def state_dict(self):
        return {"samplers": self.backend.state_dict()}

    def check_state_dict(self, state):
        """Raise, changing nothing, unless the games and held transitions of the whole state fit."""
        from fast_dqn.loops.fast_loop_state import HeldTransitions
        self.backend.check_state_dict(state["samplers"])
        space = self.backend.observation_space
        HeldTransitions.check_saved(state["loop"]["held"], self.backend.num_shards,
                                    space.shape[1:], space.dtype)

    def load_state_dict(self, state, step):
        """Continue the saved games at agent step `step`; False where they restart instead."""
        return self.backend.load_state_dict(state["samplers"], step)


class NoGamesPart:
    """A loop with no part of its own to save (tests of the shared parts)."""

    def state_dict(self):
        return {}

    def check_state_dict(self, state):
        pass


class RunParts:
    """What both loops share: learner, replay, monitor, evaluator, RNGs and checkpoints.

    `collect` gathers their state for a checkpoint; `restore` puts a checkpoint back, and
    returns the loop's own state. Each part says itself whether its share of a checkpoint
    fits it (check_state_dict); this only orders the calls: every part is checked before any
    is loaded, and before any file is changed. A checkpoint that does not fit is refused with
    a ConfigError, every part left unloaded. The loop's own part `own` (None: NoGamesPart) is
    saved and checked with the rest; the train_* functions load it.

    `observation_shape` is one stacked state's, (k, H, W) for Atari; `acts_with` ("main" or
    "target") is the network the loop acts and evaluates with; `console_out` None is standard
    output (a run group gives each run its own log).
    """

    def __init__(self, config, observation_shape, frame_dtype, num_actions, num_shards,
                 acts_with, resume=None, stop=None, schema=NATURE_RUN, own=None,
                 console_out=None):
        self.config = config
        self.settings = loop_settings(config)
        # What a checkpoint must match to be loaded into this run at all.
        self.identity = run_identity(config, observation_shape, num_actions)
        self.learner = build_learner(config, observation_shape, num_actions)
        self.replay = build_replay(config, observation_shape[1:], num_shards, frame_dtype)
        self.rng = rng_for(config.seed, ACTION_RNG_STREAM)
        self.resume = resume
        self.state = self._read_checkpoint(schema) if resume else None
        self.progress = RunProgress(config.timesteps, config.train_freq, config.prepopulate,
                                    config.evaluate, config.eval_episodes)
        self.own = own or NoGamesPart()
        learner = self.learner
        # Built before the monitor whose lines it writes: it checks the checkpoint's best.
        best = BestWeights(config.logdir, {"main": learner.main_weights,
                                           "target": learner.target_weights}[acts_with],
                           lambda line: self.monitor.message(line), identity=self.identity)
        # Only a run that evaluates keeps a best; every run's checkpoint has its best checked.
        self.best = best if config.evaluate else None
        if resume:
            self._check_and_load_networks(best)
        step = self.state["loop"]["step"] if resume else 0
        console = make_console(config.timesteps, initial=step, out=console_out)
        # The state's values were checked above: the monitor's errors are its own.
        self.monitor = self._monitor(config, console, step)
        self.evaluator = None
        if config.evaluate:
            q_values = {"main": learner.q_values, "target": learner.target_q_values}[acts_with]
            self.evaluator = Evaluator(
                build_evaluation_games(config), q_values, config.eval_episodes,
                config.eval_epsilon, (config.seed, EVAL_RNG_STREAM), self.monitor,
                should_stop=stop, on_result=self.best.record,
                on_game=self.monitor.evaluation_game)
        self.checkpoints = Checkpointer(
            CheckpointStore(config.logdir, warn=self.monitor.message,
                            on_saved=lambda step: mark_checkpointed(config.logdir, step)),
            config.checkpoint_freq,
            self.collect, replay=self.replay if config.save_replay else None, stop=stop,
            message=self.monitor.message, last_saved=step if resume else None,
            plan=plan_given_on_resume(config))

    def _read_checkpoint(self, schema):
        """The checkpoint's state, checked whole before any part reads it (the monitor
        rewrites logs from it) and found to be this run's (before the monitor trims the logs
        back to the checkpoint's positions)."""
        resume = self.resume
        with unfit_state_refused(resume):
            state = load_run_state(resume, schema)
            for part in ("loop", "monitor"):
                if state[part]["step"] != resume.step:
                    raise StateMismatch(f"/{part}/step is {state[part]['step']:,}, but "
                                        f"the checkpoint is of step {resume.step:,}")
        foreign = foreign_checkpoint(resume.path, state["identity"], self.identity)
        if foreign:
            raise ConfigError("resume", f"{foreign}; it does not belong to this run: put back "
                              "the game or env, and the settings, the run started with")
        return state

    def _check_and_load_networks(self, best):
        """The recorded settings and every part checked, then the networks loaded; the run
        directory marked as checkpointed, its first file change."""
        resume = self.resume
        with unfit_state_refused(resume), unfit_games_refused(resume):
            check_settings(self.config, self.state["settings"], resume.step)
            self._check_parts(best)
            self._load_networks()
        # Accepted: a run made before first-checkpoint.txt gets it now (before the monitor's
        # changes).
        mark_checkpointed(self.config.logdir, resume.step)

    def _monitor(self, config, console, step):
        saved = self.state["monitor"] if self.resume else None
        return Monitor(config.logdir, config.timesteps, console=console,
                       scalars=TensorBoardLog(config.logdir,
                                              resume=saved["tensorboard"] if saved else None,
                                              resumed_at=step),
                       resume=saved,
                       replay_fill=lambda: len(self.replay) / self.replay.capacity,
                       progress=self.progress, compiles=compile_clock())

    def collect(self, step):
        return {"identity": self.identity, "settings": learning_settings(self.config),
                "learner": self.learner.state_dict(), "replay": self.replay.state_dict(),
                "monitor": self.monitor.state_dict(step),
                # No TensorFlow RNG: it only initialises the weights, which are saved, and the
                # train step draws no random numbers.
                "rngs": {"action": self.rng.bit_generator.state},
                "best": self.best.state_dict() if self.best else None,
                **self.own.state_dict()}

    def restore(self, adapt=None):
        """Load the checkpoint into the parts.

        Returns the loop's state, or None where the run does not resume. `adapt(loop) -> loop`
        makes the loop's own changes to its state (a smaller budget) before a refill defers what
        the state owes.
        """
        if not self.resume:
            return None
        with unfit_state_refused(self.resume):
            return self._restore(adapt)

    def _check_parts(self, best):
        """Each part's word on its share of the checkpoint, before any is loaded or any log cut:
        a refused resume leaves every part and file as it was. `best` is built in every run."""
        from fast_dqn.agent.learner import NetworkMismatch  # Keras is imported by now
        state = self.state
        self.own.check_state_dict(state)
        self.replay.check_state_dict(state["replay"])
        best.check_state_dict(state["best"], self.resume.step)
        try:
            self.learner.check_state_dict(state["learner"])
        except NetworkMismatch as error:
            unrecorded = sorted(set(learning_settings(self.config)) - set(state["settings"]))
            if not unrecorded:
                # config.json gives every setting as the checkpoint records it
                # (check_settings): networks that differ were edited into the checkpoint. A
                # StateMismatch, which unfit_state words, naming the checkpoint.
                raise
            raise ConfigError("resume", unfit_networks(self.resume, error, unrecorded)) \
                from None
        except FloatingPointError as error:  # the learner's TrainingDiverged: see below
            raise ConfigError("resume", diverged_checkpoint(self.resume.path, error)) from None

    def _load_networks(self):
        """Load the learner's state, checked by _check_parts, before the monitor is built (the
        progress line counts the minibatches trained from it)."""
        self.learner.load_state_dict(self.state["learner"])
        self.progress.minibatches_done = self.learner.minibatches_trained()

    def _restore(self, adapt):
        """The rest of restore(); the networks were loaded with the parts built."""
        state, loop = self.state, dict(self.state["loop"])
        if adapt:
            loop = adapt(loop)
        self.rng.bit_generator.state = state["rngs"]["action"]
        if self.best:
            self.best.load_state_dict(state["best"])
        if self.resume.has_replay:
            self.resume.load_replay(self.replay.arrays())
            self.replay.load_state_dict(state["replay"])
        else:
            self.replay.rng.bit_generator.state = state["replay"]["rng"]
            schedule = MinibatchSchedule.from_loop_state(loop, self.config.train_freq)
            schedule.refill(loop["step"], self.config.prepopulate, owed=loop.get("owed", 0))
            loop["schedule"] = schedule.state_dict()
            if "owed" in loop:
                loop["owed"] = 0  # the fast loop's minibatches of the current period
            self.monitor.message(refill_line(loop["step"], schedule, self.config.timesteps,
                                             self.config.train_freq, self.config.prepopulate,
                                             self.config.save_replay))
        self.monitor.message(resumed_line(self.resume.path, loop["step"]))
        return loop

    def close(self):
        self.monitor.close(finished=self.checkpoints.finished,
                           best=self.best.best if self.best else None)
        if self.evaluator:
            self.evaluator.close()


def games_at_once(config):
    """How many games the fast loop plays at once: one per replay shard."""
    if config.backend == "ray":
        return config.num_samplers * config.envs_per_sampler
    return config.workers


def build_backend(config):
    """The fast loop's experience source for --backend (ray is imported only when chosen)."""
    if config.backend == "ray":
        from fast_dqn.loops.ray_backend import RayBackend
        return RayBackend(ray_settings(config), *ray_sampler_builders(config))
    return build_local_backend(config)


def restore_fast_loop(config, parts, backend, resume):
    """Put a fast-loop checkpoint back into its parts and games (not the backend); None: fresh run.

    Returns the FastLoopState to continue from.
    """
    from fast_dqn.loops.fast_loop import budget_end
    from fast_dqn.loops.fast_loop_state import FastLoopState, HeldTransitions, cut_to_budget
    total = budget_end(config.timesteps, backend.round_size)
    loop = parts.restore(lambda loop: cut_to_budget(
        loop, total, config.train_freq, evaluates=bool(config.evaluate)))
    if not loop:
        return None
    with unfit_state_refused(resume), unfit_games_refused(resume):
        state = FastLoopState.from_state_dict(loop, parts.settings, parts.monitor.message)
        continued = parts.own.load_state_dict(parts.state, state.step)
    if not continued:
        state.held.flush(parts.replay)
        parts.replay.cut_episodes()
        state.held = HeldTransitions()
        parts.monitor.message(games_restart_line(games_at_once(config), config.backend,
                                                 config.env_backend))
    return state


def train_fast(config, backend_factory=build_backend, resume=None, stop=None):
    """Train with the fast loop: assemble the run, restore it, and run the loop.

    Args:
        config: the run's FastConfig, validated and resolved here as the command line's is.
        backend_factory: backend_factory(config) -> the experience backend.
        resume: the Checkpoint to continue from, or None.
        stop: a function of no arguments; true asks the run to stop.

    Returns:
        The agent step reached, over all samplers.
    """
    from fast_dqn.agent.train_calls import TrainCalls
    from fast_dqn.loops.background_trainer import BackgroundTrainer
    from fast_dqn.loops.fast_loop import FastLoop

    config = resolve(config)
    start_backend(config)
    backend = backend_factory(config)
    space = backend.observation_space
    try:
        parts = RunParts(config, space.shape, space.dtype, backend.num_actions,
                         backend.num_shards, "target", resume, stop, FAST_RUN,
                         own=SamplerGamesPart(backend))
    except BaseException:
        backend.close()
        raise
    learner, replay, monitor = parts.learner, parts.replay, parts.monitor
    trainer = None
    try:
        state = restore_fast_loop(config, parts, backend, resume)
        backend.start(parts.rng, log=monitor.message)
        if config.sampler_groups == 2:
            monitor.message(groups_line(config.workers))
        if config.concurrent:
            calls = TrainCalls(learner, replay, config.batch_size,
                               on_device=config.replay_device == "device")
            monitor.message(replay_line(replay, config.updates_per_call, config.replay_device))
            trainer = BackgroundTrainer(calls.train, calls.draw,
                                        on_loss=lambda result: monitor.record_train(*result),
                                        # Nothing to gather ahead where only indices travel.
                                        prefetch=config.prefetch and calls.mirror is None,
                                        per_call=config.updates_per_call)
        return FastLoop(parts.settings, backend, learner, replay, trainer, monitor,
                        parts.evaluator, parts.checkpoints).run(state)
    finally:
        if trainer is not None:
            trainer.close()
        parts.close()
        backend.close()


def train_nature(config, resume=None, stop=None):
    """Train with the Nature loop: assemble the run, restore it, and run the loop.

    Args:
        config: the run's Config, validated and resolved here as the command line's is.
        resume: the Checkpoint to continue from, or None.
        stop: a function of no arguments; true asks the run to stop.

    Returns:
        The agent step reached: config.timesteps, or fewer after a stop.
    """
    from fast_dqn.loops.nature_loop import run_nature_loop

    config = resolve(config)
    start_backend(config)
    env = make_env(env_settings(config), seed=config.seed, training=True)
    try:
        shape = env.observation_space.shape
        game = NatureGamePart(env)
        parts = RunParts(config, shape, env.observation_space.dtype, env.action_space.n, 1,
                         "main", resume, stop, own=game)
    except BaseException:
        env.close()
        raise
    try:
        loop = parts.restore()
        if loop:
            with unfit_state_refused(resume), unfit_games_refused(resume):
                game.load_state_dict(parts.state)
        return run_nature_loop(parts.settings, game.env, parts.learner, parts.replay,
                               parts.monitor, parts.rng, parts.evaluator, parts.checkpoints,
                               loop)
    finally:
        parts.close()
        game.env.close()
