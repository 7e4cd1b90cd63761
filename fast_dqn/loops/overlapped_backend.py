"""The fast loop's samplers in two groups that take turns: one group's games step in C++
while the main thread acts for the other.

With one group (fast_dqn.loops.experience.LocalBackend) a round is three steps in sequence:
act (epsilon-greedy, one batched call of the target network), step every game, record the
chunk; while the main thread acts and records, the emulators wait. Here the W games are
two fixed groups of W/2, each its own ale-py vector env. Group A's step is sent to its C++
threads, and the main thread returns to receive group B's last step and act for B while A
plays. So the network's latency (a GPU call) and the emulators' time overlap instead of
adding up; but each group pays its own call, so it pays only where a call costs less than
the emulators' time (docs/fast-loop.md has the model and the measurements, and why one
group stays the default).

The paper's rules hold:
- Every action goes through the target network, in one batched call per group per round.
- Each chunk is one group's step: W/2 agent steps. Chunks alternate A, B, A, ..., so the
  chunk at agent step b belongs to group (b / (W/2)) mod 2, and sync points fall on chunk
  ends as with any backend.
- No action is sent through a target network that a sync point will replace before the step
  is played: a group's next step is sent only when no sync point falls between the loop's
  step and that step's start; otherwise it waits until the loop asks for the next chunk,
  after the target is copied. So nothing is in flight at a sync point, and the target of
  each period acts for exactly that period's steps.
- The random draws follow the order of the sends, which depends only on the steps and the
  period: a seeded run repeats itself.

Threads: none is started here. The main thread calls every method; ale-py's C++ threads
step a group between its `send` and its `recv`. A checkpoint keeps no game (the vector env
cannot save one): on resume the games restart, as with the one-group vector backend.
"""

import numpy as np

from fast_dqn.agent.policy import epsilon_greedy_rows
from fast_dqn.loops.experience import Chunk


class OverlappedBackend:
    """Two groups of equal size (fast_dqn.envs.samplers.VectorSamplers), stepped in turn.

    Args:
        groups: the two VectorSamplers, games 0..W/2-1 and W/2..W-1.
        period: agent steps between target updates (--target-update-freq).

    Raises:
        ValueError: unless there are two groups of the same size.
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
        """Act from now on through `q_values`.

        Args:
            q_values: the network to act with (the fast loop gives the target network's
                target_q_values), called here on a stack of states.
            weights: a weight source for remote copies; unused here, acting is local.
        """
        self.q_values = q_values

    def next_chunk(self, step, epsilon_at):
        """The chunk of agent steps [step, step + W/2): its group's last step, received.

        Then sends the next steps that no sync point holds back.

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
        """Send each idle group's next step, earliest first, unless a sync point falls
        between `step` (the loop's: every sync point up to it is done) and its start."""
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
        """Main was copied to target: nothing to do.

        Acting calls the target network itself, and nothing is in flight at a sync point.
        """

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
