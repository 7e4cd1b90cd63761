"""The ε schedule (fast_dqn.agent.schedules): the Nature values, on scalars and arrays."""

import numpy as np
import pytest

from fast_dqn.agent.schedules import LinearSchedule


def test_linear_schedule_nature_values():
    eps = LinearSchedule(1.0, 0.1, 1_000_000)
    assert eps(0) == 1.0
    assert eps(500_000) == pytest.approx(0.55)
    assert eps(1_000_000) == pytest.approx(0.1)
    assert eps(50_000_000) == pytest.approx(0.1)
    np.testing.assert_allclose(eps(np.array([0, 500_000, 2_000_000])), [1.0, 0.55, 0.1])
