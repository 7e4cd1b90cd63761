"""The run's random streams: one number per part, all distinct, and never renumbered (a seeded
run repeats only while each part keeps drawing from the same stream)."""

import numpy as np

from fast_dqn import rng_streams


def test_the_stream_numbers_are_pinned_and_distinct():
    streams = {name: value for name, value in vars(rng_streams).items()
               if name.endswith("_RNG_STREAM")}
    # Today's numbers: a change here changes every seeded run's trajectory.
    assert streams == {"ACTION_RNG_STREAM": 0, "EVAL_RNG_STREAM": 1, "REPLAY_RNG_STREAM": 2,
                       "SAMPLER_RNG_STREAM": 3}
    assert len(set(streams.values())) == len(streams)


def test_rng_for_draws_as_the_seed_and_stream_pair_always_did():
    drawn = rng_streams.rng_for(7, rng_streams.REPLAY_RNG_STREAM).integers(2**31, size=4)
    np.testing.assert_array_equal(drawn, np.random.default_rng([7, 2]).integers(2**31, size=4))
    other = rng_streams.rng_for(7, rng_streams.ACTION_RNG_STREAM).integers(2**31, size=4)
    assert not np.array_equal(drawn, other)
