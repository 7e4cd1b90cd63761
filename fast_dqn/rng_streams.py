"""Every random stream of a run, derived from its one --seed.

Each part that draws at random takes a stream of its own, numbered here, so no two parts
share draws and adding draws to one never moves another's. Changing a number changes every
seeded run's trajectory, so a test pins them. They live at the package's root because loops/
(the Ray actors) and run/ (the run's builders) both draw from them.
"""

import numpy as np

# The ε-greedy actions of the run's own games (the Nature loop, the fast loop's samplers).
ACTION_RNG_STREAM = 0
# The evaluation's key: each evaluation game takes a stream of its own below it
# (fast_dqn.loops.evaluation.game_seeds).
EVAL_RNG_STREAM = 1
# The seed of replay's sampling RNG.
REPLAY_RNG_STREAM = 2
# The actions of a Ray sampler actor's games, one stream per actor's seed.
SAMPLER_RNG_STREAM = 3


def rng_for(seed, stream):
    """A numpy Generator for one stream of a run: the same draws for the same (seed, stream).

    Args:
        seed: the run's --seed (or a Ray actor's own seed).
        stream: one of the *_RNG_STREAM numbers above.

    Returns:
        The np.random.Generator.
    """
    return np.random.default_rng([seed, stream])
