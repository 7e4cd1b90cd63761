"""The fast DQN loop of Daley & Amato (2021): concurrent training, synchronized sampling.

`FastLoop.run` is the paper's algorithm, with the Nature loop's schedule (C =
--target-update-freq, in agent steps):

    repeat, round after round:
        a round (_round): each of W samplers takes one agent step, epsilon-greedy through
            the TARGET network; the states of the round's greedy samplers go through it in
            one batched call. The transitions are held, not yet written to replay.
        at a sync point (the round with which the global agent step passes a multiple of
        C, and the last round):
            1. wait for the trainer to finish the period's minibatches;   _sync_point
            2. flush the held transitions into replay, sampler 0 first;   _wait_for_period
            3. copy main -> target; evaluate if due, then checkpoint if due or asked;
            4. hand the trainer the minibatches the Nature loop trains in the coming
               period (one per --train-freq agent steps after warm-up), which it trains
               on the main network while the samplers play the next rounds.  _hand_over

Replay is written only in step 2, while the trainer is idle, and the local samplers act with
a network that is frozen for the whole period: so a seeded local run is reproducible (a Ray
run is not: which actor's chunk arrives first depends on timing). The trainer is paced: it
trains a minibatch only once the samplers have played its step (fast-dqn's choice, which
changes no learning: docs/fast-loop.md).

Experience comes from a backend (fast_dqn.loops.experience) in equal *chunks*: with the local
backend a chunk is a round; with the Ray backend it is one actor's batch of steps, acted with
the actor's copy of the target network. Without concurrency (`trainer` None), the same chunks
run in lockstep: after each one its transitions are written and the minibatches due are
trained at once.

The Nature ratios hold in every mode: the same warm-up, epsilon by global agent step, and over
the whole run exactly the minibatches the Nature loop would train
(fast_dqn.loops.minibatch_schedule says when, also across a resume without replay).

What the loop carries between rounds, and a checkpoint saves, is one FastLoopState
(fast_dqn.loops.fast_loop_state). How a stop mid-period and a resume keep the run exact is
fast_dqn.loops.fast_loop_stops.
"""

import numpy as np

from fast_dqn.loops.evaluate_then_checkpoint import EvaluateThenCheckpoint
from fast_dqn.loops.fast_loop_state import FastLoopState, next_sync_point
from fast_dqn.loops.fast_loop_stops import PeriodStart


def budget_end(timesteps, round_size):
    """The step a run of `timesteps` ends at: whole chunks, so rounded up to one."""
    return -(-timesteps // round_size) * round_size


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
        self.phases = EvaluateThenCheckpoint(evaluator, checkpoints)
        self.round_size = backend.round_size
        self.total = budget_end(settings.timesteps, self.round_size)
        self.period_start = PeriodStart(replay, settings.batch_size)
        self.told_finishing = False

    def run(self, state=None):
        """state: a FastLoopState to continue from (a resumed checkpoint's), or None."""
        s = self.state = state or FastLoopState.fresh(self.settings, self.monitor.message)
        self.monitor.follow(s.schedule)
        # The samplers act through the target network: frozen for each period, while the
        # trainer changes the main one.
        self.backend.act_through(self.learner.target_q_values, self.learner.target_weights)
        if state and self.trainer is not None and s.owed and not s.boundary:
            self._start_training()  # resumed mid-period: the trainer owes the rest of it
        while True:
            if s.sync_pending and not self._sync_point():
                return self._stop_mid_period()
            if s.eval_pending and self.phases.evaluate(s.step, s.state_dict):
                s.eval_pending, s.last_eval = False, s.step
            if s.boundary:
                last, stop = s.step >= self.total, self.phases.stop_requested()
                self.phases.checkpoint(s.step, s.state_dict, last=last,
                                       eval_pending=s.eval_pending, stop=stop)
                if stop or last:
                    return s.step
                self._hand_over()
            elif self.phases.stop_requested():
                return self._stop_mid_period()
            self._round()

    def _round(self):
        """One chunk of agent steps (a round, with the local backend), held until the next
        sync point; in lockstep, written and trained on at once."""
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
            self.trainer.pace(self._unplayed())
            self.trainer.check()
        self.monitor.tick(s.step, float(self.settings.epsilon(s.step)))

    def _sync_point(self):
        """Steps 1 to 3 of the sync point, less the evaluation; it ends at a boundary (the
        trainer idle, nothing held). False when a stop came while it waited for the trainer."""
        s = self.state
        if self.trainer is not None:
            if not self._wait_for_period():
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

    def _wait_for_period(self):
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
            self.trainer.pace(0)
            if not self.trainer.wait(abort=self._finishing if last else self._waiting):
                return False
            s.owed = 0
            s.held.flush(self.replay)
            if not (last and self._owed_at_the_end()):
                return True
            self._start_training()

    def _owed_at_the_end(self):
        """At the run's last sync point, hand out what no later sync point will: the
        minibatches of a run that ends at its first sync point, which would only have been
        handed out at the next one, and any still deferred. Returns how many."""
        s = self.state
        if s.trained_through < s.step or s.schedule.deferred:
            s.owed = self._minibatches(s.trained_through, s.step, final=True)
            s.trained_through = s.step
        return s.owed

    def _hand_over(self):
        """Step 4: leave the boundary; the trainer starts on the period's minibatches."""
        self.state.boundary = False
        if self.trainer is not None and self.state.owed:
            self._start_training()

    def _start_training(self):
        self.period_start.mark()
        self.trainer.start(self.state.owed, unplayed=self._unplayed())

    def _unplayed(self):
        """The handed-out minibatches due at steps the samplers have not played yet."""
        s = self.state
        return s.schedule.pending(s.step, s.trained_through)

    def _minibatches(self, start, end, final):
        """Take the minibatches of agent steps (start, end] from the schedule; `final` at the
        run's last write of replay, the last chance to repay deferred ones."""
        return self.state.schedule.take(start, end, final, replay_ready=self.replay.can_sample)

    def _update_target(self):
        self.learner.update_target()
        self.backend.target_updated()

    def _stop_mid_period(self):
        """Stop the trainer after its current minibatch and save what it still owes, with
        replay's RNG where an uninterrupted run would draw those minibatches."""
        s = self.state
        if self.trainer is not None and s.owed:
            s.owed -= self.period_start.rewind(self.trainer.interrupt())
        self.checkpoints.save(s.step, s.state_dict())
        return s.step

    def _waiting(self):
        """The abort test of a sync point's wait: a stop request. Meanwhile the console goes
        on (its clock, and the ETA of the minibatches training)."""
        step = self.state.step
        self.monitor.tick(step, float(self.settings.epsilon(step)))
        return self.phases.stop_requested()

    def _finishing(self):
        """The abort test of the last wait: never aborts, but keeps the console going while
        the last minibatches train, and says why a stop waits."""
        if self._waiting() and not self.told_finishing:
            self.monitor.message("stopping: the run's last steps are played and their "
                                 "minibatches are still training; the final checkpoint is "
                                 "written as soon as they are done")
            self.told_finishing = True
        return False
