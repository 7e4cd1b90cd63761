"""The console's sentences about a run's start and resume (fast_dqn.run.logs.console_lines):
a refill, games that start again, where replay is."""

from helpers import TINY_CARTPOLE

from fast_dqn.run.settings.hyperparameters import Config, FastConfig

SMALL = TINY_CARTPOLE


def test_the_resume_lines_say_what_happens_to_the_run():
    from fast_dqn.loops.minibatch_schedule import MinibatchSchedule
    from fast_dqn.run.logs.console_lines import games_restart_line, refill_line
    from fast_dqn.run.settings.validation import resolve
    from fast_dqn.run.training import games_at_once
    config = resolve(Config(**dict(SMALL, timesteps=2_000, prepopulate=500)))
    settings = config.timesteps, config.train_freq, config.prepopulate

    def restart_line(config):
        return games_restart_line(games_at_once(config), config.backend, config.env_backend)

    trained = MinibatchSchedule(500, 4)
    trained.refill(1_000, 500, owed=30)
    assert refill_line(1_000, trained, *settings) == (
        "replay was not saved in the checkpoint (--save-replay saves it): the next 500 steps "
        "refill it, and training resumes at step 1,500; the 155 minibatches missed meanwhile "
        "are made up afterwards, one with each due, the rest at the run's last step, so the "
        "run trains as many as an unbroken one; each stop without replay costs this again: "
        "--save-replay on this resume keeps replay in the checkpoints from now on")
    # 30 owed and 125 due in the refill: one with each due after step 5,500 of a longer run.
    longer = resolve(Config(**dict(SMALL, timesteps=4_000, prepopulate=500)))
    assert "made up afterwards, one with each due, by about step 2,120, so the run" in \
        refill_line(1_000, trained, longer.timesteps, 4, 500)
    assert refill_line(1_000, trained, *settings, save_replay=True).endswith(
        "so the run trains as many as an unbroken one")
    late = MinibatchSchedule(500, 4)
    late.refill(1_800, 500)
    assert refill_line(1_800, late, *settings) == (
        "replay was not saved in the checkpoint (--save-replay saves it): the steps left to "
        "the run's last, 2,000, only refill it, and the 50 minibatches due meanwhile are all "
        "trained after that step; each stop without replay costs this again: --save-replay "
        "on this resume keeps replay in the checkpoints from now on")
    # Stopped in the warm-up: a number is never compared with itself, and a refill that
    # ends before the planned start moves nothing.
    for stopped_at, refill in [(0, 500), (100, 300)]:
        warm = MinibatchSchedule(500, 4)
        warm.refill(stopped_at, refill)
        assert refill_line(stopped_at, warm, *settings, save_replay=True) == (
            "replay was not saved in the checkpoint (--save-replay saves it): the run was "
            "still in its warm-up; 500 steps refill replay before it ends, so training starts "
            "at step 500 as planned")
    early = MinibatchSchedule(500, 4)
    early.refill(200, 500)
    assert (
        "the run was still in its warm-up; 500 steps refill replay, so training starts at "
        "step 700, not 500") in refill_line(200, early, *settings)
    fast = dict(SMALL, timesteps=2_000, workers=4)
    assert restart_line(resolve(FastConfig(**fast, env_backend="python"))) == (
        "the 4 games in progress start again from their beginning (the checkpoint was "
        "written with another --env-backend); only their unfinished parts are lost, as no "
        "game is logged before it ends")
    assert "(--env-backend vector cannot save a game in progress; runs started with " \
        "--env-backend python keep them)" in \
        restart_line(FastConfig(**fast, env_backend="vector"))
    assert restart_line(FastConfig(**fast, backend="ray", num_samplers=3,
                                   envs_per_sampler=5)).startswith(
        "the 15 games in progress start again from their beginning (Ray's samplers")
