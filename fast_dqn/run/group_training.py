"""A run group from its runs' Configs: each run assembled as train_fast assembles it, then all
trained by one GroupFastLoop (fast_dqn.loops.fast_loop_group) in one process.

Each run stays an ordinary run directory: its config.json, logs, checkpoints and best/ are
written by its own RunParts, so `evaluate`, `plot` and a resume of that run alone work as
for any run.
"""

import dataclasses

from fast_dqn.agent.backend_setup import configure_backend
from fast_dqn.errors import ConfigError
from fast_dqn.run.components import build_learner, build_local_backend
from fast_dqn.run.logs.console_lines import replay_line
from fast_dqn.run.settings.validation import resolve
from fast_dqn.run.training import (
    RunParts,
    SamplerGamesPart,
    restore_fast_loop,
    start_backend,
)
from fast_dqn.state_schema import FAST_RUN

# What may differ between the runs of a group: everything else is its one protocol.
PER_RUN = ("game", "env", "seed", "logdir")


def check_group(configs):
    """Refuse runs that cannot train as one group, in one line naming the setting.

    A setting may not differ between runs, nor be a mode a group does not train in.
    """
    first = configs[0]
    for config in configs[1:]:
        for field in dataclasses.fields(first.as_config()):
            name = field.name
            if name not in PER_RUN and name != "resume" and \
                    getattr(config, name) != getattr(first, name):
                raise ConfigError(name, f"a group's runs share one protocol, but ${{{name}}} is "
                                  f"{getattr(first, name)!r} in {first.logdir} and "
                                  f"{getattr(config, name)!r} in {config.logdir}; give them "
                                  "one value, or train them in separate groups")
    check_group_mode(first)


def check_group_fits(configs, frame_shape=(84, 84), dtype="uint8"):
    """Refuse a group whose replays, mirrored on the accelerator, would not fit its memory.

    Each run's own check saw its replay alone; the group stacks G of them there. The
    ConfigError ("replay_device") names the largest group that fits, and the fix.
    """
    from fast_dqn.agent.backend_setup import accelerator_memory
    from fast_dqn.agent.replay_memory import estimate_bytes
    accelerator = accelerator_memory()
    if configs[0].replay_device != "device" or accelerator is None or accelerator[1] is None:
        return
    name, free = accelerator
    one = estimate_bytes(configs[0].replay_capacity, frame_shape, dtype)
    if len(configs) * one > 0.8 * free:
        fits = int(0.8 * free // max(one, 1))
        raise ConfigError("replay_device", f"a group of {len(configs)} runs needs "
                          f"{len(configs) * one / 2**30:.1f} GiB of replay on {name}, which has "
                          f"{free / 2**30:.1f} GiB free; group {fits} runs or fewer "
                          "(--runs-per-process), or give ${replay_device} host")


def check_group_mode(config):
    """Refuse a run of a mode a group does not train in, in one line naming the flag.

    Args:
        config: a run's resolved config, one of a group's.

    Raises:
        ConfigError: lockstep, Ray, two sampler groups, unsynchronized acting or acting on the CPU.
    """
    modes = {"concurrent": (True, "lockstep (--no-concurrent)"),
             "backend": ("threads", "--backend ray"),
             "sampler_groups": (1, "--sampler-groups 2"),
             "synchronize": (True, "--no-synchronize"),
             # A group acts through its stacked target networks on the device.
             "act_on_cpu": (False, "--act-on-cpu")}
    for name, (wanted, typed) in modes.items():
        if getattr(config, name) != wanted:
            raise ConfigError(name, f"a run group trains only in the default mode, not with "
                              f"{typed}; drop it, or train one run per process")


def train_fast_group(configs, resumes=None, stop=None, on_failed=None, consoles=None,
                     on_refused=None):
    """Train G fast-loop runs as one run group: assemble each, restore it, run them as one.

    Args:
        configs: the runs' FastConfigs, one protocol (check_group), any games and seeds.
        resumes: a Checkpoint (or None) per run, all of one agent step; None: none resume.
        stop: a function of no arguments; true asks every run to stop.
        on_failed: on_failed(run, error): run `run` left the group (training diverged);
            None: only its console says so.
        consoles: each run's console stream; None: all on standard output.
        on_refused: on_refused(run, error): run `run`'s checkpoint does not fit it (a
            ConfigError naming it); the others go on without it. None: the error is raised.

    Returns:
        The agent step reached by the runs still in the group (None where none was left).
    """
    from fast_dqn.agent.run_group import GroupMismatch, RunGroup
    from fast_dqn.loops.background_trainer import BackgroundTrainer
    from fast_dqn.loops.fast_loop import FastLoop
    from fast_dqn.loops.fast_loop_group import GroupFastLoop, GroupTrainCalls

    configs = [resolve(c) for c in configs]
    check_group(configs)
    resumes = resumes or [None] * len(configs)
    consoles = consoles or [None] * len(configs)
    start_backend(configs[0])
    built, states, runs = [], [], []
    try:
        for run, (config, resume, console) in enumerate(zip(configs, resumes, consoles)):
            try:
                parts, backend, state = _assemble(config, resume, stop, console)
            except ConfigError as error:
                if on_refused is None:
                    raise
                on_refused(run, error)
                continue
            built.append((parts, backend))
            states.append(state)
            runs.append(run)
        if not built:
            return None
        configs = [configs[run] for run in runs]
        widest = max(range(len(built)), key=lambda r: built[r][1].num_actions)
        space = built[widest][1].observation_space
        padded = build_learner(configs[widest], space.shape, built[widest][1].num_actions)
        try:
            group = RunGroup([parts.learner for parts, _ in built], padded)
        except GroupMismatch as error:
            raise ConfigError("dueling", str(error)) from None
        for (parts, _), config in zip(built, configs):
            parts.monitor.message(replay_line(parts.replay, config.updates_per_call,
                                              config.replay_device))
        lanes = [FastLoop(parts.settings, backend, parts.learner, parts.replay, None,
                          parts.monitor, parts.evaluator, parts.checkpoints)
                 for parts, backend in built]
        first = configs[0]
        calls = GroupTrainCalls(group, lanes, first.batch_size,
                                on_device=first.replay_device == "device")
        trainer = BackgroundTrainer(calls.train, calls.draw, on_loss=calls.record,
                                    # Nothing to gather ahead where only indices travel.
                                    prefetch=first.prefetch and calls.mirrors is None,
                                    per_call=first.updates_per_call)

        def failed(lane, error):
            built[lane][0].monitor.message(f"{configs[lane].logdir}: {error}; it leaves the "
                                           "group, its last good checkpoint kept")
            if on_failed:
                on_failed(runs[lane], error)
        try:
            return GroupFastLoop(lanes, group, calls, trainer, stop or (lambda: False),
                                 failed).run(states)
        finally:
            trainer.close()
    finally:
        for parts, backend in built:
            parts.close()
            backend.close()



def _assemble(config, resume, stop, console):
    """One run's parts, games and loop state, as train_fast builds and restores them.

    Returns:
        (RunParts, its backend, started, the FastLoopState or None).

    Raises:
        ConfigError: its checkpoint does not fit it; nothing of it is left open.
    """
    # Its networks start from its own seed, as its ordinary run's do.
    configure_backend(config.seed, config.threads, config.deterministic,
                      config.matmul_precision)
    backend = build_local_backend(config)
    parts = None
    try:
        space = backend.observation_space
        parts = RunParts(config, space.shape, space.dtype, backend.num_actions,
                         backend.num_shards, "target", resume, stop, FAST_RUN,
                         own=SamplerGamesPart(backend), console_out=console)
        state = restore_fast_loop(config, parts, backend, resume)
        backend.start(parts.rng, log=parts.monitor.message)
    except BaseException:
        if parts is not None:
            parts.close()
        backend.close()
        raise
    return parts, backend, state
