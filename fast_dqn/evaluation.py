"""Evaluation: play full games with a fixed epsilon and report their unclipped scores."""

from fast_dqn.policy import select_action


def evaluate(env, q_values_fn, num_games, epsilon, rng):
    """Full-game (all lives, unclipped) returns of `num_games` games.

    `env` must be built with training=False and be at a game boundary; this leaves it at one.
    """
    returns = []
    num_actions = env.action_space.n
    obs, _ = env.reset()
    while len(returns) < num_games:
        action = select_action(obs, epsilon, q_values_fn, num_actions, rng)
        obs, _, terminated, truncated, info = env.step(action)
        if terminated or truncated:
            if info["game_over"]:
                returns.append(info["game_return"])
            obs, _ = env.reset()
    return returns
