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
   (one per train_freq agent steps after warm-up), which it trains while the samplers act.
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
still owed for the period, and replay's RNG rewound to where those minibatches will be drawn. A resumed run
therefore trains, acts and logs exactly as an uninterrupted one.
"""

import numpy as np

from fast_dqn.loops.evaluation import EvaluationInterrupted
from fast_dqn.loops.minibatch_schedule import MinibatchSchedule
from fast_dqn.agent.schedules import LinearSchedule


def next_sync_point(step, period, round_size, total):
    """The first round boundary after `step` that passes the next multiple of `period`."""
    crossing = (step // period + 1) * period
    return min(total, -(-crossing // round_size) * round_size)


class HeldTransitions:
    """The chunks received since the last flush, in arrival order."""

    def __init__(self, chunks=()):
        # Each chunk as (frames, actions, rewards, terminated, episode_ends, shards); a
        # checkpoint keeps this list as it is.
        self.chunks = [_as_chunk_tuple(c) for c in chunks]
        self.cut_in_replay = set()  # shards whose last stored transition lost its successor

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
            for column, shard in enumerate(chunk[5]):
                columns.setdefault(int(shard), []).append((chunk, column))
        for shard in sorted(columns):
            # One shard at a time: joining all of them at once would briefly double the held
            # frames in RAM (70 MB per Nature period with 8 games).
            frames, actions, rewards, terminated, ends = (
                np.concatenate([chunk[field][:, column] for chunk, column in columns[shard]])
                for field in range(5))
            replay.add_batch(frames, actions, rewards, terminated, ends, shard=shard)
        self.chunks = []


def _as_chunk_tuple(held):
    """Checkpoints of fast-dqn before the backends held one round per entry: W games' frames,
    actions, rewards, terminated and ends, without shards. Those become one-row chunks."""
    if len(held) == 6:
        return held
    return (*(np.asarray(a)[None] for a in held), np.arange(len(held[1])))


def run_fast_loop(config, backend, learner, replay, trainer, monitor, evaluator=None,
                  checkpoints=None, resume=None):
    """Train for config.timesteps agent steps (rounded up to whole chunks).

    backend: where experience comes from (see fast_dqn.loops.experience), already started; learner:
    trains the main network and copies it to the target; trainer: a BackgroundTrainer, or None
    for lockstep training; evaluator(step): an Evaluator, or None when evaluation is off;
    checkpoints: a Checkpointer, or None; resume: the loop state of a checkpoint to continue
    from.

    Periodic checkpoints are written at sync points, where the trainer is idle and nothing is
    held. A stop request is served after the current chunk: the trainer stops after its
    current minibatch, and the checkpoint keeps the held transitions, the minibatches still
    owed for this period, and replay's RNG as it will be when they are drawn.
    Returns the step reached.
    """
    R = backend.round_size
    period = config.target_update_freq
    total = -(-config.timesteps // R) * R
    exploration = LinearSchedule(config.eps_start, config.eps_end, config.eps_decay_steps)

    def epsilon_at(steps):
        return np.where(np.asarray(steps) < config.prepopulate, 1.0, exploration(steps))

    stop_requested = checkpoints.stop_requested if checkpoints else (lambda: False)
    if resume:
        step, trained_through = resume["step"], resume["trained_through"]
        last_eval = resume["last_eval"]
        schedule = MinibatchSchedule.from_loop_state(resume, config.train_freq, monitor.message)
        owed, held = resume["owed"], HeldTransitions(resume["held"])
        sync_pending, eval_pending = resume["sync_pending"], resume["eval_pending"]
        boundary = resume["boundary"]
    else:
        step, trained_through, last_eval, owed = 0, 0, 0, 0
        schedule = MinibatchSchedule(config.prepopulate, config.train_freq, warn=monitor.message)
        held = HeldTransitions()
        sync_pending = eval_pending = False
        boundary = True  # a consistent point: trainer idle, nothing held
    period_rng = None  # replay's RNG state when the trainer's current period began

    def loop_state():
        return {"step": step, "trained_through": trained_through, "last_eval": last_eval,
                "schedule": schedule.state_dict(), "owed": owed, "held": held.chunks,
                "sync_pending": sync_pending, "eval_pending": eval_pending,
                "boundary": boundary}

    def minibatches(start, end, final):
        """Take the minibatches of agent steps (start, end] from the schedule; `final` at the
        run's last write of replay, the last chance to repay deferred ones."""
        return schedule.take(start, end, final, replay_ready=replay.can_sample)

    told_finishing = []

    def finishing():
        """The abort test of the last wait: never aborts, but says why a stop waits."""
        if stop_requested() and not told_finishing:
            monitor.message("the last period's minibatches are still training: the run "
                            "finishes them before it stops")
            told_finishing.append(True)
        return False

    def update_target():
        learner.update_target()
        backend.target_updated()

    def start_training():
        nonlocal period_rng
        period_rng = replay.rng.bit_generator.state
        trainer.start(owed)

    def stop_mid_period():
        """Stop the trainer after its current minibatch and save what it still owes, with
        replay's RNG where an uninterrupted run would draw those minibatches."""
        nonlocal owed
        if trainer is not None and owed:
            done = trainer.interrupt()
            owed -= done
            replay.rng.bit_generator.state = period_rng
            replay.skip_samples(done, config.batch_size)
        checkpoints.save(step, loop_state())
        return step

    if resume and trainer is not None and owed and not boundary:
        start_training()
    while True:
        if sync_pending:
            if trainer is not None:
                # At the last sync point no step is left to play: a stop there lets the trainer
                # finish (at most a period), since a run resumed without replay could never
                # train what it owes. A second Ctrl-C still aborts at once.
                if not trainer.wait(abort=finishing if step >= total else stop_requested):
                    return stop_mid_period()
                owed = 0
                held.flush(replay)
                if step >= total and (trained_through < step or schedule.deferred):
                    # A run that ends at its first sync point: that period's minibatches
                    # would only be handed out at the next one, which never comes. Train
                    # them now, as the Nature loop would have, and any still deferred,
                    # then copy the target.
                    owed = minibatches(trained_through, step, final=True)
                    trained_through = step
                    if owed:
                        start_training()
                        continue  # back to the wait above, with sync_pending still set
                update_target()
            sync_pending = False
            if trainer is not None and step < total:
                end = next_sync_point(step, period, R, total)
                owed = minibatches(trained_through, end, final=False)
                trained_through = end
            eval_pending = bool(evaluator) and (
                step // config.evaluate > last_eval // config.evaluate or step >= total)
            boundary = True
        if eval_pending:
            try:
                evaluator(step)
                eval_pending, last_eval = False, step
            except EvaluationInterrupted:
                pass  # saved below as still pending
            except Exception:
                # At a boundary with the evaluator rolled back, the state is consistent.
                if checkpoints:
                    checkpoints.save(step, loop_state())
                raise
        if boundary:
            stop = stop_requested()
            if checkpoints and (stop or checkpoints.due(step) or step >= total):
                checkpoints.save(step, loop_state(), final=step >= total)
            if stop or step >= total:
                return step
            boundary = False
            if trainer is not None and owed:
                start_training()
        elif stop_requested():
            return stop_mid_period()

        chunk = backend.next_chunk(step, epsilon_at)
        if chunk is None:  # nothing arrived yet: see to the trainer and to stop requests
            if trainer is not None:
                trainer.check()
            continue
        held.append(chunk)
        games = chunk.game_over.shape[1]
        for t, j in zip(*np.nonzero(chunk.game_over)):
            monitor.record_game(step + t * games + j + 1, int(chunk.game_lengths[t, j]),
                                float(chunk.game_returns[t, j]), float(chunk.epsilons[t, j]))
        previous, step = step, step + chunk.steps
        sync_pending = step // period > previous // period or step >= total
        if trainer is None:
            held.flush(replay)
            for _ in range(minibatches(previous, step, final=step >= total)):
                monitor.record_train(*learner.train(*replay.sample(config.batch_size)))
            if sync_pending:
                update_target()
        else:
            trainer.check()
        monitor.tick(step, float(epsilon_at(step)))
