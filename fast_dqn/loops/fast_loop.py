"""The fast DQN loop of Daley & Amato (2021): concurrent training, synchronized sampling.

`FastLoop.run` is the paper's algorithm, with the Nature loop's schedule (C =
--target-update-freq, in agent steps). A *period* is the rounds from one sync point to the
next: the round with which the global agent step passes a multiple of C, or the last round.
Each period, in order:

    1. at a consistent point (the trainer idle, nothing held): evaluate if due, then
       checkpoint if due or asked; or end the run;              _evaluate_and_checkpoint
    2. start the period: the trainer trains the main network on the period's minibatches,
       those the Nature loop trains up to its sync point;       _start_period
    3. play the period's rounds: in each, every sampler takes one agent step, epsilon-greedy
       through the TARGET network (the round's greedy states in one batched call), and the
       transitions are held, not yet written to replay;        _play_rounds
    4. wait for the trainer;                                    _wait_for_trainer
    5. flush the held transitions into replay, sampler 0 first; _flush_held
       at the run's end, the trainer then trains what only this last flush makes
       trainable (fast_dqn.loops.period, hand_out_the_rest);
    6. copy main -> target.                                     _copy_main_to_target
    The sync point then ends the period, and hands out the next one's minibatches
    (fast_dqn.loops.period).                                    end_period

Replay is written only in step 5, while the trainer is idle, and the local samplers act with
a network that is frozen for the whole period: so a seeded local run is reproducible (a Ray
run is not: which actor's chunk arrives first depends on timing). The trainer is paced: it
trains a minibatch only once the samplers have played its step (fast-dqn's choice, which
changes no learning: docs/fast-loop.md).

Experience comes from a backend (fast_dqn.loops.experience) in equal *chunks*: with the local
backend a chunk is a round; with the Ray backend it is one actor's batch of steps, acted with
the actor's copy of the target network. Which trainer trains a period's minibatches, and when,
is fast_dqn.loops.period_trainers: a BackgroundTrainer's thread while the rounds play, or,
without concurrency, the loop's own thread after each chunk, whose transitions are then
written at once (so step 4 finds nothing to wait for and step 5 nothing held).

The Nature ratios hold in every mode: the same warm-up, epsilon by global agent step, and over
the whole run exactly the minibatches the Nature loop would train
(fast_dqn.loops.minibatch_schedule says when, also across a resume without replay).

What the loop carries between rounds, and a checkpoint saves, is one FastLoopState
(fast_dqn.loops.fast_loop_state). A stop is served at the next chunk, also while the loop
waits for the trainer. Mid-period, the trainer stops after its current minibatch, and the
checkpoint keeps what is held, the minibatches the period still owes, and replay's RNG rewound
to where they will be drawn (fast_dqn.loops.period, Period.rewind); a resume with a smaller
--timesteps takes back those handed out for steps past its end (cut_to_budget). So a resumed
run trains, acts and logs exactly as an uninterrupted one.
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
        The last agent step, the smallest multiple of `round_size` not below `timesteps`.
    """
    return -(-timesteps // round_size) * round_size


class FastLoop:
    """The fast loop of the module docstring, over parts the assembly built.

    Args:
        settings: the LoopSettings.
        backend: where experience comes from (see fast_dqn.loops.experience), already
            started.
        learner: trains the main network and copies it to the target.
        replay: the ReplayMemory.
        trainer: a BackgroundTrainer, or None to train in lockstep.
        monitor: the run's Monitor.
        evaluator: an Evaluator, called with the agent step to evaluate; None when
            evaluation is off.
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
        """Train up to settings.timesteps agent steps, or until a stop is asked.

        The budget is rounded up to whole chunks (budget_end). A stop mid-period saves a
        checkpoint from which the run resumes exactly.

        Args:
            state: a FastLoopState to continue from (a resumed checkpoint's), or None for a
                fresh run.

        Returns:
            The agent step reached, over all samplers.
        """
        self.state = state or FastLoopState.fresh(self.settings, self.monitor.message)
        self.period = self.new_period()
        self.monitor.follow(self.state.schedule)
        # The samplers act through the target network: frozen for each period, while the
        # trainer changes the main one.
        self.backend.act_through(self.learner.target_q_values, self.learner.target_weights)
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
        """Take up a run resumed mid-period; False on a stop.

        The trainer takes up what the period still owes, and a stop is read before any round
        is played.
        """
        if self.state.boundary:
            return True
        self.trainer.begin(self.period)
        return self.state.sync_pending or not self.phases.stop_requested()

    def _evaluate_and_checkpoint(self):
        """Step 1: evaluate if due, then checkpoint if due or asked; True when the run ends.

        A checkpoint is also written at the run's last step. The run ends here at its last
        step, or on a stop.
        """
        state = self.state
        if state.eval_pending and self.phases.evaluate(state.step, state.state_dict):
            state.eval_pending, state.last_eval = False, state.step
        last, stop = state.step >= self.total, self.phases.stop_requested()
        self.phases.checkpoint(state.step, state.state_dict, last=last,
                               eval_pending=state.eval_pending, stop=stop)
        return stop or last

    def _start_period(self):
        """Step 2: leave the consistent point; the trainer starts the period's minibatches."""
        self.state.boundary = False
        self.trainer.begin(self.period)

    def _play_rounds(self):
        """Step 3: play chunks until one ends the period; False on a stop.

        A stop is read after each chunk that does not end it (the first chunk's was read at
        the consistent point, or by the resume).
        """
        while not self.state.sync_pending:
            self._play_round()
            if not self.state.sync_pending and self.phases.stop_requested():
                return False
        return True

    def _play_round(self):
        """Play one chunk of agent steps, held until the sync point; the trainer hears of it.

        With the local backend a chunk is a round. The trainer hears that its steps are
        played, which releases their minibatches.
        """
        chunk = self.backend.next_chunk(self.state.step, self.settings.epsilon)
        if chunk is None:  # nothing arrived yet: see to the trainer, then to stop requests
            self.trainer.check()
            return
        self.take_chunk(chunk)

    def take_chunk(self, chunk):
        """Hold a chunk just played, log its games, and tell the trainer its steps are played.

        A run group (fast_dqn.loops.fast_loop_group) plays its runs' rounds together and
        hands each run's chunk here.

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
        """Step 4: wait for the trainer to train the period's minibatches; False on a stop."""
        # At the last sync point no step is left to play: a stop there lets the trainer
        # finish (at most a period), since a run resumed without replay could never train
        # what it owes. A second Ctrl-C still aborts at once.
        last = self.state.step >= self.total
        return self.trainer.wait(self.period, abort=self._finishing if last else self._waiting)

    def _flush_held(self):
        """Step 5: write what is held into replay, shard 0 first; at the end, train the rest.

        At the run's end the trainer then trains what only this last flush makes trainable:
        the minibatches no later sync point will hand out (those of a run that ends at its
        first sync point, and any a refill still deferred), before main is copied for the
        last time.
        """
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
        """End the period at its sync point: the trainer idle and nothing held, consistent.

        The next period's minibatches are handed out here, so that a checkpoint written at
        this point owes them; an evaluation is due if the step passed a multiple of
        --evaluate, or the run ends.
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
        """Stop the trainer after its current minibatch and save what the period still owes.

        Replay's RNG is saved where an uninterrupted run would draw those minibatches.

        Returns:
            The agent step reached.
        """
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
        """The abort test of a sync point's wait: whether a stop was asked.

        Meanwhile the console goes on (its clock, and the ETA of the minibatches training).
        """
        step = self.state.step
        self.monitor.tick(step, float(self.settings.epsilon(step)))
        return self.phases.stop_requested()

    def _finishing(self):
        """The abort test of the last wait: never aborts (returns False).

        It keeps the console going while the last minibatches train, and says why a stop
        waits.
        """
        if self._waiting() and not self.told_finishing:
            self.monitor.message("stopping: the run's last steps are played and their "
                                 "minibatches are still training; the final checkpoint is "
                                 "written as soon as they are done")
            self.told_finishing = True
        return False
