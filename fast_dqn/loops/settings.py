"""What the loops read of a run's Config: the Nature schedule, in agent steps."""

from dataclasses import dataclass

import numpy as np

from fast_dqn.agent.schedules import LinearSchedule


@dataclass(frozen=True)
class LoopSettings:
    timesteps: int           # the budget
    prepopulate: int         # warm-up: uniform actions, no training
    train_freq: int          # one minibatch per this many agent steps after warm-up
    target_update_freq: int  # C: main -> target every C agent steps
    batch_size: int
    eval_freq: int           # evaluate every this many agent steps; 0 never
    exploration: LinearSchedule

    @classmethod
    def from_config(cls, config):
        """From a fast_dqn.run Config (or anything with its field names)."""
        return cls(config.timesteps, config.prepopulate, config.train_freq,
                   config.target_update_freq, config.batch_size, config.evaluate,
                   LinearSchedule(config.eps_start, config.eps_end, config.eps_decay_steps,
                                  config.eps_decay_start))

    def epsilon(self, steps):
        """Epsilon at agent step(s) `steps`: 1 during warm-up, then the exploration schedule."""
        return np.where(np.asarray(steps) < self.prepopulate, 1.0, self.exploration(steps))

    def evaluation_due(self, step):
        return bool(self.eval_freq) and (step % self.eval_freq == 0 or step == self.timesteps)
