"""`--backend ray`: sampler actors on a Ray cluster feed the learner in this process.

The learner, replay and the fast loop stay in the driver; each `SamplerActor` runs a LocalBackend
of `--envs-per-sampler` games, acting with its own copy of the target network. One request returns
`--rollout-steps` steps of each of its games as one Chunk of single uint8 frames, never stacks:
replay rebuilds the stacks, so the wire carries a quarter of the bytes.

The rules, all kept in this module:
- Only the driver's main thread talks to Ray; nothing here starts a Python thread.
- Weights go out once per target update: one `ray.put`, tagged with a version. Requests carry
  the reference inside a list, so Ray does not fetch it for every call; an actor fetches the
  weights only when the version changes, and Ray moves them to each node once.
- At most `--requests-in-flight` requests per actor are outstanding. The driver takes whichever
  actor's oldest request finishes first (`ray.wait`), so a slow actor never stalls the learner
  (the backup workers of distributed BA3C), and each actor's chunks still arrive in order, so its
  games' trajectories stay contiguous in replay.
- A request acts with the weights and epsilon current when it was sent: a chunk may act with
  the target network of the period before (at most `--requests-in-flight` chunks per actor).
- A lost actor (its process, or its machine, died) is replaced with a new one on fresh seeds.
  Its unfinished requests are dropped, never counted, and its first chunk tells the loop to end
  the old games' episodes in replay; the others go on meanwhile. An exception raised by the
  sampler code itself is a bug, not a lost machine: it ends the run.
- Nothing waits forever: no chunk for `STALL_SECONDS` ends the run with an error, and so does an
  actor that dies `MAX_DEATHS` times in a row without delivering.
- `close()` kills the actors, and stops the cluster when this process started it.
The cluster is started or joined in fast_dqn.loops.ray_cluster.
"""

import collections
import os
import time

import numpy as np
import ray

from fast_dqn.envs.environment import game_seed
from fast_dqn.loops.experience import STEP_FIELDS, LocalBackend, join_chunks
from fast_dqn.loops.ray_cluster import connect
from fast_dqn.rng_streams import SAMPLER_RNG_STREAM, rng_for

POLL_SECONDS = 0.2
STALL_SECONDS = 600.0  # a TF actor takes ~6 s to start alone, much longer on a busy machine
MAX_DEATHS = 3
# What a lost process or machine looks like to the driver.
LOST = (ray.exceptions.RayActorError, ray.exceptions.WorkerCrashedError,
        ray.exceptions.ObjectLostError, ray.exceptions.NodeDiedError)


@ray.remote(num_cpus=1, max_restarts=0, max_task_retries=0)
class SamplerActor:
    """Plays its games with a copy of the target network; one `rollout` call, one chunk."""

    def __init__(self, make_samplers, make_network, seed):
        from fast_dqn.agent.backend_setup import configure_backend
        from fast_dqn.agent.learner import predictor
        # Ray sets only OMP_NUM_THREADS=1 here; TF's own pools would take every core of the
        # node, once per actor. Under JAX no setting bounds XLA's CPU pool (docs/ray.md).
        configure_backend(seed, threads=1)

        self.make_samplers = make_samplers
        self.local = LocalBackend(make_samplers(seed))
        space = self.local.observation_space
        self.network = make_network(space.shape, self.local.num_actions)()
        self._q = predictor(self.network)
        self.version = None
        self._start(seed)

    def _start(self, seed):
        self.local.start(rng_for(seed, SAMPLER_RNG_STREAM))
        self.local.act_through(self._q, None)

    def spec(self):
        """{"num_actions", "observation_space", "node_id", "pid"}: the actor, once started."""
        return {"num_actions": self.local.num_actions,
                "observation_space": self.local.observation_space,
                "node_id": ray.get_runtime_context().get_node_id(), "pid": os.getpid()}

    def restart(self, seed):
        """Start new games from a new seed (a resumed run does not replay its first games)."""
        self.local.close()
        self.local = LocalBackend(self.make_samplers(seed))
        self._start(seed)

    def load_weights(self, weights, version):
        """Act with target weights `version`, fetched only if new, from now on; return it."""
        if version != self.version:
            self.network.set_weights(ray.get(weights[0]))
            self.version = version
        return version

    def rollout(self, weights, version, epsilon, steps):
        """Play `steps` rounds of every game; returns a Chunk of `steps` rows, a column a game."""
        self.load_weights(weights, version)
        return join_chunks([self.local.next_chunk(0, lambda s: np.full(len(s), epsilon))
                            for _ in range(steps)])

    def close(self):
        self.local.close()


class RayBackend:
    """The fast loop's backend on Ray: connects, starts the actors, and waits for the first.

    Args:
        settings: a RaySettings: the cluster, the actors, their games and requests.
        make_samplers: a function of a seed that builds one actor's games (a Samplers);
            pickled to the actors, so module-level (fast_dqn.run.components has it).
        make_network: maps (observation shape, action count) to a Q-network builder; pickled too.
        log: a function that prints one console line (a lost actor, a crowded machine).
    """

    def __init__(self, settings, make_samplers, make_network, log=print):
        self.settings, self.log = settings, log
        self.make_samplers, self.make_network = make_samplers, make_network
        self.connected = connect(settings, log)
        self.num_samplers = settings.num_samplers
        self.games = settings.envs_per_sampler
        self.num_shards = self.num_samplers * self.games
        self.round_size = self.games * settings.rollout_steps
        self.actors = [None] * self.num_samplers
        self.pending = [collections.deque() for _ in range(self.num_samplers)]
        self.incarnations = [0] * self.num_samplers
        self.deaths = [0] * self.num_samplers
        self.fresh = set()        # replaced actors whose next chunk starts new games
        self.seed_offset = 0      # moved on at a resume
        self.weights_ref, self.version, self.stale = None, 0, True
        self.weights = None       # act_through() sets it: the target weights
        self.delivered = 0        # chunks received (for tests and benchmarks)
        try:
            for i in range(self.num_samplers):
                self._launch(i)
            spec = self._first_spec()
        except BaseException:
            self.close()
            raise
        self.num_actions = spec["num_actions"]
        self.observation_space = spec["observation_space"]
        self.last_arrival = self.last_call = time.monotonic()

    def _seed(self, i):
        # Distinct for every game of every actor and incarnation; game g of an actor adds g.
        return game_seed(self.settings.seed + self.seed_offset
                         + (self.incarnations[i] * self.num_samplers + i) * self.games,
                         self.games)

    def _launch(self, i):
        self.actors[i] = SamplerActor.remote(self.make_samplers, self.make_network, self._seed(i))

    def _first_spec(self):
        """Wait for the first actor to come up; its start-up errors surface here."""
        refs = [actor.spec.remote() for actor in self.actors]
        ready, _ = ray.wait(refs, num_returns=1, timeout=STALL_SECONDS)
        if not ready:
            raise RuntimeError(f"no sampler actor started within {STALL_SECONDS:.0f} s; is the "
                               "cluster short of CPUs (see `ray status`)?")
        return ray.get(ready[0])

    def node_ids(self):
        """The Ray node id of every actor, by index; waits for them all to start.

        Returns:
            A list of Ray node ids, one per actor.
        """
        return [spec["node_id"] for spec in ray.get([a.spec.remote() for a in self.actors])]

    # --- the backend interface

    def start(self, rng, log=None):
        """Take where to report events; the actors draw their own actions.

        Args:
            rng: the action RNG, unused: each actor has a stream of its own.
            log: a function that prints one console line; None keeps the current one.
        """
        self.log = log or self.log  # the actors draw their own actions: no RNG here

    def act_through(self, q_values, weights):
        """Take the source of the weights the actors act with.

        Args:
            q_values: the local network's Q-values function, unused: the actors act.
            weights: returns the target network's weights; called at each target update.
        """
        self.weights = weights  # acting happens in the actors; they get the weights

    def target_updated(self):
        """The next request sends the new target weights."""
        self.stale = True  # put once, when the next request goes out

    def next_chunk(self, step, epsilon_at):
        """The chunk of whichever actor finished first, waiting POLL_SECONDS at most.

        Args:
            step: agent steps taken so far, over all games.
            epsilon_at: epsilon by agent step; the requests sent now act with it at `step`.

        Returns:
            A Chunk of `round_size` agent steps, or None when none arrived in time.
        """
        now = time.monotonic()
        if now - self.last_call > 10 * POLL_SECONDS:
            self.last_arrival = now  # the loop was busy (evaluating, saving): not a stall
        self.last_call = now
        self._top_up(float(epsilon_at(step)))
        heads = {queue[0]: i for i, queue in enumerate(self.pending) if queue}
        ready, _ = ray.wait(list(heads), num_returns=1, timeout=POLL_SECONDS)
        if not ready:
            waited = time.monotonic() - self.last_arrival
            if waited > STALL_SECONDS:
                raise RuntimeError(f"no sampler actor delivered for {waited:.0f} s; the "
                                   "cluster may have lost its nodes (see `ray status`)")
            return None
        i = heads[ready[0]]
        self.pending[i].popleft()
        try:
            chunk = ray.get(ready[0])
        except LOST as error:
            self._replace(i, error)
            return None
        # Copied out of the object store: held chunks must not pin it for a whole period.
        for name in STEP_FIELDS:
            setattr(chunk, name, np.array(getattr(chunk, name)))
        chunk.shards = i * self.games + np.arange(self.games)
        chunk.new_stream = i in self.fresh
        self.fresh.discard(i)
        self.deaths[i] = 0
        self.delivered += 1
        self.last_arrival = time.monotonic()
        return chunk

    def _top_up(self, epsilon):
        if self.stale:
            self.weights_ref = ray.put(self.weights())
            self.version += 1
            self.stale = False
        for i, actor in enumerate(self.actors):
            while len(self.pending[i]) < self.settings.requests_in_flight:
                self.pending[i].append(actor.rollout.remote(
                    [self.weights_ref], self.version, epsilon, self.settings.rollout_steps))

    def _replace(self, i, error):
        self.deaths[i] += 1
        text = str(error).strip()
        reason = text.splitlines()[0] if text else type(error).__name__
        if self.deaths[i] >= MAX_DEATHS:
            raise RuntimeError(f"sampler actor {i} was lost {MAX_DEATHS} times in a row without "
                               f"delivering a batch; the last time: {reason}")
        lost = len(self.pending[i]) + 1
        self.log(f"sampler actor {i} was lost ({reason}); its {lost} unfinished batch(es) are "
                 f"dropped and a new actor replaces it, while the other "
                 f"{self.num_samplers - 1} go on")
        self._kill(self.actors[i])
        self.pending[i].clear()
        self.incarnations[i] += 1
        self.fresh.add(i)
        self._launch(i)

    def state_dict(self):
        """What a checkpoint keeps of the games: only that they were on Ray.

        Returns:
            {"backend": "ray"}.
        """
        return {"backend": "ray"}

    def check_state_dict(self, state):
        """Accept any saved state, changing nothing.

        Args:
            state: the backend's state_dict from a checkpoint.
        """
        pass  # nothing of the saved games is loaded

    def load_state_dict(self, state, step):
        """Restart the actors' games on seeds moved on by `step`: their states never come back.

        Args:
            state: the backend's state_dict from a checkpoint, unused.
            step: the checkpoint's agent step, which moves the seeds on.

        Returns:
            False: the games restart, and the loop ends replay's episodes.
        """
        self.seed_offset = step
        for i, actor in enumerate(self.actors):
            actor.restart.remote(self._seed(i))
        return False

    @staticmethod
    def _kill(actor):
        try:
            ray.kill(actor, no_restart=True)
        except Exception:
            pass  # already gone

    def close(self):
        """Kill the actors, and stop the cluster when this process started it."""
        if not ray.is_initialized():
            return
        for actor in self.actors:
            if actor is not None:
                self._kill(actor)
        self.pending = [collections.deque() for _ in range(self.num_samplers)]
        if self.connected:
            ray.shutdown()
