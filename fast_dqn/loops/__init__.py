"""How training is scheduled: the Nature loop, the fast loop with its background trainer,
the fast loop's experience backends (local threads, Ray) and evaluation. Built on envs/ and
agent/; the parts arrive built (fast_dqn.run builds them)."""
