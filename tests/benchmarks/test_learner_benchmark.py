"""benchmarks/learner.py's FLOP count of a train step, against the Nature CNN by hand."""

from benchmarks.learner import layer_macs, train_step_flops
from fast_dqn.agent.q_network import nature_cnn


def test_the_nature_cnn_multiply_adds_by_hand():
    net = nature_cnn((4, 84, 84), 6)
    # conv 8x8/4 on 84x84x4 -> 20x20x32; 4x4/2 -> 9x9x64; 3x3/1 -> 7x7x64; 3136 -> 512 -> 6.
    by_hand = [20 * 20 * 32 * 8 * 8 * 4, 9 * 9 * 64 * 4 * 4 * 32, 7 * 7 * 64 * 3 * 3 * 64,
               3136 * 512, 512 * 6]
    assert layer_macs(net) == by_hand
    forward = sum(by_hand)
    # target on s', main on s, main's backward (twice forward, but no input gradient for
    # conv1); 2 FLOPs per multiply-add, for each of 32 samples.
    assert train_step_flops(net, 32) == 2 * 32 * (2 * forward + 2 * forward - by_hand[0])
    assert train_step_flops(net, 32, double=True) - train_step_flops(net, 32) == 2 * 32 * forward
