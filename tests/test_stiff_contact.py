"""Stiff penalty contact: the Jacobian grows with k, a fixed step mis-resolves the contact."""

from __future__ import annotations

import jax.numpy as jnp
import numpy as np
import pytest

from diffsim import rollout, systems

H = 1 / 240
DECADES = jnp.array([1e2, 1e3, 1e4, 1e5, 1e6, 1e7, 1e8])


def test_rollout_jacobian_norm_grows_with_stiffness():
    norm = np.asarray(systems.stiff_contact_jacobian_norm(DECADES, h=H))
    assert np.all(np.diff(norm) > 0), norm
    assert norm[-1] / norm[0] > 1e4
    # beyond ωh = 2 the one sampled contact step dominates: ∂v'/∂y = -k h/m, norm ∝ k
    assert norm[-1] / norm[-3] == pytest.approx(100.0, rel=0.05)


def test_soft_contact_is_resolved_stiff_contact_is_not():
    rep = {k: np.asarray(v) for k, v in systems.stiff_contact_bounce_report(DECADES, h=H).items()}
    soft = DECADES <= 1e4  # ωh <= 0.42: many steps per contact
    assert np.all(np.abs(rep["energy_ratio"][soft] - 1) < 0.05)  # c = 0: energy conserved
    assert np.all(rep["contact_duration_steps"][soft] > 5)
    stiff = DECADES >= 1e6  # contact lasts less than a step: one sample, energy blows up
    assert np.all(rep["contact_duration_steps"][stiff] < 1)
    assert np.all(rep["steps_in_contact"][stiff] <= 2)
    assert np.all(rep["energy_ratio"][stiff] > 10)


def test_smaller_step_resolves_the_stiff_contact():
    k = 1e6  # ω = 1000 rad/s: needs h < 2e-3
    bad = float(systems.stiff_contact_bounce_report(k, h=H)["energy_ratio"])
    good = float(systems.stiff_contact_bounce_report(k, h=2e-4, num_steps=5000)["energy_ratio"])
    assert bad > 10 and abs(good - 1) < 0.05


def test_penetration_matches_spring_estimate_when_resolved():
    # v_impact = sqrt(2 g y0); max penetration ≈ v sqrt(m/k) (gravity in contact is tiny)
    sys = systems.stiff_contact(k=1e4, h=1e-4)
    y, _ = rollout(sys.step, sys.s0, sys.theta, 6000)
    expected = np.sqrt(2 * 9.81) * np.sqrt(1 / 1e4)
    assert float(-y.min()) == pytest.approx(expected, rel=0.03)


def test_bad_input():
    with pytest.raises(ValueError, match="k"):
        systems.stiff_contact(k=-1.0)
    with pytest.raises(ValueError, match="c"):
        systems.stiff_contact(c=-1.0)
    with pytest.raises(ValueError, match="h"):
        systems.stiff_contact_jacobian_norm(1e3, h=0.0)
    with pytest.raises(ValueError, match="k"):
        systems.stiff_contact_bounce_report(jnp.array([1e3, jnp.nan]))
