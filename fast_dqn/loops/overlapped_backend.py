"""The fast loop's samplers in two groups that take turns: one group's games step in C++
while the main thread acts for the other.

The W games are two fixed groups of W/2, each its own ale-py vector env. While one group's
step runs in its C++ threads, the main thread receives the other's last step and acts for it,
so the network's latency and the emulators' time overlap instead of adding up (with one
group, fast_dqn.loops.experience.LocalBackend, the emulators wait meanwhile). Each group pays
its own call, so this pays only where a call costs less than the emulators' time
(docs/fast-loop.md: the model, the measurements, and why one group stays the default).

The paper's rules hold:
- Every action goes through the target network, in one batched call per group per round.
- Each chunk is one group's step, W/2 agent steps; chunks alternate A, B, A, ..., so the chunk
  at agent step b belongs to group (b / (W/2)) mod 2, and sync points fall on chunk ends.
- A group's next step is sent only when no sync point falls between the loop's step and that
  step's start; otherwise it waits until the loop asks for the next chunk, after the target
  is copied. So nothing is in flight at a sync point, and each period's target acts for
  exactly that period's steps.
- The random draws follow the order of the sends, which depends only on the steps and the
  period: a seeded run repeats itself.

Threads: none is started here. The main thread calls every method; ale-py's C++ threads step
a group between its `send` and its `recv`. A checkpoint keeps no game (the vector env cannot
save one): on resume the games restart.
"""

import numpy as np

from fast_dqn.agent.policy import epsilon_greedy_rows
from fast_dqn.loops.experience import Chunk


class OverlappedBackend:
    """Two groups of equal size (fast_dqn.envs.samplers.VectorSamplers), stepped in turn.

    Args:
        groups: the two VectorSamplers, games 0..W/2-1 and W/2..W-1.
        period: agent steps between target updates (--target-update-freq).
    """

    def __init__(self, groups, period):
        if len(groups) != 2 or groups[0].num_samplers != groups[1].num_samplers:
            raise ValueError("OverlappedBackend takes two groups of the same size")
        self.groups, self.period = groups, period
        self.num_actions = groups[0].num_actions
        self.observation_space = groups[0].observation_space
        self.round_size = half = groups[0].num_samplers  # agent steps per chunk
        self.num_shards = 2 * half
        self.shards = [np.arange(half), np.arange(half, 2 * half)]
        self.obs = [None, None]        # each group's current states
        self.in_flight = [None, None]  # each group's sent step: (base step, frames, actions, eps)
        self.q_values = None           # act_through() sets it

    def start(self, rng, log=None):
        """Begin playing: keep the action RNG, and reset the games.

        Args:
            rng: the numpy Generator that draws the epsilon-greedy actions.
            log: where to report events (the run's console); unused here.
        """
        self.rng = rng
        for g, group in enumerate(self.groups):
            if self.obs[g] is None:
                self.obs[g] = group.reset()

    def act_through(self, q_values, weights):
        """Act from now on through `q_values`, as LocalBackend.act_through.

        Args:
            q_values: the network to act with, called here on a stack of states.
            weights: a weight source for remote copies; unused here, acting is local.
        """
        self.q_values = q_values

    def next_chunk(self, step, epsilon_at):
        """Receive the chunk of steps [step, step + W/2); send the next ones no sync point holds.

        Args:
            step: the loop's agent step, where the chunk begins.
            epsilon_at: the exploration rate at given agent steps, vectorized.

        Returns:
            A Chunk of one row: W/2 agent steps, one per game of the group.
        """
        half = self.round_size
        g = (step // half) % 2
        self._send_due(step, step, epsilon_at)  # a step held back for a sync point
        base, frames, actions, eps = self.in_flight[g]
        if base != step:
            raise RuntimeError(f"group {g} played the chunk at step {base}, asked for {step}")
        result = self.groups[g].recv()
        self.in_flight[g], self.obs[g] = None, result.observations
        self._send_due(step, step + half, epsilon_at)
        return Chunk(frames[None], actions[None], result.rewards[None],
                     result.terminated[None], (result.terminated | result.truncated)[None],
                     result.game_over[None], result.game_returns[None],
                     result.game_lengths[None], eps[None], self.shards[g])

    def _send_due(self, step, next_base, epsilon_at):
        """Send each idle group's next step, earliest first, unless a sync point comes before it."""
        half = self.round_size
        for base in (next_base, next_base + half):
            g = (base // half) % 2
            if self.in_flight[g] is not None or base // self.period != step // self.period:
                continue
            eps = epsilon_at(base + np.arange(half))
            obs = self.obs[g]
            actions = epsilon_greedy_rows(obs, eps, self.q_values, self.num_actions, self.rng)
            self.groups[g].send(actions)
            # The newest frame of each state, as replay stores it (the stack stays behind).
            self.in_flight[g] = (base, obs[:, -1].copy(), actions, eps)

    def target_updated(self):
        """Nothing to do: acting calls the target network, and nothing is in flight."""

    def state_dict(self):
        """The games' current states; the vector env cannot save the games themselves.

        Returns:
            {"backend": "vector", "obs": both groups' states, (W, k, 84, 84)}.
        """
        return {"backend": "vector", "obs": np.concatenate(self.obs)}

    def check_state_dict(self, state):
        """Nothing of the saved games is loaded, so nothing can fail.

        Args:
            state: the backend's state, as a checkpoint holds it (unused).
        """

    def load_state_dict(self, state, step):
        """Restart the games from seeds that depend on `step`: the vector env cannot save them.

        Args:
            state: the backend's state, as a checkpoint holds it.
            step: the agent step the run resumes at.

        Returns:
            False: the games were not restored.
        """
        for group in self.groups:
            group.load_state_dict(state, step)
        self.obs, self.in_flight = [None, None], [None, None]
        return False

    def close(self):
        """Close both groups."""
        for group in self.groups:
            group.close()
