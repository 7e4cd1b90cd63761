"""A run from its Config: its parts assembled (built by fast_dqn.run.components), restored from a
checkpoint, and either loop run with them."""

import contextlib
import dataclasses
import json

from fast_dqn.agent.backend_setup import configure_backend, device_line
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
from fast_dqn.run.logs.monitor import Monitor
from fast_dqn.run.logs.progress import RunProgress, make_console
from fast_dqn.run.logs.tensorboard_log import TensorBoardLog
from fast_dqn.run.resume import plan_given_on_resume
from fast_dqn.run.settings.hyperparameters import RESUME_OVERRIDES, learning_settings
from fast_dqn.run.settings.validation import has_type, resolve
from fast_dqn.run.storage.best_weights import BestWeights
from fast_dqn.run.storage.checkpoint import Checkpointer, CheckpointStore
from fast_dqn.run.storage.run_directory import load_run_config, mark_checkpointed
from fast_dqn.state_schema import FAST_RUN, NATURE_RUN, StateMismatch, check_state


def start_backend(config):
    # The networks go where the backend puts them by default: the first GPU, if any.
    print(device_line(*configure_backend(config.seed, config.threads), config.precision,
                      chosen=getattr(config, "precision_chosen", False)), flush=True)


def diverged_checkpoint(path, error):
    """Why a checkpoint holding a NaN or an infinity is refused, and what to do: written by
    a fast-dqn that did not check the weights before saving them (or edited), it holds a
    network that had diverged; played or trained on, it would fail at its first use."""
    return (f"{path} holds a diverged network ({error}): it was saved before fast-dqn "
            "checked the weights, and nothing can go on from it; start a new run, with a "
            "lower --lr (or, for --env, smaller rewards)")


def check_settings(config, recorded, step):
    """config.json against the settings the checkpoint was trained with: a hand edit of one
    that shapes the networks or replay would load it wrongly, or not at all."""
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
    """A setting as config.json writes it, and what it resolved to where that differs (null
    is the optimizer's own default, say)."""
    try:
        saved = load_run_config(config.logdir, "resume").get(name, value)
    except ConfigError:
        saved = value
    if saved == value:
        return json.dumps(value)
    return f"{json.dumps(saved)} (which this run resolves to {json.dumps(value)})"


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
    """The checkpoint's state, checked against `schema` (the loop's). The other loop's state
    means config.json's "loop" was edited, and is named as such, not as a damaged file."""
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
    """Turn a checkpoint state that a component cannot load into one line naming the
    checkpoint and what to do. Around the loading only: a bug elsewhere keeps its traceback.
    A ConfigError already says more (settings edited in config.json) and passes through."""
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
    """Turn a saved game that does not fit this run's env into one line: the wrapper stack
    follows settings that check_settings compares, so only an edit gets here."""
    try:
        yield
    except EnvStateMismatch as error:
        raise ConfigError("resume", f"the games saved in {checkpoint.path} do not fit this "
                          f"run's env ({error}); was config.json edited? put back the values "
                          "the run started with")


class NatureGame:
    """The Nature loop's own part of a checkpoint: its one game, mid-episode."""

    def __init__(self, env):
        self.env = env

    def state_dict(self):
        return {"env": env_state(self.env)}

    def check(self, state):
        check_env_state(self.env, state["env"])

    def load(self, state):
        # The env is rebuilt around the saved game: later checkpoints save the new one.
        self.env = load_env_state(self.env, state["env"])


class FastLoopSamplers:
    """The fast loop's own part of a checkpoint: its samplers' games and held transitions."""

    def __init__(self, backend):
        self.backend = backend

    def state_dict(self):
        return {"samplers": self.backend.state_dict()}

    def check(self, state):
        check_fast_loop_parts(state, self.backend)


class NothingOwn:
    """A loop with no part of its own to save (tests of the shared parts)."""

    def state_dict(self):
        return {}

    def check(self, state):
        pass


class RunParts:
    """What both loops share: learner, replay, monitor, evaluator, RNGs and checkpoints.

    `collect` gathers their state for a checkpoint; `restore` puts a checkpoint back, and
    returns the loop's own state. The loop's own part (NatureGame or FastLoopSamplers) is
    saved and checked with the rest; the train_* functions load it from `state`.
    """

    def __init__(self, config, observation_shape, frame_dtype, num_actions, num_shards,
                 acts_with, resume=None, stop=None, schema=NATURE_RUN, own=None):
        """acts_with: "main" or "target", the network the loop acts and evaluates with;
        schema: what the loop's checkpoints hold (fast_dqn.state_schema); own: the loop's
        own part, whose check(state) raises, changing nothing, where it could not be
        loaded."""
        self.config = config
        self.settings = loop_settings(config)
        # What a checkpoint must match to be loaded into this run at all.
        self.identity = {"game": config.game, "env": config.env, "num_actions": int(num_actions),
                         "observation_shape": tuple(observation_shape)}
        self.learner = build_learner(config, observation_shape, num_actions)
        self.replay = build_replay(config, observation_shape[1:], num_shards, frame_dtype)
        self.rng = rng_for(config.seed, ACTION_RNG_STREAM)
        self.resume = resume
        # Checked whole before any part reads it: the monitor rewrites logs from it.
        with unfit_state_refused(resume):
            self.state = load_run_state(resume, schema) if resume else None
            for part in ("loop", "monitor") if resume else ():
                if self.state[part]["step"] != resume.step:
                    raise StateMismatch(f"/{part}/step is {self.state[part]['step']:,}, but "
                                        f"the checkpoint is of step {resume.step:,}")
        # Checked before the monitor trims the logs back to the checkpoint's positions.
        if resume and self.state["identity"] != self.identity:
            raise ConfigError("resume", f"{resume.path} was trained on "
                              f"{_described(self.state['identity'])}, but config.json now "
                              f"describes {_described(self.identity)}; it does not belong to "
                              "this run: put back the game or env, and the settings, the run "
                              "started with")
        self.progress = RunProgress(config.timesteps, config.train_freq, config.prepopulate,
                                    config.evaluate, config.eval_episodes)
        self.own = own or NothingOwn()
        if resume:
            with unfit_state_refused(resume), unfit_games_refused(resume):
                check_settings(config, self.state["settings"], resume.step)
                self._load_before_files()
            # Accepted: a run made before first-checkpoint.txt gets it now (its first file
            # change, as the monitor's below).
            mark_checkpointed(config.logdir, resume.step)
        step = self.state["loop"]["step"] if resume else 0
        console = make_console(config.timesteps, initial=step)
        # The state's values were checked above: the monitor's errors are its own.
        self.monitor = self._monitor(config, console, step)
        self.evaluator = self.best = None
        if config.evaluate:
            learner = self.learner
            q_values, weights = {"main": (learner.q_values, learner.main_weights),
                                 "target": (learner.target_q_values, learner.target_weights)
                                 }[acts_with]
            self.best = BestWeights(config.logdir, weights, self.monitor.message)
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

    def _monitor(self, config, console, step):
        saved = self.state["monitor"] if self.resume else None
        return Monitor(config.logdir, config.timesteps, console=console,
                       scalars=TensorBoardLog(config.logdir,
                                              resume=saved["tensorboard"] if saved else None,
                                              resumed_at=step),
                       resume=saved,
                       replay_fill=lambda: len(self.replay) / self.replay.capacity,
                       progress=self.progress)

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
        """Load the checkpoint into the parts; returns the loop state, or None. adapt(loop):
        the loop's own changes to its state (a smaller budget), made before a refill defers
        what the state owes."""
        if not self.resume:
            return None
        with unfit_state_refused(self.resume):
            return self._restore(adapt)

    def _load_before_files(self):
        """What of the checkpoint can still fail to fit, loaded or checked before the monitor
        cuts the logs back to it: a refused resume leaves every file as it was."""
        state = self.state
        loop, replay = state["loop"], state["replay"]
        self.own.check(state)
        if "obs" in loop and loop["obs"].shape != self.identity["observation_shape"]:
            raise StateMismatch(f"/loop/obs has shape {loop['obs'].shape}, not the "
                                f"observations' {self.identity['observation_shape']}")
        for name in ("pointers", "sizes"):
            values, shard = replay[name], self.replay.shard_capacity
            if values.shape != self.replay.pointers.shape or values.dtype.kind not in "iu" \
                    or values.min() < 0 or values.max() > shard:
                raise StateMismatch(f"/replay/{name} is not an array of shape "
                                    f"{self.replay.pointers.shape} of whole numbers from 0 to "
                                    f"{shard:,} (one per replay shard)")
        best, network = state["best"], self.learner.main_weights()
        if best is not None and (best["step"] > self.resume.step or [
                w.shape for w in best["weights"]] != [w.shape for w in network]):
            raise StateMismatch(f"/best is of step {best['step']:,} or of another network's "
                                f"weights, not of this run up to step {self.resume.step:,}")
        try:
            self.learner.load_state_dict(state["learner"])
            self.progress.minibatches_done = self.learner.minibatches_trained()
        except ValueError as error:  # settings that check_settings does not know of
            raise ConfigError("resume", f"the networks of {self.resume.path} do not fit this "
                              f"run's settings ({str(error).splitlines()[0][:160]}); was "
                              "config.json edited? put back the values the run started with")
        except FloatingPointError as error:  # the learner's TrainingDiverged: see below
            raise ConfigError("resume", diverged_checkpoint(self.resume.path, error)) from None

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
            self.monitor.message(refill_line(loop["step"], schedule, self.config))
        self.monitor.message(f"resumed from {self.resume.path} at step {loop['step']:,}")
        return loop

    def close(self):
        self.monitor.close(finished=self.checkpoints.finished,
                           best=self.best.best if self.best else None)
        if self.evaluator:
            self.evaluator.close()


def refill_line(step, schedule, config):
    """What a resume without replay does to the run, in the user's words: replay refills
    before training goes on, and the minibatches missed meanwhile are made up later."""
    from fast_dqn.loops.minibatch_schedule import minibatches_due
    total, start = config.timesteps, schedule.train_start
    resumes = min(schedule.refill_until, total)
    missed = schedule.deferred + minibatches_due(step, resumes, start, config.train_freq)
    line = "replay was not saved in the checkpoint (--save-replay saves it): "
    if resumes >= total:
        return line + (f"the steps left to the run's last, {total:,}, only refill it, and the "
                       f"{missed:,} minibatches due meanwhile are all trained after that step")
    if step < start and resumes <= start:
        # The refill ends within the warm-up it interrupted: nothing moves.
        line += (f"the run was still in its warm-up; {config.prepopulate:,} steps refill "
                 f"replay before it ends, so training starts at step {start:,} as planned")
    elif step < start:
        line += (f"the run was still in its warm-up; {config.prepopulate:,} steps refill "
                 f"replay, so training starts at step {resumes:,}, not {start:,}")
    else:
        line += (f"the next {config.prepopulate:,} steps refill it, and training resumes at "
                 f"step {resumes:,}")
    if missed:
        line += (f"; the {missed:,} minibatches missed meanwhile are made up afterwards, at "
                 "up to twice the usual rate, so the run trains as many as an unbroken one")
    return line


def games_restart_line(config):
    """What happens to the games in progress when the checkpoint cannot continue them."""
    games = config.workers
    if config.backend == "ray":
        games = config.num_samplers * config.envs_per_sampler
        why = "Ray's samplers cannot save a game in progress"
    elif config.env_backend == "vector":
        why = ("--env-backend vector cannot save a game in progress; runs started with "
               "--env-backend python keep them")
    else:
        why = "the checkpoint was written with another --env-backend"
    return (f"the {games} games in progress start again from their beginning ({why}); "
            "only their unfinished parts are lost, as no game is logged before it ends")


def build_backend(config):
    """The fast loop's experience source for --backend (ray is imported only when chosen)."""
    if config.backend == "ray":
        from fast_dqn.loops.ray_backend import RayBackend
        return RayBackend(ray_settings(config), *ray_sampler_builders(config))
    return build_local_backend(config)


def replay_line(config, replay, on_cpu=None):
    """The start-up line that says where replay is and how the trainer draws from it.
    on_cpu: the networks train on the CPU (asked of the backend when None)."""
    from fast_dqn.agent.replay_memory import estimate_bytes
    size = estimate_bytes(replay.capacity, replay.frames.shape[2:], replay.frames.dtype)
    k = config.updates_per_call
    calls = f"the trainer trains {k} minibatch{'es' if k > 1 else ''} per compiled call " \
        "(--updates-per-call)"
    if config.replay_device == "device":
        if on_cpu is None:
            from fast_dqn.agent.backend_setup import accelerator_memory
            on_cpu = accelerator_memory() is None
        if on_cpu:  # --replay-device device where the device is the CPU (the line above)
            return (f"replay: {size / 2**30:.2f} GiB in RAM, and a second copy in RAM the "
                    f"trainer gathers its minibatches from; {calls}")
        return (f"replay: {size / 2**30:.2f} GiB in RAM, mirrored in GPU memory, where "
                f"minibatches are drawn; {calls}")
    return f"replay: {size / 2**30:.2f} GiB in RAM; {calls}"


def check_fast_loop_parts(state, backend):
    """The fast loop's own parts of a checkpoint, checked before any is loaded."""
    from fast_dqn.loops.fast_loop_state import HeldTransitions
    backend.check_state_dict(state["samplers"])
    space = backend.observation_space
    HeldTransitions.check_saved(state["loop"]["held"], backend.num_shards, space.shape[1:],
                                space.dtype)


def train_fast(config, backend_factory=build_backend, resume=None, stop=None):
    """The fast loop. resume: a Checkpoint to continue from; stop(): true asks it to stop.
    The config is validated and resolved as the command line's is
    (fast_dqn.run.settings.validation)."""
    from fast_dqn.agent.train_calls import TrainCalls
    from fast_dqn.loops.background_trainer import BackgroundTrainer
    from fast_dqn.loops.fast_loop import FastLoop, budget_end
    from fast_dqn.loops.fast_loop_state import FastLoopState, HeldTransitions
    from fast_dqn.loops.fast_loop_stops import cut_to_budget

    config = resolve(config)
    start_backend(config)
    backend = backend_factory(config)
    space = backend.observation_space
    try:
        parts = RunParts(config, space.shape, space.dtype, backend.num_actions,
                         backend.num_shards, "target", resume, stop, FAST_RUN,
                         own=FastLoopSamplers(backend))
    except BaseException:
        backend.close()
        raise
    learner, replay, monitor = parts.learner, parts.replay, parts.monitor
    trainer = None
    try:
        total = budget_end(config.timesteps, backend.round_size)
        loop, state = parts.restore(lambda loop: cut_to_budget(
            loop, total, config.train_freq, evaluates=bool(config.evaluate))), None
        if loop:
            with unfit_state_refused(resume), unfit_games_refused(resume):
                state = FastLoopState.from_state_dict(loop, parts.settings, monitor.message)
                continued = backend.load_state_dict(parts.state["samplers"], state.step)
            if not continued:
                state.held.flush(replay)
                replay.cut_episodes()
                state.held = HeldTransitions()
                monitor.message(games_restart_line(config))
        backend.start(parts.rng, log=monitor.message)
        if config.concurrent:
            calls = TrainCalls(learner, replay, config.batch_size,
                               on_device=config.replay_device == "device")
            monitor.message(replay_line(config, replay))
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
    """The Nature loop. resume: a Checkpoint to continue from; stop(): true asks it to stop.
    The config is validated and resolved as the command line's is
    (fast_dqn.run.settings.validation)."""
    from fast_dqn.loops.nature_loop import run_nature_loop

    config = resolve(config)
    start_backend(config)
    env = make_env(env_settings(config), seed=config.seed, training=True)
    try:
        shape = env.observation_space.shape
        game = NatureGame(env)
        parts = RunParts(config, shape, env.observation_space.dtype, env.action_space.n, 1,
                         "main", resume, stop, own=game)
    except BaseException:
        env.close()
        raise
    try:
        loop = parts.restore()
        if loop:
            with unfit_state_refused(resume), unfit_games_refused(resume):
                game.load(parts.state)
        return run_nature_loop(parts.settings, game.env, parts.learner, parts.replay,
                               parts.monitor, parts.rng, parts.evaluator, parts.checkpoints,
                               loop)
    finally:
        parts.close()
        game.env.close()
