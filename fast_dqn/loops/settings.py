"""What the loops are given of a run: the Nature schedule in agent steps, and the Ray
backend's cluster and actors. fast_dqn.run.components builds both from the run's Config; the
loops read nothing else of it."""

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

    def epsilon(self, steps):
        """Epsilon at agent step(s) `steps`: 1 during warm-up, then the exploration schedule."""
        return np.where(np.asarray(steps) < self.prepopulate, 1.0, self.exploration(steps))

    def evaluation_due(self, step):
        return bool(self.eval_freq) and (step % self.eval_freq == 0 or step == self.timesteps)


@dataclass(frozen=True)
class RaySettings:
    address: str | None     # a cluster to join (--ray-address); None starts a private one
    object_store_mb: int    # the private cluster's object store
    num_samplers: int       # sampler actors
    envs_per_sampler: int   # games each actor plays
    rollout_steps: int      # agent steps of each game per request
    requests_in_flight: int  # requests each actor has queued
    seed: int               # the run's --seed, from which every actor's games are seeded
