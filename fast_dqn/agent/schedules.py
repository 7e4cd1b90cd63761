"""Exploration schedules, as values a config can describe."""

import numpy as np


class LinearSchedule:
    """A value that holds at `start`, goes linearly to `end`, then holds there.

    Called with one agent step or an array of them, it returns the value at each, in the same
    shape. Nature decays from step 0 (delay 0); Dopamine from the end of its warm-up.

    Args:
        start: the value until agent step `delay`.
        end: the value from agent step `delay + steps` on.
        steps: how long the linear part lasts, in agent steps.
        delay: the agent step the linear part starts at.
    """

    def __init__(self, start, end, steps, delay=0):
        self.start, self.end, self.steps, self.delay = start, end, steps, delay

    def __call__(self, step):
        fraction = np.clip((np.asarray(step) - self.delay) / self.steps, 0.0, 1.0)
        return self.start + fraction * (self.end - self.start)
