"""Exploration schedules, as values a config can describe."""

import numpy as np


class LinearSchedule:
    """Stays at `start` until agent step `delay`, goes linearly to `end` over the next `steps`
    agent steps, then stays at `end`.

    Nature decays from step 0 (delay 0); Dopamine from the end of its warm-up.
    Takes one step or an array of steps (one per sampler of a round).
    """

    def __init__(self, start, end, steps, delay=0):
        self.start, self.end, self.steps, self.delay = start, end, steps, delay

    def __call__(self, step):
        fraction = np.clip((np.asarray(step) - self.delay) / self.steps, 0.0, 1.0)
        return self.start + fraction * (self.end - self.start)
