"""What lets the fast loop stop anywhere and resume as if it never had.

A stop is served at the next round, also while the loop waits for the trainer at a sync point
(fast_dqn.loops.fast_loop). Mid-period, the trainer stops after its current minibatch, and the
checkpoint keeps what is held, the minibatches still owed for the period, and replay's RNG
rewound to where those minibatches will be drawn (Period.rewind, fast_dqn.loops.period). A
resume with a smaller --timesteps takes back the minibatches handed out for steps past the
new end (cut_to_budget). So a resumed run trains, acts and logs exactly as an uninterrupted
one.
"""

from fast_dqn.loops.minibatch_schedule import MinibatchSchedule


def cut_to_budget(loop, total, train_freq, evaluates=True):
    """Fit a checkpoint's loop state to the resumed run's budget, which may be smaller.

    The minibatches handed out for agent steps past `total` are taken back (none of them was
    trained: the trainer trains a minibatch only once its step is played), and a run already
    at its end plays no further. Done before a refill defers what the checkpoint owed.

    Args:
        loop: the loop state of a checkpoint, a dict as FastLoopState.state_dict() writes it;
            changed in place.
        total: the resumed run's last agent step (budget_end of its --timesteps).
        train_freq: one minibatch per this many agent steps after warm-up.
        evaluates: whether the resumed run evaluates; if so, a run cut to a sync point that
            did not evaluate evaluates there.

    Returns:
        `loop`, cut to the budget.
    """
    if loop["trained_through"] > total:
        schedule = MinibatchSchedule.from_loop_state(loop, train_freq)
        loop["owed"] = max(0, loop["owed"] - schedule.pending(total, loop["trained_through"]))
        loop["trained_through"] = total
    if loop["step"] >= total and not loop["boundary"]:
        loop["sync_pending"] = True  # its sync point evaluates, as every run's last one does
    elif loop["step"] >= total and evaluates and loop["last_eval"] != loop["step"]:
        loop["eval_pending"] = True  # cut to a sync point that did not evaluate
    return loop

