"""The fast DQN loop of Daley & Amato (2021): concurrent training, synchronized sampling.

`FastLoop.run` is the paper's algorithm on the Nature loop's schedule (C =
--target-update-freq, in agent steps). A *period* is the rounds from one sync point to the
next; a sync point is the round with which the global agent step passes a multiple of C, or
the run's last round. Each period, in order:

    1. at a consistent point (the trainer idle, nothing held): evaluate if due, then
       checkpoint if due or asked; or end the run;              _evaluate_and_checkpoint
    2. start the period: the trainer trains the main network on the period's minibatches,
       those the Nature loop trains up to its sync point;       _start_period
    3. play the period's rounds: in each, every sampler takes one agent step, epsilon-greedy
       through the TARGET network (the round's greedy states in one batched call), and the
       transitions are held, not yet written to replay;        _play_rounds
    4. wait for the trainer;                                    _wait_for_trainer
    5. flush the held transitions into replay, sampler 0 first; _flush_held
       at the run's end, the trainer then trains what only this flush makes trainable
       (the minibatches of a run that ends at its first sync point, and any deferred);
    6. copy main -> target.                                     _copy_main_to_target
    The sync point then ends the period and hands out the next one's minibatches, so that a
    checkpoint written there owes them.                         end_period

Replay is written only in step 5, while the trainer is idle, and the local samplers act with
a network frozen for the whole period: so a seeded local run is reproducible (a Ray run is
not: which actor's chunk arrives first depends on timing). The trainer is paced: it trains a
minibatch only once the samplers have played its step (fast-dqn's choice, which changes no
learning: docs/fast-loop.md).

Experience comes in equal *chunks* from a backend (fast_dqn.loops.experience): a round with
the local backend, one actor's batch of steps with Ray. The trainer
(fast_dqn.loops.period_trainers) is a BackgroundTrainer's thread, or, without concurrency, the
loop's own thread after each chunk, whose transitions are then written at once (so step 4
finds nothing to wait for and step 5 nothing held). In every mode the run trains exactly the
Nature loop's minibatches (fast_dqn.loops.minibatch_schedule), epsilon by global agent step.

A stop is served at the next chunk, also while the loop waits for the trainer. Mid-period, the
trainer stops after its current minibatch, and the checkpoint (one FastLoopState,
fast_dqn.loops.fast_loop_state) keeps what is held, the minibatches the period still owes, and
replay's RNG rewound to where they will be drawn; a resume with a smaller --timesteps takes
back those handed out for steps past its end (cut_to_budget). So a resumed run trains, acts
and logs exactly as an uninterrupted one.
"""

import numpy as np

from fast_dqn.loops.evaluate_then_checkpoint import EvaluateThenCheckpoint
from fast_dqn.loops.fast_loop_state import FastLoopState
from fast_dqn.loops.period import Period
from fast_dqn.loops.period_trainers import ConcurrentTrainer, LockstepTrainer


def budget_end(timesteps, round_size):
    """The agent step a run of `timesteps` agent steps ends at, rounded up to a whole chunk.

    Args:
        timesteps: the run's budget, in agent steps over all samplers.
        round_size: agent steps in a round (or, with the Ray backend, a chunk).

    Returns:
        The smallest multiple of `round_size` not below `timesteps`, in agent steps.
    """
    return -(-timesteps // round_size) * round_size


class FastLoop:
    """The fast loop of the module docstring, over parts the assembly built.

    Args:
        settings: the LoopSettings, the Nature schedule in agent steps.
        backend: the experience backend (fast_dqn.loops.experience), already started.
        learner: trains the main network and copies it to the target.
        replay: the ReplayMemory that the held transitions are flushed into.
        trainer: a BackgroundTrainer, or None to train in lockstep.
        monitor: the run's Monitor, told each game, step, minibatch and sync point.
        evaluator: an Evaluator called with the agent step; None: evaluation is off.
        checkpoints: a Checkpointer, or None when the run writes no checkpoints.
    """

    def __init__(self, settings, backend, learner, replay, trainer, monitor, evaluator=None,
                 checkpoints=None):
        self.settings, self.backend, self.learner, self.replay = settings, backend, learner, replay
        self.monitor = monitor
        self.trainer = ConcurrentTrainer(trainer) if trainer is not None else \
            LockstepTrainer(learner, replay, settings, monitor)
        self.evaluator, self.checkpoints = evaluator, checkpoints
        self.phases = EvaluateThenCheckpoint(evaluator, checkpoints)
        self.round_size = backend.round_size
        self.total = budget_end(settings.timesteps, self.round_size)
        self.told_finishing = False

    def run(self, state=None):
        """Train up to settings.timesteps agent steps, rounded up to whole chunks, or until a stop.

        Args:
            state: a resumed checkpoint's FastLoopState to continue from, or None for a fresh run.

        Returns:
            The agent step reached, over all samplers.
        """
        self.state = state or FastLoopState.fresh(self.settings, self.monitor.message)
        self.period = self.new_period()
        self.monitor.follow(self.state.schedule)
        # The samplers act through the target network: frozen for each period, while the
        # trainer changes the main one.
        self.backend.act_through(self.learner.acting_q_values, self.learner.target_weights)
        if not self._resume_period():
            return self._stop_mid_period()
        while True:
            # A run resumed mid-period goes on at step 3.
            if self.state.boundary:
                # 1. At a consistent point: evaluate and checkpoint, or end.
                if self._evaluate_and_checkpoint():
                    return self.state.step
                # 2. Start a period: the trainer trains main on its minibatches.
                self._start_period()
            # 3. Play the period's rounds through the target network, held.
            if not self._play_rounds():
                return self._stop_mid_period()
            # 4. Wait for the trainer.
            if not self._wait_for_trainer():
                return self._stop_mid_period()
            # 5. Flush the held transitions to replay.
            self._flush_held()
            # 6. Copy main to target.
            self._copy_main_to_target()
            # The sync point: the period ends at a consistent point; the next one's
            # minibatches are handed out.
            self.end_period()

    def _resume_period(self):
        """Take up a run resumed mid-period; False on a stop."""
        if self.state.boundary:
            return True
        self.trainer.begin(self.period)
        return self.state.sync_pending or not self.phases.stop_requested()

    def _evaluate_and_checkpoint(self):
        """Step 1; True when the run ends (its last step, or a stop)."""
        state = self.state
        if state.eval_pending and self.phases.evaluate(state.step, state.state_dict):
            state.eval_pending, state.last_eval = False, state.step
        last, stop = state.step >= self.total, self.phases.stop_requested()
        self.phases.checkpoint(state.step, state.state_dict, last=last,
                               eval_pending=state.eval_pending, stop=stop)
        return stop or last

    def _start_period(self):
        """Step 2: leave the consistent point; the trainer starts the period."""
        self.state.boundary = False
        self.trainer.begin(self.period)

    def _play_rounds(self):
        """Step 3: play chunks until one ends the period; False on a stop."""
        while not self.state.sync_pending:
            self._play_round()
            if not self.state.sync_pending and self.phases.stop_requested():
                return False
        return True

    def _play_round(self):
        """Play one chunk, or, when none has arrived, see to the trainer."""
        chunk = self.backend.next_chunk(self.state.step, self.settings.epsilon)
        if chunk is None:  # nothing arrived yet: see to the trainer, then to stop requests
            self.trainer.check()
            return
        self.take_chunk(chunk)

    def take_chunk(self, chunk):
        """Hold a chunk just played, log its games, and tell the trainer its steps are played.

        A run group (fast_dqn.loops.fast_loop_group) hands each run's chunk here.

        Args:
            chunk: the Chunk just played (fast_dqn.loops.experience).
        """
        state = self.state
        state.held.append(chunk)
        games = chunk.game_over.shape[1]
        for t, j in zip(*np.nonzero(chunk.game_over)):
            self.monitor.record_game(state.step + t * games + j + 1,
                                     int(chunk.game_lengths[t, j]),
                                     float(chunk.game_returns[t, j]),
                                     float(chunk.epsilons[t, j]))
        previous, state.step = state.step, state.step + chunk.steps
        state.sync_pending = self.period.ended_by(previous, state.step)
        self.trainer.played(self.period, previous)
        self.monitor.tick(state.step, float(self.settings.epsilon(state.step)))

    def _wait_for_trainer(self):
        """Step 4; False on a stop."""
        # At the last sync point no step is left to play: a stop there lets the trainer
        # finish (at most a period), since a run resumed without replay could never train
        # what it owes. A second Ctrl-C still aborts at once.
        last = self.state.step >= self.total
        return self.trainer.wait(self.period, abort=self._finishing if last else self._waiting)

    def _flush_held(self):
        """Step 5: write what is held into replay; at the run's end, train the rest."""
        self.state.held.flush(self.replay)
        if self.state.step >= self.total:
            trained = self.trainer.train_the_rest(self.period, abort=self._finishing)
            # _finishing never aborts, so the wait cannot end early: a False here would
            # leave minibatches untrained that no resume could train.
            assert trained, "the run's last minibatches were not trained"

    def _copy_main_to_target(self):
        """Step 6: copy main -> target, for the learner and the samplers."""
        self.learner.update_target()
        self.backend.target_updated()

    def end_period(self):
        """End the period at its sync point, a consistent point, and hand out the next one's.

        An evaluation is then due if the step passed a multiple of --evaluate, or the run ends.
        """
        state = self.state
        self.monitor.sync_point(state.step)
        state.sync_pending = False
        if state.step < self.total:
            self.period = self.new_period()
            self.trainer.hand_out(self.period)
        every = self.settings.eval_freq
        state.eval_pending = bool(self.evaluator) and (
            state.step // every > state.last_eval // every or state.step >= self.total)
        state.boundary = True

    def _stop_mid_period(self):
        """Stop the trainer, checkpoint what the period owes, and return the agent step."""
        self.trainer.interrupt(self.period)
        self.checkpoints.save(self.state.step, self.state.state_dict())
        return self.state.step

    def new_period(self):
        """The period that starts at the loop state's step.

        Returns:
            A Period (fast_dqn.loops.period).
        """
        return Period(self.state, self.settings, self.round_size, self.total, self.replay)

    def _waiting(self):
        """The abort test of a sync point's wait: keeps the console going; true on a stop."""
        step = self.state.step
        self.monitor.tick(step, float(self.settings.epsilon(step)))
        return self.phases.stop_requested()

    def _finishing(self):
        """The abort test of the last wait: never aborts, and says why a stop waits."""
        if self._waiting() and not self.told_finishing:
            self.monitor.message("stopping: the run's last steps are played and their "
                                 "minibatches are still training; the final checkpoint is "
                                 "written as soon as they are done")
            self.told_finishing = True
        return False
