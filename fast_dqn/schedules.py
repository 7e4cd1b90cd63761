"""Exploration schedules, as values a config can describe."""


class LinearSchedule:
    """Goes linearly from `start` to `end` over `steps` agent steps, then stays at `end`."""

    def __init__(self, start, end, steps):
        self.start, self.end, self.steps = start, end, steps

    def __call__(self, step):
        fraction = min(max(step, 0) / self.steps, 1.0)
        return self.start + fraction * (self.end - self.start)
