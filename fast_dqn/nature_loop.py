"""The Nature DQN training loop (Mnih et al. 2015): act, store, and every 4 steps train.

Single-threaded: acting, replay writes and training strictly alternate.
"""

from fast_dqn.evaluation import evaluate
from fast_dqn.policy import select_action
from fast_dqn.schedules import LinearSchedule


def run_nature_loop(config, env, eval_env, learner, replay, monitor, rng, eval_rng):
    """Train for config.timesteps agent steps. All components are built by the caller."""
    epsilon = LinearSchedule(config.eps_start, config.eps_end, config.eps_decay_steps)
    num_actions = env.action_space.n
    obs, _ = env.reset()
    for step in range(config.timesteps):
        # Warm-up acts uniformly (epsilon 1); the logs show the epsilon really acted with.
        eps = 1.0 if step < config.prepopulate else epsilon(step)
        action = select_action(obs, eps, learner.q_values, num_actions, rng)
        next_obs, reward, terminated, truncated, info = env.step(action)
        replay.add(obs[-1], action, reward, terminated, terminated or truncated)
        obs = next_obs
        if terminated or truncated:
            if info["game_over"]:
                monitor.record_game(step + 1, info["game_length"], info["game_return"], eps)
            obs, _ = env.reset()

        done_steps = step + 1
        if done_steps > config.prepopulate and done_steps % config.train_freq == 0:
            loss, _ = learner.train(*replay.sample(config.batch_size))
            monitor.record_train(loss)
        if done_steps % config.target_update_freq == 0:
            learner.update_target()
        if config.evaluate and (done_steps % config.evaluate == 0
                                or done_steps == config.timesteps):
            returns = evaluate(eval_env, learner.q_values, config.eval_episodes,
                               config.eval_epsilon, eval_rng)
            monitor.record_eval(done_steps, returns)
        monitor.tick(done_steps, eps)
