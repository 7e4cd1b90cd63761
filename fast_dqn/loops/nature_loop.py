"""The Nature DQN training loop (Mnih et al. 2015): act, store, and every 4 steps train.

Single-threaded: acting, replay writes and training strictly alternate, so every step boundary
is a consistent point for a checkpoint.
"""

from fast_dqn.agent.policy import select_action
from fast_dqn.loops.evaluation import EvaluationInterrupted
from fast_dqn.loops.minibatch_schedule import MinibatchSchedule


def run_nature_loop(settings, env, learner, replay, monitor, rng, evaluator=None,
                    checkpoints=None, resume=None):
    """Train up to settings.timesteps agent steps (settings: a LoopSettings); returns the step
    reached.

    evaluator(step): an Evaluator, or None when evaluation is off. checkpoints: a
    Checkpointer, or None. resume: the loop state of a checkpoint to continue from.
    It returns early, after a checkpoint, when checkpoints.stop_requested() turns true.
    """
    num_actions = env.action_space.n
    if resume:
        step, obs, eval_pending = resume["step"], resume["obs"], resume["eval_pending"]
        schedule = MinibatchSchedule.from_loop_state(resume, settings.train_freq, monitor.message)
        # Checkpoints from before 2026-11-23 did not record it: a step on the evaluation
        # interval was evaluated there.
        every = settings.eval_freq
        last_eval = resume.get("last_eval", step if every and step % every == 0 else None)
    else:
        step, eval_pending, last_eval = 0, False, None
        schedule = MinibatchSchedule(settings.prepopulate, settings.train_freq,
                                     warn=monitor.message)
        obs, _ = env.reset()
    if evaluator and step >= settings.timesteps and last_eval != step:
        eval_pending = True  # resumed with a budget cut to this very step: its last evaluation
    if step >= settings.timesteps:
        # Resumed at its last step: minibatches still deferred are trained here, or, with a
        # replay that was not saved, reported as not trained (no step is left to refill it).
        for _ in range(schedule.take(step, step, final=True, replay_ready=replay.can_sample)):
            monitor.record_train(*learner.train(*replay.sample(settings.batch_size)))

    def loop_state():
        return {"step": step, "obs": obs, "eval_pending": eval_pending, "last_eval": last_eval,
                "schedule": schedule.state_dict()}

    while True:
        if eval_pending:
            try:
                evaluator(step)
                eval_pending, last_eval = False, step
            except EvaluationInterrupted:
                pass  # the stop below saves it as still pending
            except Exception:
                # The evaluator rolled itself back, so the state is consistent: save it.
                if checkpoints:
                    checkpoints.save(step, loop_state())
                raise
        if checkpoints:
            stop = checkpoints.stop_requested()
            if stop or checkpoints.due(step) or step == settings.timesteps:
                checkpoints.save(step, loop_state(), final=step == settings.timesteps)
            if stop:
                return step
        if step >= settings.timesteps:
            return step
        # Warm-up acts uniformly (epsilon 1); the logs show the epsilon really acted with.
        eps = float(settings.epsilon(step))
        action = select_action(obs, eps, learner.q_values, num_actions, rng)
        next_obs, reward, terminated, truncated, info = env.step(action)
        replay.add(obs[-1], action, reward, terminated, terminated or truncated)
        obs = next_obs
        step += 1
        if terminated or truncated:
            if info["game_over"]:
                monitor.record_game(step, info["game_length"], info["game_return"], eps)
            obs, _ = env.reset()

        for _ in range(schedule.take(step - 1, step, final=step == settings.timesteps,
                                     replay_ready=replay.can_sample)):
            monitor.record_train(*learner.train(*replay.sample(settings.batch_size)))
        if step % settings.target_update_freq == 0:
            learner.update_target()
        if evaluator and settings.evaluation_due(step):
            eval_pending = True
        monitor.tick(step, eps)
