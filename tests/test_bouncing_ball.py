"""Bouncing ball: naive vs time-of-impact gradients against the analytic derivative."""

from __future__ import annotations

import jax
import jax.numpy as jnp
import pytest

from diffsim import systems
from diffsim.systems import _bouncing_ball as bb

KEYS = ("dy_dy0", "dy_dvy0", "dy_de", "dvy_dy0", "dvy_dvy0", "dvy_de")


def test_closed_form_derivatives_match_autodiff_of_closed_form():
    for g in (0.0, 9.81):
        args = (jnp.asarray(1.0), jnp.asarray(-1.0), jnp.asarray(0.8))
        t = 2.0 if g == 0 else 0.6
        D = bb.bouncing_ball_derivatives_closed_form(*args, g, t)
        J = jax.jacfwd(
            lambda a, b, c, g=g, t=t: jnp.stack(bb.bouncing_ball_closed_form(a, b, c, g, t)),
            (0, 1, 2),
        )(*args)
        for i, k in enumerate(("y0", "vy0", "e")):
            assert float(D[f"dy_d{k}"]) == pytest.approx(float(J[i][0]), rel=1e-12, abs=1e-14)
            assert float(D[f"dvy_d{k}"]) == pytest.approx(float(J[i][1]), rel=1e-12, abs=1e-14)


@pytest.mark.parametrize("y0, vy0, e", [(1.0, -1.0, 0.8), (0.37, -2.5, 0.5), (2.0, -1.5, 1.0)])
def test_g0_toi_is_exact_and_naive_is_wrong(y0, vy0, e):
    h, n = 1e-3, 2000
    t = n * h
    yT, _ = systems.bouncing_ball_final_state(y0, vy0, e, 0.0, h=h, num_steps=n, toi=True)
    assert float(yT) == pytest.approx(-e * vy0 * t - e * y0, abs=1e-9)
    toi = systems.bouncing_ball_final_state_jacobian(y0, vy0, e, 0.0, h=h, num_steps=n, toi=True)
    naive = systems.bouncing_ball_final_state_jacobian(y0, vy0, e, 0.0, h=h, num_steps=n, toi=False)
    exact = bb.bouncing_ball_derivatives_closed_form(y0, vy0, e, 0.0, t)
    for k in KEYS:
        assert float(toi[k]) == pytest.approx(float(exact[k]), abs=1e-9)
    # naive: ∂y_T/∂y0 = 0 instead of -e (a 100 % error); ∂y_T/∂vy0 = -e (T - t_k) instead of
    # -e T, where t_k >= t* is the step at which the ball was found below the ground
    assert float(naive["dy_dy0"]) == 0.0 and float(exact["dy_dy0"]) == pytest.approx(-e)
    t_star = -y0 / vy0
    assert float(naive["dy_dvy0"]) == pytest.approx(-e * (t - t_star), abs=e * 2 * h)


def test_gravity_single_bounce_toi_right_naive_wrong_sign():
    y0, vy0, e, g, h, n = 1.0, -1.0, 0.8, 9.81, 1e-4, 6000
    t = n * h
    ts, t2 = (float(a) for a in bb.bouncing_ball_bounce_window(y0, vy0, e, g))
    assert ts < t < t2
    toi = systems.bouncing_ball_final_state_jacobian(y0, vy0, e, g, h=h, num_steps=n, toi=True)
    naive = systems.bouncing_ball_final_state_jacobian(y0, vy0, e, g, h=h, num_steps=n, toi=False)
    exact = bb.bouncing_ball_derivatives_closed_form(y0, vy0, e, g, t)
    for k in KEYS:  # O(h) agreement
        assert float(toi[k]) == pytest.approx(float(exact[k]), rel=2e-3, abs=2e-3), k
    # the naive gradient: ∂v_T/∂y0 = 0 instead of g(1+e)/w ≈ 3.89, and ∂v_T/∂vy0 = -e
    # instead of (e vy0 + g t*)/w ≈ +0.60 -- the wrong sign
    assert float(naive["dvy_dy0"]) == 0.0 and float(exact["dvy_dy0"]) > 3.8
    assert float(naive["dvy_dvy0"]) == pytest.approx(-e)
    assert float(exact["dvy_dvy0"]) > 0.5
    assert float(naive["dy_dy0"]) == 0.0 and float(exact["dy_dy0"]) > 0.1


def test_toi_error_is_first_order_in_h():
    y0, vy0, e, g = 1.0, -1.0, 0.8, 9.81
    errs = []
    for h in (1e-2, 1e-3):
        n = round(0.6 / h)
        toi = systems.bouncing_ball_final_state_jacobian(y0, vy0, e, g, h=h, num_steps=n, toi=True)
        exact = bb.bouncing_ball_derivatives_closed_form(y0, vy0, e, g, n * h)
        errs.append(max(abs(float(toi[k] - exact[k])) for k in KEYS))
    assert errs[1] < 0.2 * errs[0]


def test_toi_gradient_matches_central_fd_of_simulator():
    kw = {"h": 1e-2, "num_steps": 60, "toi": True}
    J = systems.bouncing_ball_final_state_jacobian(1.0, -1.0, 0.8, 9.81, **kw)
    d = 1e-6
    for i, k in enumerate(("y0", "vy0", "e")):
        p = [1.0, -1.0, 0.8]
        p_hi, p_lo = list(p), list(p)
        p_hi[i] += d
        p_lo[i] -= d
        fd = (
            systems.bouncing_ball_final_state(*p_hi, 9.81, **kw)[0]
            - systems.bouncing_ball_final_state(*p_lo, 9.81, **kw)[0]
        ) / (2 * d)
        assert float(J[f"dy_d{k}"]) == pytest.approx(float(fd), rel=1e-6, abs=1e-8)


def test_system_and_bad_input():
    sys = systems.bouncing_ball(h=0.01, g=0.0)
    assert sys.theta["e"] == 0.8 and sys.loss(sys.s0) == 1.0
    with pytest.raises(ValueError, match="e"):
        systems.bouncing_ball(e=1.2)
    with pytest.raises(ValueError, match="h"):
        systems.bouncing_ball_final_state(1.0, -1.0, 0.5, h=-1e-3)
    with pytest.raises(ValueError, match="g"):
        systems.bouncing_ball_final_state(1.0, -1.0, 0.5, float("nan"))
    with pytest.raises(ValueError, match="num_steps"):
        systems.bouncing_ball_final_state(1.0, -1.0, 0.5, num_steps=0)
