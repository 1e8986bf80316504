"""The article's free particle: per-step Jacobian [[1, h], [0, 1]], rollout [[1, T h], [0, 1]]."""

from __future__ import annotations

import numpy as np
import pytest

from diffsim import rollout_jacobian, step_jacobian
from diffsim.systems import (
    free_particle,
    free_particle_parameter_jacobian,
    free_particle_rollout_jacobian,
)


@pytest.mark.parametrize("h", [1 / 60, 1 / 240, 0.1, 0.5])
def test_step_jacobian(h):
    sys = free_particle(h=h)
    for A, _ in (step_jacobian(sys.step, sys.s0, sys.theta), sys.step.jacobian(sys.s0, sys.theta)):
        np.testing.assert_allclose(A, [[1.0, h], [0.0, 1.0]], rtol=1e-14)


@pytest.mark.parametrize("T", [1, 2, 7, 60, 1000])
@pytest.mark.parametrize("h", [1 / 60, 0.01, 0.25])
@pytest.mark.parametrize("method", ["autodiff", "product", "forward", "adjoint"])
def test_rollout_jacobian_is_elapsed_time(T, h, method):
    sys = free_particle(h=h)
    J, Ja = rollout_jacobian(sys.step, sys.s0, sys.theta, T, method=method)
    np.testing.assert_allclose(J, [[1.0, T * h], [0.0, 1.0]], rtol=1e-12)
    np.testing.assert_allclose(J, free_particle_rollout_jacobian(T, h), rtol=1e-12)
    np.testing.assert_allclose(Ja, free_particle_parameter_jacobian(T, h), rtol=1e-12)


def test_article_number():
    sys = free_particle(h=1 / 60)
    J, _ = rollout_jacobian(sys.step, sys.s0, sys.theta, 2)
    assert round(float(J[0, 1]), 4) == 0.0333
