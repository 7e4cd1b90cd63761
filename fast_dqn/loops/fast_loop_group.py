"""A run group's fast loop: G runs of one protocol in lockstep, one compiled call each time.

Each run is a FastLoop lane with its own state, period, games, replay, monitor, evaluator and
checkpoints. The group plays the period of fast_dqn.loops.fast_loop for all of them at once,
except that one stop read serves every run, one trainer thread trains every run's period in
calls of K minibatches for all G (fast_dqn.agent.run_group: the pure update mapped over the
run axis), and each round all runs' greedy states go through their own target networks in
one call. The runs share one schedule (the same W, C, K, budget and warm-up), and every draw
a run makes comes from its own streams in an ordinary run's order: so run r trains, acts and
logs as the ordinary run with its settings, within the rounding of a vmapped program.

A run whose training diverges leaves the group: the trainer thread records it, the loop reads
it after each round, its run ends as an ordinary diverged run ends (its last good checkpoint
kept), and the others go on; its slice of the group still computes, unread.

Threads: the BackgroundTrainer's (fast_dqn.loops.background_trainer), by its rules; it calls
GroupTrainCalls' draw, train and record. Everything else runs on the caller's thread. While
the trainer trains, acting reads the group's target networks, which a train call never
changes (it replaces the stacked state, target values included, with the same target
values); update_target and the write-backs to the runs' learners run only at consistent
points, the trainer idle.
"""

import threading

import numpy as np

from fast_dqn.agent.learner import TrainingDiverged
from fast_dqn.loops.fast_loop_state import FastLoopState


class _HandOut:
    """A lane's trainer as its FastLoop sees it: the group trains, the lane hands out."""

    def hand_out(self, period):
        period.hand_out()

    def played(self, period, previous):
        pass


class GroupTrainCalls:
    """The BackgroundTrainer's draw and train for a run group, and each run's losses.

    Args:
        group: the RunGroup whose members are the lanes' learners.
        lanes: the G lanes, in the group's order.
        batch_size: the transitions in one minibatch.
        on_device: whether replays are mirrored on the device, so only indices travel.
    """

    def __init__(self, group, lanes, batch_size, on_device=True):
        self.group, self.lanes, self.batch_size = group, lanes, batch_size
        self.mirrors = group.mirror_replays([lane.replay for lane in lanes]) if on_device \
            else None
        self._failed = {}  # run -> TrainingDiverged; written by the trainer thread only
        self._lock = threading.Lock()

    def draw(self, count):
        """Each run's next `count` minibatches' indices, from its own replay's RNG.

        Args:
            count: the minibatches of each run, K.

        Returns:
            (shards, idx), int arrays (G, count, B), where replay is on the device; else a
            Batch of (G, count, B, ...) arrays gathered here.
        """
        drawn = [lane.replay.sample_indices_many(count, self.batch_size) for lane in self.lanes]
        if self.mirrors is None:
            gathered = [lane.replay.gather_many(*d) for lane, d in zip(self.lanes, drawn)]
            return type(gathered[0])(*(np.stack(field) for field in zip(*gathered)))
        for mirror in self.mirrors:
            mirror.sync()
        return np.stack([d[0] for d in drawn]), np.stack([d[1] for d in drawn])

    def train(self, drawn):
        """Train the drawn minibatches of every run in one call; a diverged run is kept in `failed`.

        Args:
            drawn: what draw returned, indices or a gathered Batch.

        Returns:
            One result per minibatch: (G losses, G mean Qs).
        """
        if self.mirrors is None:
            losses, mean_qs = self.group.train_many(drawn)
        else:
            losses, mean_qs = self.group.train_from_replay(self.mirrors, *drawn)
        for run in self.group.diverged(losses, mean_qs):
            with self._lock:
                self._failed.setdefault(run, TrainingDiverged(
                    "the loss, the mean Q or a weight is not finite: training diverged"))
        return list(zip(losses.T, mean_qs.T))

    def failed(self):
        """The runs whose training diverged.

        Returns:
            {run: TrainingDiverged}, a copy (the trainer thread adds to the original).
        """
        with self._lock:
            return dict(self._failed)

    def record(self, result):
        """Hand each live run its minibatch's loss and mean Q, in order.

        Args:
            result: one of train's results, (G losses, G mean Qs).
        """
        losses, mean_qs = result
        failed = self.failed()
        for run, lane in enumerate(self.lanes):
            if run not in failed:
                lane.monitor.record_train(float(losses[run]), float(mean_qs[run]))


class GroupFastLoop:
    """The module docstring's loop over G FastLoop lanes.

    Args:
        lanes: the runs' FastLoops; their learners are the group's members.
        group: the RunGroup that trains them.
        calls: the GroupTrainCalls of the group's trainer.
        trainer: a BackgroundTrainer over calls.draw and calls.train.
        stop: a function of no arguments, true once a stop is asked (read once for all runs).
        on_failed: on_failed(run, error): a run left the group (its training diverged).
    """

    def __init__(self, lanes, group, calls, trainer, stop, on_failed):
        self.lanes, self.group, self.calls, self.trainer = lanes, group, calls, trainer
        self.stop, self.on_failed = stop, on_failed
        self.live = list(range(len(lanes)))
        self.settings = lanes[0].settings
        self.told_finishing = False
        for lane in lanes:
            lane.trainer = _HandOut()

    @property
    def _lead(self):
        """The first run still in the group (all share its step and period); None: none."""
        return self.lanes[self.live[0]] if self.live else None

    def _each(self):
        return [self.lanes[r] for r in self.live]

    def run(self, states=None):
        """Train every run to the budget, or until a stop.

        Args:
            states: G FastLoopStates to continue from (all at one agent step), or None: fresh runs.

        Returns:
            The agent step reached; None where every run left the group (diverged).
        """
        states = states or [None] * len(self.lanes)
        for lane, state in zip(self.lanes, states):
            lane.state = state or FastLoopState.fresh(self.settings, lane.monitor.message)
            lane.period = lane.new_period()
            lane.monitor.follow(lane.state.schedule)
        steps = {lane.state.step for lane in self.lanes}
        if len(steps) > 1:
            raise ValueError(f"a group's runs resume at one agent step, not {sorted(steps)}")
        if not self._resume_period():
            return self._stop_mid_period()
        while True:
            # A run leaves when its training diverges: the others go on, until none is left.
            if self._lead is None:
                return None
            if self._lead.state.boundary:
                if self._evaluate_and_checkpoint():
                    return self._lead.state.step if self.live else None
                self._start_period()
            if not self._play_rounds():
                return self._stop_mid_period()
            if self._lead is None:
                return None
            if not self._wait_for_trainer():
                return self._stop_mid_period()
            self._flush_held()
            self.group.update_target()
            for lane in self._each():
                lane.end_period()

    def _owed(self):
        """The minibatches every live run's period owes: one count, as one schedule gives."""
        counts = {lane.period.minibatches for lane in self._each()}
        if len(counts) > 1:
            raise RuntimeError(f"a group's runs owe different minibatches: {sorted(counts)}")
        return counts.pop()

    def _begin(self):
        owed = self._owed()
        if owed:
            for lane in self._each():
                lane.period.mark_start()
            self.trainer.start(owed, unplayed=self._lead.period.unplayed())

    def _resume_period(self):
        if self._lead.state.boundary:
            return True
        self._begin()
        return self._lead.state.sync_pending or not self.stop()

    def _evaluate_and_checkpoint(self):
        """Step 1 for every run; True when the runs end (their last step, or a stop)."""
        step = self._lead.state.step
        last = step >= self._lead.total
        due = [r for r in self.live if self.lanes[r].state.eval_pending]
        self.group.write_back(due)
        for r in due:
            lane = self.lanes[r]
            if lane.phases.evaluate(step, lane.state.state_dict):
                lane.state.eval_pending, lane.state.last_eval = False, step
        stop = self.stop()
        for r in self.live:
            lane = self.lanes[r]
            if stop or last or (lane.checkpoints and lane.checkpoints.due(step)):
                self.group.write_back([r])
            lane.phases.checkpoint(step, lane.state.state_dict, last=last,
                                   eval_pending=lane.state.eval_pending, stop=stop)
        return stop or last

    def _start_period(self):
        for lane in self._each():
            lane.state.boundary = False
        self._begin()

    def _play_rounds(self):
        while not self._lead.state.sync_pending:
            self._play_round()
            if not self.live:
                return True
            if not self._lead.state.sync_pending and self.stop():
                return False
        return True

    def _play_round(self):
        """One round of every run: their draws, one acting call, their games stepped."""
        step = self._lead.state.step
        greedy = {r: self.lanes[r].backend.greedy_states(step, self.settings.epsilon)
                  for r in self.live}
        q = self._acting_q(greedy) if any(len(s) for s in greedy.values()) else {}
        for r in self.live:  # a run whose Q-values were not finite has left
            self.lanes[r].backend.send_round(q.get(r))
        for lane in self._each():
            lane.take_chunk(lane.backend.recv_round())
        if self.live:
            self.trainer.pace(self._lead.period.unplayed())
        self._check_trainer()

    def _acting_q(self, greedy):
        """{run: Q-values} of every live run's greedy states; a non-finite run leaves the group."""
        rows = next(iter(greedy.values()))
        states = [np.zeros((0, *rows.shape[1:]), rows.dtype)] * self.group.runs
        for r, those in greedy.items():
            states[r] = those
        q = self.group.target_q_values(states, strict=False)
        for r in list(greedy):
            if not np.all(np.isfinite(q[r])):
                self._leave(r, TrainingDiverged("a Q-value of the target network is not "
                                                "finite: training diverged"))
        return {r: q[r] for r in self.live}

    def _leave(self, run, error):
        self.live.remove(run)
        self.on_failed(run, error)

    def _check_trainer(self):
        """Re-raise a failure of the trainer's threads; let diverged runs leave the group."""
        self.trainer.check()
        failed = self.calls.failed()
        for run in sorted(set(failed) & set(self.live)):
            self._leave(run, failed[run])

    def _wait_for_trainer(self):
        self.trainer.pace(0)
        last = self._lead.state.step >= self._lead.total
        done = self.trainer.wait(abort=self._finishing if last else self._waiting)
        self._check_trainer()
        if done:
            for lane in self._each():
                lane.period.mark_trained()
        return done

    def _waiting(self):
        """The abort test of a sync point's wait: the consoles go on; whether to stop."""
        for lane in self._each():
            lane.monitor.tick(lane.state.step, float(self.settings.epsilon(lane.state.step)))
        return self.stop()

    def _finishing(self):
        """The last wait's abort test: never aborts, and says why a stop waits, as FastLoop's."""
        if self._waiting() and not self.told_finishing:
            for lane in self._each():
                lane.monitor.message("stopping: the run's last steps are played and their "
                                     "minibatches are still training; the final checkpoint "
                                     "is written as soon as they are done")
            self.told_finishing = True
        return False

    def _flush_held(self):
        for lane in self._each():
            lane.state.held.flush(lane.replay)
        if self.live and self._lead.state.step >= self._lead.total:
            rest = {lane.period.hand_out_the_rest() for lane in self._each()}
            if rest != {0}:
                self._begin()
                trained = self._wait_for_trainer()
                # _finishing never aborts: a False here would leave minibatches untrained
                # that no resume could train.
                assert trained, "the run's last minibatches were not trained"

    def _stop_mid_period(self):
        """Stop the trainer; each run saves what its period owes. The step; None: no run left."""
        trained = self.trainer.interrupt() if self.live and self._owed() else 0
        self._check_trainer()
        for lane in self._each():
            if lane.period.minibatches:
                lane.period.rewind(trained)
        self.group.write_back(self.live)
        for lane in self._each():
            lane.checkpoints.save(lane.state.step, lane.state.state_dict())
        return self._lead.state.step if self.live else None
