"""Where the fast loop's experience comes from: the backend interface and its local backend.

A backend plays the fast loop's games and hands back `Chunk`s of transitions; the loop
(fast_dqn.loops.fast_loop) is the same whatever the backend. Every backend has the public
methods of `LocalBackend` below, but for the run group's (greedy_states, send_round,
recv_round), and its `num_actions`, `observation_space`, `num_shards` (replay shards, one per
game) and `round_size` (agent steps per chunk: every chunk has the same size, so sync points
fall on chunk boundaries). A remote backend's next_chunk returns None when nothing has arrived
yet: the loop then sees to its trainer and stop requests, and asks again.

Backends: `LocalBackend` here (`--backend threads`, the samplers in this process, acting
through the target network in one batched call per round), fast_dqn.loops.overlapped_backend
(two groups that take turns) and fast_dqn.loops.ray_backend (`--backend ray`, sampler actors
on a Ray cluster, each acting with its own copy of the target weights), which alone imports ray.
"""

from dataclasses import dataclass

import numpy as np

from fast_dqn.agent.policy import epsilon_draws, epsilon_greedy_rows
from fast_dqn.state_schema import StateMismatch


@dataclass
class Chunk:
    """T consecutive agent steps of S games. Arrays are (T, S, ...); row t happened before t+1.

    frames hold the newest frame of each state s_t (not the stack), as replay stores them.
    """
    frames: np.ndarray          # (T, S, *frame_shape)
    actions: np.ndarray         # (T, S) int
    rewards: np.ndarray         # (T, S) float32, clipped
    terminated: np.ndarray      # (T, S) bool: the learner's episode ended
    episode_ends: np.ndarray    # (T, S) bool: terminated or cut by the time limit
    game_over: np.ndarray       # (T, S) bool: a whole game ended
    game_returns: np.ndarray    # (T, S) float: unclipped score of the game that ended
    game_lengths: np.ndarray    # (T, S) int
    epsilons: np.ndarray        # (T, S) float: the exploration rate each action was taken with
    shards: np.ndarray          # (S,) int: the replay shard of each game
    # The games' streams restart here (a replaced sampler): the transitions before this chunk
    # have lost their successor and must end their episodes.
    new_stream: bool = False

    @property
    def steps(self):
        return self.actions.size


# The (T, S, ...) arrays of a Chunk, in field order.
STEP_FIELDS = ("frames", "actions", "rewards", "terminated", "episode_ends", "game_over",
               "game_returns", "game_lengths", "epsilons")


def join_chunks(chunks):
    """Consecutive chunks of the same games as one chunk, in time order."""
    first = chunks[0]
    return Chunk(*(np.concatenate([getattr(c, f) for c in chunks]) for f in STEP_FIELDS),
                 shards=first.shards, new_stream=first.new_stream)


class LocalBackend:
    """Samplers of fast_dqn.envs.samplers stepped by the calling thread; one chunk per round.

    Args:
        samplers: a PythonSamplers or VectorSamplers, one replay shard per game.
        batched: whether a round's greedy samplers share one network call; else each calls alone.
    """

    def __init__(self, samplers, batched=True):
        self.samplers = samplers
        self.batched = batched
        self.num_actions = samplers.num_actions
        self.observation_space = samplers.observation_space
        self.num_shards = self.round_size = samplers.num_samplers
        self.shards = np.arange(self.num_shards)
        self.obs = None
        self.q_values = None  # act_through() sets it

    def start(self, rng, log=None):
        """Begin playing: keep the action RNG, and reset the games not restored.

        Args:
            rng: the numpy Generator that draws the epsilon-greedy actions.
            log: where to report events (the run's console); unused here.
        """
        self.rng = rng
        if self.obs is None:
            self.obs = self.samplers.reset()

    def act_through(self, q_values, weights):
        """Act from now on through `q_values`.

        Args:
            q_values: called on a stack of states to act (the fast loop gives acting_q_values).
            weights: a weight source for remote copies; unused here, acting is local.
        """
        self.q_values = q_values

    def next_chunk(self, step, epsilon_at):
        """Play one round: an epsilon-greedy action for every game, then one step of each.

        Args:
            step: the loop's agent step, where the round begins.
            epsilon_at: the exploration rate at given agent steps, vectorized.

        Returns:
            A Chunk of one row: W agent steps, one per game (never None: it plays in place).
        """
        eps = epsilon_at(step + np.arange(self.round_size))
        actions = epsilon_greedy_rows(self.obs, eps, self.q_values, self.num_actions, self.rng,
                                      batched=self.batched)
        frames = self.obs[:, -1].copy()  # before stepping: a sampler may reuse its buffers
        return self._chunk(frames, eps, actions, self.samplers.step(actions))

    def greedy_states(self, step, epsilon_at):
        """The first half of a round played in two (a run group's): next_chunk's draws, in order.

        Args:
            step: the loop's agent step, where the round begins.
            epsilon_at: the exploration rate at given agent steps, vectorized.

        Returns:
            The states of the games that act greedily this round, (N, ...); N may be 0.
        """
        eps = epsilon_at(step + np.arange(self.round_size))
        actions, greedy = epsilon_draws(self.round_size, eps, self.num_actions, self.rng)
        self._round = self.obs[:, -1].copy(), eps, actions, greedy
        return self.obs[greedy]

    def send_round(self, q_values):
        """Act greedily where the round's draws said, and send the games their actions.

        Args:
            q_values: the greedy states' Q-values, (N, actions), in greedy_states' order.
        """
        _, _, actions, greedy = self._round
        if len(greedy):
            actions[greedy] = np.argmax(q_values, axis=1)
        if hasattr(self.samplers, "send"):  # C++ threads step them while others are sent
            self.samplers.send(actions)

    def recv_round(self):
        """Wait for the games that send_round sent.

        Returns:
            The round's Chunk, as next_chunk's.
        """
        frames, eps, actions, _ = self._round
        step = self.samplers.recv() if hasattr(self.samplers, "send") else \
            self.samplers.step(actions)
        return self._chunk(frames, eps, actions, step)

    def _chunk(self, frames, eps, actions, result):
        self.obs = result.observations
        return Chunk(frames[None], actions[None], result.rewards[None],
                     result.terminated[None], (result.terminated | result.truncated)[None],
                     result.game_over[None], result.game_returns[None],
                     result.game_lengths[None], eps[None], self.shards)

    def target_updated(self):
        """Nothing to do: acting calls the target network itself."""

    def state_dict(self):
        """The games for a checkpoint: the samplers' state and their current states.

        Returns:
            The samplers' state_dict, with "obs": the games' states, (W, k, 84, 84).
        """
        return {**self.samplers.state_dict(), "obs": self.obs}

    def check_state_dict(self, state):
        """Raise StateMismatch, changing nothing, if load_state_dict would fail on `state`.

        Args:
            state: the backend's state, as state_dict gives it.
        """
        shape = (self.num_shards, *self.observation_space.shape)
        if self.samplers.check_state_dict(state) and \
                getattr(state.get("obs"), "shape", None) != shape:
            raise StateMismatch(f"/samplers/obs is not an array of shape {shape}")

    def load_state_dict(self, state, step):
        """Continue the saved games where the samplers can; else they restart.

        Args:
            state: the backend's state, as state_dict gives it.
            step: the agent step the run resumes at (it seeds restarted games).

        Returns:
            Whether the games were restored; False: the loop cuts replay's episodes.
        """
        if not self.samplers.load_state_dict(state, step):
            return False
        self.obs = state["obs"]
        return True

    def close(self):
        """Close the samplers."""
        self.samplers.close()
