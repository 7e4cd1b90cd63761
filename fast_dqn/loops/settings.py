"""What the loops are given of a run: the Nature schedule in agent steps, and the Ray
backend's cluster and actors. fast_dqn.run.components builds both from the run's Config; the
loops read nothing else of it."""

from dataclasses import dataclass

import numpy as np

from fast_dqn.agent.schedules import LinearSchedule


@dataclass(frozen=True)
class LoopSettings:
    """The Nature schedule of a run, as both loops read it.

    Attributes:
        timesteps: the run's budget, in agent steps.
        prepopulate: the warm-up, in agent steps: uniform actions, no training.
        train_freq: one minibatch per this many agent steps after warm-up.
        target_update_freq: the target network's period C, in agent steps.
        batch_size: the transitions of each minibatch.
        eval_freq: evaluate every this many agent steps; 0 never.
        exploration: the LinearSchedule of epsilon over agent steps, after warm-up.
    """

    timesteps: int
    prepopulate: int
    train_freq: int
    target_update_freq: int
    batch_size: int
    eval_freq: int
    exploration: LinearSchedule

    def epsilon(self, steps):
        """Epsilon at agent step(s) `steps`: 1 during warm-up, then the exploration schedule.

        Args:
            steps: an agent step, or an array of them.

        Returns:
            The epsilon of each, as a numpy array of the shape of `steps`.
        """
        return np.where(np.asarray(steps) < self.prepopulate, 1.0, self.exploration(steps))

    def evaluation_due(self, step):
        """Whether an evaluation is due at agent step `step`: every eval_freq, and at the end.

        Args:
            step: agent steps taken so far, over all samplers.

        Returns:
            True when an evaluation is due; always False when eval_freq is 0.
        """
        return bool(self.eval_freq) and (step % self.eval_freq == 0 or step == self.timesteps)


@dataclass(frozen=True)
class RaySettings:
    """The Ray backend's cluster and sampler actors.

    Attributes:
        address: a cluster to join (--ray-address); None starts a private one.
        object_store_mb: the private cluster's object store, in MiB.
        num_samplers: the sampler actors.
        envs_per_sampler: the games each actor plays at once.
        rollout_steps: the agent steps of each game per request.
        requests_in_flight: the requests each actor has queued.
        seed: the run's --seed, from which every actor's games are seeded.
    """

    address: str | None
    object_store_mb: int
    num_samplers: int
    envs_per_sampler: int
    rollout_steps: int
    requests_in_flight: int
    seed: int
