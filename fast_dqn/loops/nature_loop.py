"""The Nature DQN training loop (Mnih et al. 2015): act, store, and every 4 steps train.

Single-threaded: acting, replay writes and training strictly alternate, so every step boundary
is a consistent point for a checkpoint (fast_dqn.loops.evaluate_then_checkpoint).
"""

from fast_dqn.agent.policy import select_action
from fast_dqn.loops.evaluate_then_checkpoint import EvaluateThenCheckpoint
from fast_dqn.loops.minibatch_schedule import MinibatchSchedule


def run_nature_loop(settings, env, learner, replay, monitor, rng, evaluator=None,
                    checkpoints=None, resume=None):
    """Train with the Nature loop up to settings.timesteps agent steps, or until a stop.

    Args:
        settings: the run's LoopSettings (budget, warm-up, periods, all in agent steps).
        env: the training env, one game, of the run's preprocessing.
        learner: the Learner that acts (q_values) and trains on replay's minibatches.
        replay: the replay memory each agent step is stored in.
        monitor: the run's Monitor, told each step, game and minibatch trained.
        rng: the numpy Generator of the agent's epsilon-greedy draws.
        evaluator: an Evaluator called with the agent step; None: evaluation is off.
        checkpoints: a Checkpointer, whose stop ends the run after a checkpoint; or None.
        resume: a checkpoint's loop state (NatureLoop.state_dict), or None for a new run.

    Returns:
        The agent step reached: settings.timesteps, or fewer after a stop.
    """
    loop = NatureLoop(settings, env, learner, replay, monitor, rng, evaluator, checkpoints)
    return loop.run(resume)


class NatureLoop:
    """The loop over built parts (see run_nature_loop); its state is what state_dict saves."""

    def __init__(self, settings, env, learner, replay, monitor, rng, evaluator=None,
                 checkpoints=None):
        self.settings, self.env, self.learner, self.replay = settings, env, learner, replay
        self.monitor, self.rng = monitor, rng
        self.evaluator = evaluator
        self.phases = EvaluateThenCheckpoint(evaluator, checkpoints)
        self.num_actions = env.action_space.n
        self.step, self.obs, self.schedule = 0, None, None
        self.eval_pending, self.last_eval = False, None

    def run(self, resume=None):
        """Train from `resume` (a loop state, or None) and return the agent step reached."""
        self._begin(resume)
        while True:
            if self.eval_pending and self.phases.evaluate(self.step, self.state_dict):
                self.eval_pending, self.last_eval = False, self.step
            stop = self.phases.stop_requested()
            # A run resumed past its budget (only a Python caller can ask that) writes no end.
            self.phases.checkpoint(self.step, self.state_dict,
                                   last=self.step == self.settings.timesteps,
                                   eval_pending=self.eval_pending, stop=stop)
            if stop or self.step >= self.settings.timesteps:
                return self.step
            eps = self._act()
            self._train(self.step - 1, self.step)
            if self.step % self.settings.target_update_freq == 0:
                self.learner.update_target()
            if self.evaluator and self.settings.evaluation_due(self.step):
                self.eval_pending = True
            self.monitor.tick(self.step, eps)

    def state_dict(self):
        """The loop's state, whole at every step boundary, that a checkpoint saves."""
        return {"step": self.step, "obs": self.obs, "eval_pending": self.eval_pending,
                "last_eval": self.last_eval, "schedule": self.schedule.state_dict()}

    def _begin(self, resume):
        settings, warn = self.settings, self.monitor.message
        if resume:
            self.step, self.obs = resume["step"], resume["obs"]
            self.eval_pending = resume["eval_pending"]
            self.schedule = MinibatchSchedule.from_loop_state(resume, settings.train_freq, warn)
            self.last_eval = resume["last_eval"]
        else:
            self.schedule = MinibatchSchedule(settings.prepopulate, settings.train_freq,
                                              warn=warn)
            self.obs, _ = self.env.reset()
        self.monitor.follow(self.schedule)
        if self.step >= settings.timesteps:
            # Resumed at its last step (a budget cut to this very step): its last evaluation
            # is still made, and minibatches still deferred are trained here or, with a
            # replay that was not saved, reported as not trained (no step is left to refill it).
            if self.evaluator and self.last_eval != self.step:
                self.eval_pending = True
            self._train(self.step, self.step)

    def _act(self):
        """One agent step, stored in replay; returns the epsilon it acted with."""
        # Warm-up acts uniformly (epsilon 1); the logs show the epsilon really acted with.
        eps = float(self.settings.epsilon(self.step))
        action = select_action(self.obs, eps, self.learner.q_values, self.num_actions, self.rng)
        next_obs, reward, terminated, truncated, info = self.env.step(action)
        self.replay.add(self.obs[-1], action, reward, terminated, terminated or truncated)
        self.obs = next_obs
        self.step += 1
        if terminated or truncated:
            if info["game_over"]:
                self.monitor.record_game(self.step, info["game_length"], info["game_return"],
                                         eps)
            self.obs, _ = self.env.reset()
        return eps

    def _train(self, start, end):
        """Train the minibatches due for agent steps (start, end]."""
        final = end >= self.settings.timesteps
        for _ in range(self.schedule.take(start, end, final=final,
                                          replay_ready=self.replay.can_sample)):
            self.monitor.record_train(
                *self.learner.train(self.replay.sample(self.settings.batch_size)))
            if final:
                # Every minibatch still deferred trains here, minutes of them after a resume
                # that refilled to the end: the console must keep showing them.
                self.monitor.tick(self.step, float(self.settings.epsilon(self.step)))
