"""The fast loop's two trainers (fast_dqn.loops.period_trainers): one interface. How each
trains, and that both train the same minibatches, is proved by the loop's own tests
(tests/loops/test_fast_loop.py)."""


def test_the_two_trainers_answer_the_loop_alike():
    """Lockstep is a second trainer behind the concurrent one's interface, so the loop names
    no mode: each of the calls the loop makes is answered by both."""
    from fast_dqn.loops.period_trainers import ConcurrentTrainer, LockstepTrainer

    def calls(cls):
        return {name for name in vars(cls) if not name.startswith("_")}
    assert calls(ConcurrentTrainer) == calls(LockstepTrainer) == {
        "hand_out", "begin", "played", "check", "wait", "train_the_rest", "interrupt"}
