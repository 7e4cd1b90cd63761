"""Evaluation: play full games with a fixed epsilon and report their unclipped scores."""

from fast_dqn.agent.policy import select_action


class EvaluationInterrupted(Exception):
    """A stop was requested mid-evaluation; the evaluator is back in its state from before."""


def evaluate(env, q_values_fn, num_games, epsilon, rng, should_stop=None, on_game=None):
    """Full-game (all lives, unclipped) returns of `num_games` games.

    `env` must be built with training=False and be at a game boundary; this leaves it at one.
    should_stop() is polled every step; when true, EvaluationInterrupted is raised.
    on_game(k): told as game k (from 1) begins, and k = num_games + 1 once all are played.
    """
    returns = []
    num_actions = env.action_space.n
    obs, _ = env.reset()
    if on_game is not None:
        on_game(1)
    while len(returns) < num_games:
        if should_stop is not None and should_stop():
            raise EvaluationInterrupted
        action = select_action(obs, epsilon, q_values_fn, num_actions, rng)
        obs, _, terminated, truncated, info = env.step(action)
        if terminated or truncated:
            if info["game_over"]:
                returns.append(info["game_return"])
                if on_game is not None:
                    on_game(len(returns) + 1)
            obs, _ = env.reset()
    return returns


class Evaluator:
    """The periodic evaluation of a training run, on its own env and RNG.

    An interrupted or failed evaluation rolls both back, so the checkpoint written next holds
    the state from before it, and a resumed run plays the very same evaluation games.
    """

    def __init__(self, env, q_values_fn, num_games, epsilon, rng, monitor, should_stop=None,
                 on_result=None, on_game=None):
        """on_result(step, returns): told each finished evaluation, after the monitor;
        on_game(k, num_games): told as game k begins (k = num_games + 1: the evaluation is
        over, played or not)."""
        self.on_result, self.on_game = on_result, on_game
        self.env = env
        self.q_values_fn = q_values_fn
        self.num_games = num_games
        self.epsilon = epsilon
        self.rng = rng
        self.monitor = monitor
        self.should_stop = should_stop

    def __call__(self, step):
        """Evaluate and log at `step`. On a stop request or a failure the env and RNG are
        first put back as they were, so the caller may checkpoint and the evaluation rerun."""
        before = self.state_dict()
        on_game = None
        if self.on_game is not None:
            def on_game(game):
                self.on_game(game, self.num_games)
        try:
            returns = evaluate(self.env, self.q_values_fn, self.num_games, self.epsilon,
                               self.rng, self.should_stop, on_game)
        except Exception:
            self.load_state_dict(before)
            raise
        finally:
            if on_game is not None:
                on_game(self.num_games + 1)  # over, whatever happened
        self.monitor.record_eval(step, returns)
        if self.on_result is not None:
            self.on_result(step, returns)

    def state_dict(self):
        from fast_dqn.envs.environment import env_state
        return {"env": env_state(self.env), "rng": self.rng.bit_generator.state}

    def load_state_dict(self, state):
        from fast_dqn.envs.environment import load_env_state
        self.rng.bit_generator.state = state["rng"]
        self.env = load_env_state(self.env, state["env"])

    def close(self):
        self.env.close()
