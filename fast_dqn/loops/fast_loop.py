"""The fast DQN loop of Daley & Amato (2021): concurrent training, synchronized sampling.

Experience comes from a backend (fast_dqn.loops.experience) in equal *chunks*, acting
epsilon-greedily through the *target* network. With the local backend a chunk is a round: each
of W samplers takes one agent step, and when synchronized the states of the round's greedy
samplers go through the network in one batched call (otherwise each queries it alone; samplers
that explore skip it, as the Nature loop's single agent does). With the Ray backend a chunk is
one actor's batch of steps, acted with the actor's copy of the target network.

With C = target_update_freq, a *sync point* is the chunk with which the global agent step
passes a multiple of C, and the last chunk. At a sync point, with concurrent training:
1. wait for the trainer to finish its period;
2. flush every sampler's held transitions into replay, sampler 0 first;
3. copy main -> target (and tell the backend), and evaluate if an evaluation is due;
4. hand the trainer the minibatches the Nature loop would train in the coming period
   (one per train_freq agent steps after warm-up), which it trains while the samplers act,
   each once the samplers have played the step it is due at: so a stop never leaves
   minibatches trained for steps not played, and a resume with a smaller --timesteps takes
   back exactly those of the steps past it.
Replay is written only in step 2, while the trainer is idle, and the local samplers act with
a network that is frozen for the whole period: so a seeded local run is reproducible (a Ray
run is not: which actor's chunk arrives first depends on timing).

Without concurrency, the same chunks run in lockstep: after each chunk its transitions are
written and the minibatches due are trained at once.

The Nature ratios hold in every mode: the same warm-up, epsilon by global agent step, and over
the whole run exactly the minibatches the Nature loop would train (fast_dqn.loops.minibatch_schedule
says when, also across a resume without replay).

Checkpoints: periodic ones are written at a sync point, between steps 3 and 4 above, when the
trainer is idle and nothing is held. A stop request (Ctrl-C, SIGTERM) is served at the next
chunk, even while the loop waits for the trainer at a sync point (except the last one, where
the trainer finishes: no step is left to refill a replay that was not saved): the trainer
stops after its current minibatch, and the checkpoint keeps what is held, the minibatches
still owed for the period, and replay's RNG rewound to where those minibatches will be
drawn. A resumed run therefore trains, acts and logs exactly as an uninterrupted one.

All of that state is one FastLoopState, which the checkpoint saves and the loop reads.
`FastLoop.run` goes through a period's phases in order: play chunks (`_play_chunk`), the sync
point (`_sync`), evaluate (`_evaluate`), checkpoint or stop (`_checkpoint_ends_run`), and hand
the next period to the trainer (`_hand_over`).
"""

from dataclasses import dataclass

import numpy as np

from fast_dqn.loops.evaluation import EvaluationInterrupted
from fast_dqn.loops.minibatch_schedule import MinibatchSchedule
from fast_dqn.state_schema import StateMismatch


def next_sync_point(step, period, round_size, total):
    """The first round boundary after `step` that passes the next multiple of `period`."""
    crossing = (step // period + 1) * period
    return min(total, -(-crossing // round_size) * round_size)


def budget_end(timesteps, round_size):
    """The step a run of `timesteps` ends at: whole chunks, so rounded up to one."""
    return -(-timesteps // round_size) * round_size


def cut_to_budget(loop, total, train_freq, evaluates=True):
    """A checkpoint's loop state (a dict) resumed with a smaller budget, ending at `total`:
    the minibatches handed out for steps past it are taken back (none of them was trained:
    the trainer trains a minibatch only once its step is played), and a run already at its
    end plays no further. Done before a refill defers what the checkpoint owed."""
    if loop["trained_through"] > total:
        schedule = MinibatchSchedule.from_loop_state(loop, train_freq)
        loop["owed"] = max(0, loop["owed"] - schedule.pending(total, loop["trained_through"]))
        loop["trained_through"] = total
    if loop["step"] >= total and not loop["boundary"]:
        loop["sync_pending"] = True  # its sync point evaluates, as every run's last one does
    elif loop["step"] >= total and evaluates and loop["last_eval"] != loop["step"]:
        loop["eval_pending"] = True  # cut to a sync point that did not evaluate
    return loop


class HeldTransitions:
    """The chunks received since the last flush, in arrival order."""

    def __init__(self, chunks=()):
        # Each chunk as (frames, actions, rewards, terminated, episode_ends, shards); a
        # checkpoint keeps this list as it is.
        self.chunks = list(chunks)
        self.cut_in_replay = set()  # shards whose last stored transition lost its successor

    @staticmethod
    def check_saved(chunks, num_shards, frame_shape, frame_dtype):
        """Raise StateMismatch unless a checkpoint's chunks can be flushed into a replay of
        `num_shards` shards of frames of `frame_shape`: a chunk of another form would fail
        in the flush, after the logs are cut back, or write wrong frames."""
        for i, (frames, *steps, shards) in enumerate(chunks):
            where = f"/loop/held/{i}"
            if shards.ndim != 1 or shards.dtype.kind not in "iu" or not len(shards) or \
                    shards.min() < 0 or shards.max() >= num_shards:
                raise StateMismatch(f"{where} names shards outside 0..{num_shards - 1}")
            rounds = (len(frames), len(shards))
            if frames.shape != (*rounds, *frame_shape) or frames.dtype != frame_dtype or \
                    any(step.shape != rounds for step in steps):
                raise StateMismatch(f"{where} holds arrays of shapes "
                                    f"{[a.shape for a in (frames, *steps)]}, not {rounds} "
                                    f"steps of frames {frame_shape} ({frame_dtype})")

    def append(self, chunk):
        ends = np.array(chunk.episode_ends)  # writable: a later restart may cut it
        if chunk.new_stream:
            self._cut(chunk.shards)
        self.chunks.append((chunk.frames, chunk.actions, chunk.rewards, chunk.terminated,
                            ends, chunk.shards))

    def _cut(self, shards):
        """End the episodes of `shards` at their latest transition, held or already stored."""
        for shard in shards:
            for *_, ends, held_shards in reversed(self.chunks):
                column = np.flatnonzero(held_shards == shard)
                if len(column):
                    ends[-1, column[0]] = True
                    break
            else:
                self.cut_in_replay.add(int(shard))

    def flush(self, replay):
        """Write everything into replay: shard 0's steps first, each shard in time order."""
        if self.cut_in_replay:
            replay.cut_episodes(sorted(self.cut_in_replay))
            self.cut_in_replay = set()
        columns = {}
        for chunk in self.chunks:
            *arrays, shards = chunk
            for column, shard in enumerate(shards):
                columns.setdefault(int(shard), []).append((arrays, column))
        for shard in sorted(columns):
            # One shard at a time: joining all of them at once would briefly double the held
            # frames in RAM (70 MB per Nature period with 8 games).
            frames, actions, rewards, terminated, ends = (
                np.concatenate([arrays[field][:, column] for arrays, column in columns[shard]])
                for field in range(5))
            replay.add_batch(frames, actions, rewards, terminated, ends, shard=shard)
        self.chunks = []


@dataclass
class FastLoopState:
    """Everything of the fast loop that a checkpoint saves and a resume restores; the loop
    reads and moves it, and nothing else of the loop outlives a stop."""
    schedule: MinibatchSchedule   # which minibatches are due when, and those deferred
    held: HeldTransitions         # chunks received since the last sync point
    step: int = 0                 # agent steps taken, over all samplers
    trained_through: int = 0      # the minibatches of steps up to here are handed out
    last_eval: int = 0            # the step of the last evaluation
    owed: int = 0                 # minibatches the trainer still owes for this period
    sync_pending: bool = False    # the last chunk passed a sync point not yet handled
    eval_pending: bool = False    # an evaluation is due (or was interrupted)
    boundary: bool = True         # trainer idle and nothing held: a consistent point

    @classmethod
    def fresh(cls, settings, warn=None):
        return cls(MinibatchSchedule(settings.prepopulate, settings.train_freq, warn=warn),
                   HeldTransitions())

    @classmethod
    def from_state_dict(cls, state, settings, warn=None):
        """From a checkpoint's loop state."""
        return cls(MinibatchSchedule.from_loop_state(state, settings.train_freq, warn),
                   HeldTransitions(state["held"]), state["step"], state["trained_through"],
                   state["last_eval"], state["owed"], state["sync_pending"],
                   state["eval_pending"], state["boundary"])

    def state_dict(self):
        return {"step": self.step, "trained_through": self.trained_through,
                "last_eval": self.last_eval, "schedule": self.schedule.state_dict(),
                "owed": self.owed, "held": self.held.chunks,
                "sync_pending": self.sync_pending, "eval_pending": self.eval_pending,
                "boundary": self.boundary}


class FastLoop:
    """The loop above over built parts; `run` trains up to settings.timesteps (rounded up to
    whole chunks) and returns the step reached.

    backend: where experience comes from (see fast_dqn.loops.experience), already started;
    learner: trains the main network and copies it to the target; trainer: a
    BackgroundTrainer, or None for lockstep training; evaluator(step): an Evaluator, or None
    when evaluation is off; checkpoints: a Checkpointer, or None.
    """

    def __init__(self, settings, backend, learner, replay, trainer, monitor, evaluator=None,
                 checkpoints=None):
        self.settings, self.backend, self.learner, self.replay = settings, backend, learner, replay
        self.trainer, self.monitor = trainer, monitor
        self.evaluator, self.checkpoints = evaluator, checkpoints
        self.round_size = backend.round_size
        self.total = budget_end(settings.timesteps, self.round_size)
        self.period_rng = None  # replay's RNG state when the trainer's current period began
        self.told_finishing = False

    def stop_requested(self):
        return self.checkpoints.stop_requested() if self.checkpoints else False

    def run(self, state=None):
        """state: a FastLoopState to continue from (a resumed checkpoint's), or None."""
        s = self.state = state or FastLoopState.fresh(self.settings, self.monitor.message)
        self.monitor.follow(s.schedule)
        if state and self.trainer is not None and s.owed and not s.boundary:
            self._start_training()  # resumed mid-period: the trainer owes the rest of it
        while True:
            if s.sync_pending and not self._sync():
                return self._stop_mid_period()
            if s.eval_pending:
                self._evaluate()
            if s.boundary:
                if self._checkpoint_ends_run():
                    return s.step
                self._hand_over()
            elif self.stop_requested():
                return self._stop_mid_period()
            self._play_chunk()

    def _sync(self):
        """The sync point (steps 1-4 of the module's docstring, less the evaluation): ends at
        a boundary. False when a stop came while it waited for the trainer."""
        s = self.state
        if self.trainer is not None:
            if not self._finish_period():
                return False
            self._update_target()
        self.monitor.sync_point(s.step)
        s.sync_pending = False
        if self.trainer is not None and s.step < self.total:
            end = next_sync_point(s.step, self.settings.target_update_freq, self.round_size,
                                  self.total)
            s.owed = self._minibatches(s.trained_through, end, final=False)
            s.trained_through = end
        every = self.settings.eval_freq
        s.eval_pending = bool(self.evaluator) and (
            s.step // every > s.last_eval // every or s.step >= self.total)
        s.boundary = True
        return True

    def _finish_period(self):
        """Wait for the trainer to end its period, then write what is held into replay. False
        when a stop came while it waited."""
        s = self.state
        # At the last sync point no step is left to play: a stop there lets the trainer
        # finish (at most a period), since a run resumed without replay could never train
        # what it owes. A second Ctrl-C still aborts at once.
        last = s.step >= self.total
        while True:
            # The period is played: whatever it owes may train (never wait on a release
            # that no further step would bring).
            self.trainer.hold_back(0)
            if not self.trainer.wait(abort=self._finishing if last else self._waiting):
                return False
            s.owed = 0
            s.held.flush(self.replay)
            if not (last and (s.trained_through < s.step or s.schedule.deferred)):
                return True
            # A run that ends at its first sync point: that period's minibatches would only
            # be handed out at the next one, which never comes. Train them now, as the
            # Nature loop would have, and any still deferred, then wait again.
            s.owed = self._minibatches(s.trained_through, s.step, final=True)
            s.trained_through = s.step
            if not s.owed:
                return True
            self._start_training()

    def _checkpoint_ends_run(self):
        """At a boundary: checkpoint where one is due or a stop is asked; true when the run
        ends here."""
        s = self.state
        stop, last = self.stop_requested(), s.step >= self.total
        if self.checkpoints and (stop or self.checkpoints.due(s.step) or last):
            self.checkpoints.save(s.step, s.state_dict(), final=last,
                                  finished=last and not s.eval_pending)
        return stop or last

    def _hand_over(self):
        """Leave the boundary: the trainer starts on the period's minibatches."""
        self.state.boundary = False
        if self.trainer is not None and self.state.owed:
            self._start_training()

    def _held_back(self):
        """The handed-out minibatches of steps the samplers have not played yet."""
        s = self.state
        return s.schedule.pending(s.step, s.trained_through)

    def _play_chunk(self):
        s = self.state
        chunk = self.backend.next_chunk(s.step, self.settings.epsilon)
        if chunk is None:  # nothing arrived yet: see to the trainer and to stop requests
            if self.trainer is not None:
                self.trainer.check()
            return
        s.held.append(chunk)
        games = chunk.game_over.shape[1]
        for t, j in zip(*np.nonzero(chunk.game_over)):
            self.monitor.record_game(s.step + t * games + j + 1, int(chunk.game_lengths[t, j]),
                                     float(chunk.game_returns[t, j]),
                                     float(chunk.epsilons[t, j]))
        previous, s.step = s.step, s.step + chunk.steps
        period = self.settings.target_update_freq
        s.sync_pending = s.step // period > previous // period or s.step >= self.total
        if self.trainer is None:
            s.held.flush(self.replay)
            final = s.step >= self.total
            for _ in range(self._minibatches(previous, s.step, final=final)):
                self.monitor.record_train(
                    *self.learner.train(self.replay.sample(self.settings.batch_size)))
                if final:  # the deferred ones all train here: keep the console going
                    self.monitor.tick(s.step, float(self.settings.epsilon(s.step)))
            if s.sync_pending:
                self._update_target()
        else:
            self.trainer.hold_back(self._held_back())
            self.trainer.check()
        self.monitor.tick(s.step, float(self.settings.epsilon(s.step)))

    def _evaluate(self):
        s = self.state
        try:
            self.evaluator(s.step)
            s.eval_pending, s.last_eval = False, s.step
        except EvaluationInterrupted:
            pass  # saved as still pending
        except Exception:
            # At a boundary, with the evaluation pending (it keeps no state), the state is
            # consistent.
            if self.checkpoints:
                self.checkpoints.save(s.step, s.state_dict())
            raise

    def _minibatches(self, start, end, final):
        """Take the minibatches of agent steps (start, end] from the schedule; `final` at the
        run's last write of replay, the last chance to repay deferred ones."""
        return self.state.schedule.take(start, end, final, replay_ready=self.replay.can_sample)

    def _waiting(self):
        """The abort test of a sync point's wait: a stop request. Meanwhile the console goes
        on (its clock, and the ETA of the minibatches training)."""
        step = self.state.step
        self.monitor.tick(step, float(self.settings.epsilon(step)))
        return self.stop_requested()

    def _finishing(self):
        """The abort test of the last wait: never aborts, but keeps the console going while
        the last minibatches train, and says why a stop waits."""
        if self._waiting() and not self.told_finishing:
            self.monitor.message("the last period's minibatches are still training: the run "
                                 "finishes them before it stops")
            self.told_finishing = True
        return False

    def _update_target(self):
        self.learner.update_target()
        self.backend.target_updated()

    def _start_training(self):
        self.period_rng = self.replay.rng.bit_generator.state
        self.trainer.start(self.state.owed, held_back=self._held_back())

    def _stop_mid_period(self):
        """Stop the trainer after its current minibatch and save what it still owes, with
        replay's RNG where an uninterrupted run would draw those minibatches."""
        s = self.state
        if self.trainer is not None and s.owed:
            done = self.trainer.interrupt()
            s.owed -= done
            self.replay.rng.bit_generator.state = self.period_rng
            self.replay.skip_samples(done, self.settings.batch_size)
        self.checkpoints.save(s.step, s.state_dict())
        return s.step
