"""Exploration schedules, as values a config can describe."""

import numpy as np


class LinearSchedule:
    """Goes linearly from `start` to `end` over `steps` agent steps, then stays at `end`.

    Takes one step or an array of steps (one per sampler of a round).
    """

    def __init__(self, start, end, steps):
        self.start, self.end, self.steps = start, end, steps

    def __call__(self, step):
        fraction = np.clip(np.asarray(step) / self.steps, 0.0, 1.0)
        return self.start + fraction * (self.end - self.start)
