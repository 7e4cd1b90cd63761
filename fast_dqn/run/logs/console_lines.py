"""The console's sentences about a run's start and resume: where replay lives, and what a
resume changes.

A resume changes the run in ways a reader of its logs would not guess (a refill that moves
the start of training, games that start again), so each is said once, in the user's words,
beside the progress line. The sentences are built from plain values the assembly passes in
(fast_dqn.run.training): this module reads no settings of its own. Each returns one line.
"""

from fast_dqn.agent.replay_memory import estimate_bytes
from fast_dqn.loops.minibatch_schedule import minibatches_due


def resumed_line(path, step):
    """The line that names the checkpoint a run goes on from.

    Args:
        path: the checkpoint's folder, as the line shows it.
        step: the checkpoint's step, in agent steps.

    Returns:
        One line.
    """
    return f"resumed from {path} at step {step:,}"


def refill_line(step, schedule, timesteps, train_freq, prepopulate, save_replay=False):
    """What a resume without replay does to the run: replay refills before training goes on.

    The minibatches missed meanwhile are made up later, one with each due: the line says by
    which step, so that the cost of another stop without replay shows before it compounds.

    Args:
        step: the agent step resumed at.
        schedule: the run's MinibatchSchedule, its refill already planned.
        timesteps: the run's budget, in agent steps.
        train_freq: agent steps per minibatch.
        prepopulate: agent steps a refill (and the warm-up) takes.
        save_replay: whether this resume saves replay from now on (--save-replay).

    Returns:
        One line.
    """
    total, start = timesteps, schedule.train_start
    resumes = min(schedule.refill_until, total)
    missed = schedule.deferred + minibatches_due(step, resumes, start, train_freq)
    line = "replay was not saved in the checkpoint (--save-replay saves it): "
    if resumes >= total:
        line += (f"the steps left to the run's last, {total:,}, only refill it, and the "
                 f"{missed:,} minibatches due meanwhile are all trained after that step")
        missed = 0  # said
    elif step < start and resumes <= start:
        # The refill ends within the warm-up it interrupted: nothing moves.
        line += (f"the run was still in its warm-up; {prepopulate:,} steps refill "
                 f"replay before it ends, so training starts at step {start:,} as planned")
    elif step < start:
        line += (f"the run was still in its warm-up; {prepopulate:,} steps refill "
                 f"replay, so training starts at step {resumes:,}, not {start:,}")
    else:
        line += (f"the next {prepopulate:,} steps refill it, and training resumes at "
                 f"step {resumes:,}")
    if missed:
        done = resumes + missed * train_freq  # each minibatch due brings one missed along
        when = f"by about step {done:,}" if done < total else "the rest at the run's last step"
        line += (f"; the {missed:,} minibatches missed meanwhile are made up afterwards, one "
                 f"with each due, {when}, so the run trains as many as an unbroken one")
    if not save_replay:
        line += ("; each stop without replay costs this again: --save-replay on this resume "
                 "keeps replay in the checkpoints from now on")
    return line


def games_restart_line(games, backend, env_backend):
    """What happens to the games in progress when the checkpoint cannot continue them.

    Args:
        games: how many games the run plays at once.
        backend: --backend ("threads" or "ray").
        env_backend: --env-backend ("python" or "vector").

    Returns:
        One line.
    """
    if backend == "ray":
        why = "Ray's samplers cannot save a game in progress"
    elif env_backend == "vector":
        why = ("--env-backend vector cannot save a game in progress; runs started with "
               "--env-backend python keep them")
    else:
        why = "the checkpoint was written with another --env-backend"
    return (f"the {games} games in progress start again from their beginning ({why}); "
            "only their unfinished parts are lost, as no game is logged before it ends")


def groups_line(workers):
    """The start-up line of a run whose games play in two sampler groups.

    Args:
        workers: the run's games, W.

    Returns:
        One line.
    """
    return (f"the {workers} games play in two sampler groups of {workers // 2} that take "
            "turns (--sampler-groups 2; 0, the default, picks two on a GPU, 1 on a CPU)")


def replay_line(replay, updates_per_call, replay_device, on_cpu=None):
    """The start-up line that says where replay is and how the trainer draws from it.

    Args:
        replay: the run's ReplayMemory, whose capacity and frames give the size shown.
        updates_per_call: minibatches the trainer trains per compiled call.
        replay_device: --replay-device as resolved ("device" or "host").
        on_cpu: the networks train on the CPU (asked of the backend when None).

    Returns:
        One line.
    """
    size = estimate_bytes(replay.capacity, replay.frames.shape[2:], replay.frames.dtype)
    k = updates_per_call
    calls = f"the trainer trains {k} minibatch{'es' if k > 1 else ''} per compiled call " \
        "(--updates-per-call)"
    if replay_device == "device":
        if on_cpu is None:
            from fast_dqn.agent.backend_setup import accelerator_memory
            on_cpu = accelerator_memory() is None
        if on_cpu:  # --replay-device device where the device is the CPU (the line above)
            return (f"replay: {size / 2**30:.2f} GiB in RAM, and a second copy in RAM the "
                    f"trainer gathers its minibatches from; {calls}")
        return (f"replay: {size / 2**30:.2f} GiB in RAM, mirrored in GPU memory, where "
                f"minibatches are drawn; {calls}")
    return f"replay: {size / 2**30:.2f} GiB in RAM; {calls}"
