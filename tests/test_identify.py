"""System identification (``diffsim.identify``): known parameters recovered from synthetic
recordings made by the same simulator at the true values.

Noise-free data: the model can reproduce the data exactly, so the fit must reach the truth
to the solver's tolerance (stated per test, relative). Noisy data: the 95 % intervals
must cover the truth; with fixed seeds the count is deterministic, and the check (at least
16 of 20 seeds per parameter; 19 expected) would fail with probability ~1.6 % per parameter
if the intervals had exactly their nominal coverage.
"""

from __future__ import annotations

import math
from typing import NamedTuple

import jax
import jax.numpy as jnp
import numpy as np
import pytest

import diffsim
from diffsim import NotIdentifiableError, Recording, identify, load_recording, save_recording
from diffsim.identification import Parameter, default_observe, parse_parameters, simulate_recording
from diffsim.optimization import status_name
from diffsim.systems import (
    bouncing_ball,
    double_pendulum,
    mass_spring,
    mass_spring_drive,
    nonlinear_spring,
)


def damped_spring(**kw):
    """m ẍ = −k x − c ẋ (the Duffing spring with k3 = 0): a mass-spring-damper."""
    return nonlinear_spring(h=0.01, m=1.0, k=4.0, k3=0.0, c=0.3, x0=1.0, **kw)


def rel_err(res, truth):
    return max(abs(res.theta[n] - v) / abs(v) for n, v in truth.items())


# --- noise-free: recovered to tight tolerance --------------------------------------------------


def test_mass_spring_damper_noise_free():
    sys = damped_spring()
    rec = simulate_recording(sys.step, sys.s0, sys.theta, 400)
    start = dict(sys.theta, k=jnp.array(2.5), c=jnp.array(0.8))
    res = identify(sys.step, rec, start, "k, c", bounds={"k": (0, 20), "c": (0, 5)})
    assert res.converged, res.message
    assert rel_err(res, {"k": 4.0, "c": 0.3}) < 1e-6
    assert res.residual < 1e-8 < res.residual_start
    assert res.unidentifiable == ()
    assert res.evaluations == res.iterations + 2
    # + the doctor's checks, + the probe at the intervals' scale: the Jacobian (1 + 2) and
    # each parameter moved alone by ±1 and ±2 half-widths (8 rollouts)
    assert res.rollout_equivalents == res.evaluations * 3 + 2 * (21 + 2) + (1 + 2 + 8)
    assert res.jacobian_trusted is True
    # the history starts at the start and its cost never rises (accepted iterates)
    assert res.history["theta"].shape == (res.iterations, 2)
    assert np.allclose(res.history["theta"][0], [2.5, 0.8])
    assert np.all(np.diff(res.history["cost"]) <= 1e-12)


def test_driven_chain_six_parameters_noise_free():
    """The three-mass chain of ``mass_spring`` with its known drive: all masses and
    stiffnesses (the drive fixes the scale), masses 20 % heavier and springs 1/1.2 as stiff
    at the start (every frequency 1.2x too low; 3 s of motion). From 20 % off in opposite
    directions over 6 s, LM stalled at 100 steps in a local minimum: oscillators' fits are
    multimodal in frequency, which is what multiple shooting (not implemented) is for."""
    sys = mass_spring(3)
    u = mass_spring_drive(300, 0.01)
    rec = simulate_recording(sys.step, sys.s0, sys.theta, 300, inputs=u)
    start = {"m": sys.theta["m"] * 1.2, "k": sys.theta["k"] / 1.2}
    params = [Parameter("m", i, lower=0.0) for i in range(3)] + [
        Parameter("k", i, lower=0.0) for i in range(3)
    ]
    res = identify(sys.step, rec, start, params)
    assert res.converged, res.message
    truth = {f"m[{i}]": float(sys.theta["m"][i]) for i in range(3)}
    truth |= {f"k[{i}]": float(sys.theta["k"][i]) for i in range(3)}
    assert rel_err(res, truth) < 1e-6
    assert np.allclose(res.theta_full["m"], sys.theta["m"], rtol=1e-6)


def test_bouncing_ball_restitution_and_gravity_noise_free():
    """Contact (time-of-impact restitution): e and g from heights over three bounces."""
    sys = bouncing_ball(h=1e-3, y0=1.0, vy0=0.0, g=9.81, e=0.8)
    rec = simulate_recording(sys.step, sys.s0, sys.theta, 2000, observe=lambda s: {"qpos": s[0]})
    start = {"e": jnp.array(0.7), "g": jnp.array(9.0)}
    res = identify(
        sys.step,
        rec,
        start,
        "e, g",
        observe=lambda s: {"qpos": s[0]},
        bounds={"e": (0.0, 1.0), "g": (0.0, math.inf)},
    )
    assert res.converged, res.message
    assert rel_err(res, {"e": 0.8, "g": 9.81}) < 1e-6
    assert 0.0 < res.interval_low["e"] <= res.theta["e"] <= res.interval_high["e"] < 1.0
    assert res.jacobian_trusted is True  # time-of-impact contact: FD agrees at θ̂


def test_missing_samples_and_several_recordings_of_different_lengths():
    sys = damped_spring()
    long = simulate_recording(sys.step, sys.s0, sys.theta, 300)
    short = simulate_recording(sys.step, (jnp.array(-0.5), jnp.array(1.0)), sys.theta, 120)
    q = np.array(long.signals["qpos"])
    q[1::3] = np.nan  # a third of the positions not measured
    long = Recording(long.s0, {"qpos": q, "qvel": long.signals["qvel"]}, time=long.time)
    start = dict(sys.theta, k=jnp.array(3.0), c=jnp.array(0.5))
    res = identify(sys.step, [long, short], start, "k, c")
    assert res.converged, res.message
    assert res.num_samples == long.num_samples + short.num_samples
    assert res.num_samples == (300 - 100) + 300 + 2 * 120
    assert rel_err(res, {"k": 4.0, "c": 0.3}) < 1e-6


def test_file_round_trip_npz_and_csv(tmp_path):
    sys = mass_spring(2)
    u = mass_spring_drive(200, 0.01)
    rec = simulate_recording(sys.step, sys.s0, sys.theta, 200, inputs=u)
    for name in ("rec.npz", "rec.csv"):
        path = tmp_path / name
        save_recording(path, rec)
        back = load_recording(path, control=lambda c: c[:, 0])  # the chain's u is a scalar
        assert back.num_steps == 200
        assert np.allclose(back.signals["qpos"], rec.signals["qpos"], rtol=1e-12, atol=1e-15)
        assert np.allclose(np.ravel(back.inputs), np.ravel(u), rtol=1e-12, atol=1e-15)
        start = dict(sys.theta, k=sys.theta["k"] * 1.3)
        res = identify(sys.step, back, start, "k[0], k[1]")
        assert rel_err(res, {"k[0]": 20.0, "k[1]": 30.0}) < 1e-6


# --- noisy: the 95 % intervals cover the truth -------------------------------------------------


def _coverage(num_seeds: int, sigma: float = 0.02) -> tuple[dict[str, int], list[float]]:
    sys = damped_spring()
    truth = {"k": 4.0, "c": 0.3}
    start = dict(sys.theta, k=jnp.array(3.0), c=jnp.array(0.5))
    hits = dict.fromkeys(truth, 0)
    rel_se = []
    for seed in range(num_seeds):
        rec = simulate_recording(
            sys.step, sys.s0, sys.theta, 400, noise=sigma, key=jax.random.key(seed)
        )
        res = identify(sys.step, rec, start, "k, c", bounds={"k": (0, 20), "c": (0, 5)})
        assert res.converged, res.message
        # the residual RMS estimates the noise's σ (N = 800 samples: within 10 %)
        assert abs(res.residual - sigma) < 0.1 * sigma
        for n, v in truth.items():
            hits[n] += res.interval_low[n] <= v <= res.interval_high[n]
        rel_se.append(res.std_error["c"] / 0.3)
    return hits, rel_se


def test_noisy_intervals_cover_the_truth():
    hits, rel_se = _coverage(20)
    assert min(hits.values()) >= 16, hits
    assert 0 < max(rel_se) < 0.5  # the intervals are informative, not just wide


@pytest.mark.slow
def test_noisy_intervals_cover_the_truth_in_90_percent_of_50_fits():
    """The issue's goal: coverage ≥ 90 % over 50 seeded fits (45 of 50; 47.5 expected)."""
    hits, _ = _coverage(50)
    assert min(hits.values()) >= 45, hits


# --- identifiability, convergence, bad input ------------------------------------------------


def test_unidentifiable_parameters_are_named():
    """Without a known force, m ẍ = −k x − c ẋ only sees k/m and c/m: fitting m, k and c
    together is rank-deficient, and the error names all three."""
    sys = damped_spring()
    rec = simulate_recording(sys.step, sys.s0, sys.theta, 300)
    with pytest.raises(NotIdentifiableError, match="do not determine m, k, c") as err:
        identify(sys.step, rec, sys.theta, "m, k, c")
    assert err.value.parameters == ("m", "k", "c")
    assert min(err.value.singular_values) < 1e-7


def test_parameter_without_effect_is_named():
    """k3 multiplies x³ but the recording starts at rest at x = 0: it never acts."""
    sys = nonlinear_spring(h=0.01, x0=0.0, v0=0.0)
    rec = simulate_recording(sys.step, sys.s0, sys.theta, 50)
    with pytest.raises(NotIdentifiableError) as err:
        identify(sys.step, rec, sys.theta, "k, k3")
    assert "k3" in err.value.parameters


def test_not_converged_reports_the_last_finite_iterate():
    sys = damped_spring()
    rec = simulate_recording(sys.step, sys.s0, sys.theta, 300)
    start = dict(sys.theta, k=jnp.array(2.0), c=jnp.array(0.9))
    res = identify(sys.step, rec, start, "k, c", max_steps=2)
    assert not res.converged and "did not converge" in res.message
    assert status_name(res.status) == "max_steps" and res.to_dict()["status"] == "max_steps"
    # the core and the stats (issue 48 item 5): each stat read by name, nothing else
    assert res.iterations == res.stats["iterations"] > 0 and res.start == res.stats["start"]
    with pytest.raises(AttributeError, match="no attribute or stat 'iteration'"):
        res.iteration  # noqa: B018
    assert all(math.isfinite(v) for v in res.theta.values())
    assert "NOT converged" in repr(res)


# --- multiple shooting -------------------------------------------------------------------------


@pytest.mark.slow
def test_multiple_shooting_recovers_the_truth_with_continuous_windows():
    """A Duffing spring (k, c from 3 s of noise-free x and v), cut into 6 windows of 50
    steps whose starts are fitted too: θ to 1e-9 relative, every window's end meets the
    next one's start (largest defect below 1e-9), and the result says how it was fitted."""
    sys = nonlinear_spring(h=0.01, m=1.0, k=4.0, k3=2.0, c=0.3)
    rec = simulate_recording(sys.step, sys.s0, sys.theta, 300)
    start = dict(sys.theta, k=jnp.array(3.0), c=jnp.array(0.1))
    res = identify(sys.step, rec, start, "k, c", bounds={"k": (0, 10), "c": (0, 1)}, shooting=50)
    assert res.converged, res.message
    assert rel_err(res, {"k": 4.0, "c": 0.3}) < 1e-9, res
    assert res.windows == 6 and res.continuity_defect < 1e-9, res
    assert (
        res.to_dict()["windows"] == 6 and "multiple shooting (6 windows)" in res.to_dict()["method"]
    )
    assert "multiple shooting: 6 windows" in repr(res)
    # 2 parameters and 5 starts of 2 numbers: one tangent each per evaluation
    # + the doctor's two checks, + the probe: its Jacobian (1 + 12) and 8 rollouts
    assert res.rollout_equivalents == (
        res.evaluations * (1 + 2 + 10) + 2 * (10 * 2 + 1 + 2 + 10) + (1 + 12 + 8)
    )


def test_multiple_shooting_starts_from_recorded_positions_alone():
    """A recording of positions only (no ``qvel``): the window starts' velocities are the
    backward differences of the recorded positions, (x_t − x_{t−1})/h — exactly the state
    under semi-implicit Euler (x_t = x_{t−1} + h·v_t), so the first guess of every start
    equals the true state to round-off, where the simulation at the start θ would be off;
    the fit recovers θ to 1e-9 relative."""
    from diffsim.identification._shooting import _default_starts

    sys = nonlinear_spring(h=0.01, m=1.0, k=4.0, k3=2.0, c=0.3)
    full = simulate_recording(sys.step, sys.s0, sys.theta, 300)
    rec = Recording(full.s0, {"qpos": full.signals["qpos"]})
    start = dict(sys.theta, k=jnp.array(3.0), c=jnp.array(0.1))
    res = identify(sys.step, rec, start, "k, c", bounds={"k": (0, 10), "c": (0, 1)},
                   shooting=50, trust="off")  # fmt: skip
    assert res.converged, res.message
    assert rel_err(res, {"k": 4.0, "c": 0.3}) < 1e-9, res
    assert res.windows == 6 and res.continuity_defect < 1e-9, res
    # the first guess of a start: the velocity the recorded positions imply
    _, velocity = _default_starts(sys.step, rec, default_observe)
    qvel = np.asarray(full.signals["qvel"])
    for t in (50, 100, 250, 300):
        np.testing.assert_allclose(velocity(rec, t), qvel[t], rtol=0, atol=1e-12)
    # a recording with velocities uses them; a step without h gets no differences
    assert _default_starts(sys.step, full, default_observe)[1] is None
    assert _default_starts(lambda s, th: s, rec, default_observe)[1] is None


def test_multiple_shooting_neither_fits_nor_ties_the_solver_memory():
    """A state type naming a field as solver memory (``SOLVER_MEMORY``, as an MJX state's
    warm start): multiple shooting fits only the physical fields at the window starts and
    asks only them to be continuous — the step writes a counter into the memory field, which
    nothing observed depends on: fitted, it would add an unknown per window that only its
    own continuity defect determines (as an MJX warm start would); θ to 1e-9 relative."""

    class State(NamedTuple):
        qpos: jax.Array
        qvel: jax.Array
        memory: jax.Array

        SOLVER_MEMORY = ("memory",)

    sys = nonlinear_spring(h=0.01, m=1.0, k=4.0, k3=2.0, c=0.3)

    def step(s, theta):
        x, v = sys.step((s.qpos, s.qvel), theta)
        return State(x, v, s.memory + 1.0)

    s0 = State(jnp.asarray(sys.s0[0]), jnp.asarray(sys.s0[1]), jnp.asarray(0.0))
    rec = simulate_recording(step, s0, sys.theta, 200)
    start = dict(sys.theta, k=jnp.array(3.0), c=jnp.array(0.1))
    res = identify(step, rec, start, "k, c", bounds={"k": (0, 10), "c": (0, 1)},
                   shooting=50, trust="off")  # fmt: skip
    assert res.converged and rel_err(res, {"k": 4.0, "c": 0.3}) < 1e-9, res
    assert res.windows == 4 and res.continuity_defect < 1e-9, res
    # 2 parameters and 3 starts of 2 physical numbers (not 3): one tangent each
    assert res.rollout_equivalents == res.evaluations * (1 + 2 + 6)


@pytest.mark.slow
def test_multiple_shooting_over_recordings_of_different_lengths():
    """Two recordings (100 and 60 steps, different initial states) in windows of 25: the
    shorter one's last window lies past its end (its start tied only by continuity); θ to
    1e-9 relative, defects below 1e-9."""
    sys = nonlinear_spring(h=0.01, m=1.0, k=4.0, k3=2.0, c=0.3)
    r1 = simulate_recording(sys.step, sys.s0, sys.theta, 100)
    r2 = simulate_recording(sys.step, (jnp.asarray(-0.5), jnp.asarray(1.0)), sys.theta, 60)
    start = dict(sys.theta, k=jnp.array(3.0), c=jnp.array(0.1))
    res = identify(
        sys.step, [r1, r2], start, "k, c", bounds={"k": (0, 10), "c": (0, 1)}, shooting=25
    )
    assert res.converged and rel_err(res, {"k": 4.0, "c": 0.3}) < 1e-9, res
    assert res.windows == 4 and res.continuity_defect < 1e-9, res


@pytest.mark.slow
def test_multiple_shooting_fits_a_chaotic_recording_single_shooting_cannot():
    """20 s of a chaotic double pendulum (RK4, h = 0.01; angles and rates with 1e-3 noise),
    g from 9.0: one rollout over the whole recording is so rough in g that
    Levenberg–Marquardt does not leave the start (measured: 9.000001, residual RMS 12), while
    windows of 50 steps starting from the recorded states (the default ``state_of`` for
    ``(x, v)`` states) reach the truth (measured: 9.8100015, RMS 1.0e-3 = the noise) with
    its 95 % interval covering 9.81."""
    dp = double_pendulum(h=0.01)
    rec = simulate_recording(dp.step, dp.s0, dp.theta, 2000, noise=1e-3, key=jax.random.key(0))
    start = {"g": jnp.array(9.0)}
    single = identify(dp.step, rec, start, "g", bounds={"g": (0, 30)}, trust="off")
    assert abs(single.theta["g"] - 9.81) > 0.5 and single.residual > 100 * 1e-3, single
    shot = identify(dp.step, rec, start, "g", bounds={"g": (0, 30)}, shooting=50)
    assert shot.converged and abs(shot.theta["g"] - 9.81) < 1e-4, shot
    assert shot.interval_low["g"] < 9.81 < shot.interval_high["g"], shot
    assert abs(shot.residual - 1e-3) < 1e-4 and shot.continuity_defect < 1e-4, shot
    # the fit as a user runs it (trust="act", no windows chosen): the doctor's check at the
    # start fails, and the fit switches to the longest windows whose Jacobian it trusts
    # (T/4 = 500, T/16 = 125, T/64 = 31 tried: the longest that the doctor trusts and
    # whose residuals stay nearly linear 5 % away; where those do not converge within
    # max_steps, the next shorter from their estimate — measured: 125, then 31)
    auto = identify(dp.step, rec, start, "g", bounds={"g": (0, 30)})
    assert auto.actions and "multiple shooting" in auto.actions[0], auto
    assert auto.windows > 1 and auto.jacobian == "exact", auto
    assert auto.converged and abs(auto.theta["g"] - 9.81) < 1e-4, auto
    assert auto.interval_low["g"] < 9.81 < auto.interval_high["g"], auto


def test_multiple_shooting_bad_input():
    sys = damped_spring()
    rec = simulate_recording(sys.step, sys.s0, sys.theta, 20)
    with pytest.raises(
        ValueError, match="shooting must be fewer steps than the recordings' T = 20"
    ):
        identify(sys.step, rec, sys.theta, "k", shooting=20)
    with pytest.raises(ValueError, match="shooting must be"):
        identify(sys.step, rec, sys.theta, "k", shooting=0)
    with pytest.raises(ValueError, match="continuity_weight must be finite and > 0"):
        identify(sys.step, rec, sys.theta, "k", shooting=5, continuity_weight=-1.0)
    with pytest.raises(ValueError, match="state_of gives a state of 3 numbers, the step's has 2"):
        identify(sys.step, rec, sys.theta, "k", shooting=5,
                 state_of=lambda row: jnp.zeros(3))  # fmt: skip


def test_bad_input_names_the_argument():
    sys = damped_spring()
    rec = simulate_recording(sys.step, sys.s0, sys.theta, 20)
    th = sys.theta
    cases = [
        ((sys.step, rec, th, ""), "at least one"),
        ((sys.step, rec, th, []), "at least one"),
        ((sys.step, rec, th, "spring"), "no field 'spring'; fields: m, k, k3, c"),
        ((sys.step, rec, th, "k[3]"), "outside theta"),
        (
            (sys.step, rec, th, [Parameter("k", lower=5.0)]),
            r"strictly inside its bounds \(5, inf\)",
        ),
        ((sys.step, rec, th, [Parameter("k", start=float("nan"))]), "start must be finite"),
        ((sys.step, [], th, "k"), "at least one Recording"),
        ((sys.step, rec, dict(th, c=jnp.array(jnp.nan)), "k"), r"theta\['c'\] must be finite"),
    ]
    for args, match in cases:
        with pytest.raises(ValueError, match=match):
            identify(*args)
    with pytest.raises(ValueError, match="bounds name 'm', which are not fitted"):
        identify(sys.step, rec, th, "k", bounds={"m": (0, 1)})
    bad = Recording(rec.s0, {"qpos": np.array(rec.signals["qpos"])[:, :1] * np.inf})
    with pytest.raises(ValueError, match=r"recordings\[0\].signals\['qpos'\] holds inf"):
        identify(sys.step, bad, th, "k")
    wrong_time = Recording(rec.s0, rec.signals, time=0.02 * np.arange(21))
    with pytest.raises(ValueError, match=r"not sampled at the step's h = 0\.01"):
        identify(sys.step, wrong_time, th, "k")
    wide = Recording(rec.s0, {"qpos": np.zeros((21, 2))})
    with pytest.raises(
        ValueError, match="'qpos': the recording has 2 columns, the model's state gives 1"
    ):
        identify(sys.step, wide, th, "k")
    sensors = Recording(rec.s0, {"sensordata": np.zeros((21, 1))})
    with pytest.raises(ValueError, match="sensordata, which observe does not give"):
        identify(sys.step, sensors, th, "k")
    tiny = Recording(rec.s0, {"qpos": np.array([[1.0], [0.99]])})
    with pytest.raises(ValueError, match="1 observed samples for 2 parameters"):
        identify(sys.step, tiny, th, "k, c")
    short_u = Recording(rec.s0, rec.signals, inputs=np.zeros(5))
    with pytest.raises(ValueError, match=r"inputs must have leading axis T = 20"):
        identify(sys.step, short_u, th, "k")


def test_parse_parameters_forms():
    th = {"m": jnp.ones(3), "g": jnp.zeros((2, 3)), "e": jnp.array(0.5)}
    ps = parse_parameters("m[2], g[1,0], e", th, bounds={"e": (0, 1)}, start={"m[2]": 2.0})
    assert [(p.field, p.index) for p in ps] == [("m", (2,)), ("g", (1, 0)), ("e", ())]
    assert ps[0].start == 2.0 and (ps[2].lower, ps[2].upper) == (0.0, 1.0)
    with pytest.raises(ValueError, match="name one element"):
        parse_parameters("g", th)
    with pytest.raises(ValueError, match="pass the MuJoCo model"):
        parse_parameters("m:box", th)
    with pytest.raises(ValueError, match="must read 'field'"):
        parse_parameters("m[x]", th)


def test_public_names_exported():
    """What a user composes is at the top level; a recording's parts in the namespace."""
    for name in ("identify", "Recording", "IdentifyResult", "load_recording", "save_recording"):
        assert name in diffsim.__all__
    for name in ("Parameter", "parse_parameters", "simulate_recording", "default_observe"):
        assert name not in diffsim.__all__ and name in diffsim.identification.__all__
        assert getattr(diffsim.identification, name).__name__ == name


def _half_slope_spring():
    """A user step whose derivative lacks half a term (value k·x, derivative ½ x through
    ``stop_gradient``), its recording at k = 4 and the start k = 3."""
    h = 0.01

    def step(s, th):
        k = 0.5 * th["k"] + 0.5 * jax.lax.stop_gradient(th["k"])  # value k, slope ½
        x, v = s
        v = v - h * (k * x + 0.3 * v)
        return (x + h * v, v)

    s0 = (jnp.array(1.0), jnp.array(0.0))
    return step, simulate_recording(step, s0, {"k": jnp.array(4.0)}, 300), {"k": jnp.array(3.0)}


def test_a_wrong_jacobian_is_reported_not_trusted():
    """trust="report": the doctor's check at θ̂ disagrees with central differences, and the
    result says its intervals rest on a Jacobian it does not trust."""
    step, rec, start = _half_slope_spring()
    res = identify(step, rec, start, "k", bounds={"k": (0, 20)}, trust="report")
    assert res.jacobian_trusted is False and res.actions == ()
    assert "does not trust" in res.message and "does not trust" in repr(res)
    assert math.isfinite(res.theta["k"])


@pytest.mark.slow
def test_a_wrong_jacobian_is_replaced_by_the_smoothed_one():
    """trust="act" (the default): the check fails at the start, no window length mends it
    (the error is in the step, not the horizon), so the fit switches to the smoothed
    Jacobian, whose column is a Gaussian average of central differences: it reaches the
    truth (noise-free data: 1e-6 relative) and says the intervals come from it."""
    step, rec, start = _half_slope_spring()
    res = identify(step, rec, start, "k", bounds={"k": (0, 20)})
    assert res.jacobian == "smoothed" and len(res.actions) == 1, res
    assert "smoothed Jacobian" in res.actions[0] and "at the start" in res.actions[0]
    assert res.jacobian_trusted is False and "come from the smoothed Jacobian" in res.message
    assert res.converged and abs(res.theta["k"] - 4.0) < 4e-6, res
    assert res.to_dict()["method"].startswith("Levenberg-Marquardt (optimistix), smoothed")


def test_a_plateau_is_fitted_with_the_smoothed_jacobian():
    """A stiffness read through a quantiser (steps of 0.25): the exact derivative is 0
    everywhere, so the exact Jacobian is rank-deficient at the start (trust="report":
    NotIdentifiableError), while moving k by its 5 % smoothing scale changes the data. With
    trust="act" the fit switches to the smoothed Jacobian and lands on the truth's stair:
    the data are reproduced exactly for k in [3.875, 4.125)."""
    h = 0.01

    def step(s, th):
        k = jnp.round(4.0 * th["k"]) / 4.0
        x, v = s
        v = v - h * (k * x + 0.3 * v)
        return (x + h * v, v)

    s0 = (jnp.array(1.0), jnp.array(0.0))
    rec = simulate_recording(step, s0, {"k": jnp.array(4.0)}, 150)
    start = {"k": jnp.array(2.9)}
    with pytest.raises(NotIdentifiableError, match="do not determine k"):
        identify(step, rec, start, "k", bounds={"k": (0, 20)}, trust="report")
    res = identify(step, rec, start, "k", bounds={"k": (0, 20)})
    assert res.jacobian == "smoothed" and "a plateau" in res.actions[0], res
    assert 3.875 <= res.theta["k"] < 4.125, res
    assert res.residual < 1e-12, res
    assert all(math.isfinite(v) for v in (res.interval_low["k"], res.interval_high["k"]))


def _stepped_ball():
    """A ball dropped from 1 m with its contact found at the time steps (h = 10 ms): a step
    that ends below the floor reflects x and v, scaled by e. A bounce that moves from one
    time step to the next as g or e change moves the trajectory by a jump, so the residual
    is a staircase of smooth pieces; 200 steps (four bounces) of noise-free heights."""
    h = 0.01

    def step(s, th):
        x, v = s
        v = v - th["g"] * h
        x = x + h * v
        hit = x < 0
        return (jnp.where(hit, -th["e"] * x, x), jnp.where(hit, -th["e"] * v, v))

    s0 = (jnp.array(1.0), jnp.array(0.0))
    rec = simulate_recording(step, s0, {"g": jnp.array(9.81), "e": jnp.array(0.8)}, 200)
    return step, Recording(rec.s0, {"qpos": rec.signals["qpos"]})


def _stepped_ball_cost(g, e):
    """The same ball in plain Python floats (an independent implementation): the cost
    ‖x(g, e) − x(9.81, 0.8)‖² over the 200 recorded heights."""

    def heights(g, e):
        x, v, out = 1.0, 0.0, []
        for _ in range(200):
            v -= g * 0.01
            x += 0.01 * v
            if x < 0:
                x, v = -e * x, -e * v
            out.append(x)
        return np.array(out)

    return float(np.sum((heights(g, e) - heights(9.81, 0.8)) ** 2))


def test_a_fit_held_on_a_step_of_the_residual_is_moved_off_it_by_the_probe():
    """The stepped ball from g = 10.1663, e = 0.8033: Levenberg–Marquardt stops where the
    smooth piece it is on has its minimum (the doctor trusts the exact Jacobian there; with
    trust="off" the fit ends 3.9 % from the truth, intervals and all), but the cost is
    lower one bounce-step away, inside the intervals the fit reports. trust="act" probes
    each parameter alone at ±1 and ±2 of its 95 % half-widths, finds the lower cost (checked
    here against an independent implementation: the probe's point is lower than the
    trapped estimate by more than PROBE_GAIN), fits again from there and reaches the truth
    (1e-9 relative)."""
    import re

    from diffsim.identification import PROBE_GAIN

    step, rec = _stepped_ball()
    start = {"g": jnp.array(10.1663), "e": jnp.array(0.8033)}
    bounds = {"g": (1, 20), "e": (0.1, 1)}
    off = identify(step, rec, start, "g, e", bounds=bounds, trust="off")
    assert off.converged and off.actions == ()
    assert abs(off.theta["g"] - 9.81) / 9.81 > 0.01, off
    res = identify(step, rec, start, "g, e", bounds=bounds)
    assert res.converged and res.jacobian_trusted is True and res.jacobian == "exact", res
    assert abs(res.theta["g"] - 9.81) < 1e-8 * 9.81 and abs(res.theta["e"] - 0.8) < 1e-9, res
    assert len(res.actions) == 1 and "half-widths" in res.actions[0], res.actions
    # the probe's note: which parameter moved, from where to where; its cost is lower
    name, a, b = re.search(r"estimate (\w) moved .*?\(([-\d.e+]+) → ([-\d.e+]+)\)",
                           res.actions[0]).groups()  # fmt: skip
    trapped = {"g": off.theta["g"], "e": off.theta["e"]}
    assert math.isclose(float(a), trapped[name], rel_tol=1e-7)
    moved = dict(trapped, **{name: float(b)})
    c_trapped, c_moved = _stepped_ball_cost(**trapped), _stepped_ball_cost(**moved)
    assert c_moved < (1 - PROBE_GAIN) * c_trapped, (c_moved, c_trapped)
    # the trapped fit's own intervals exclude the truth: what the probe guards against
    assert not (off.interval_low["g"] <= 9.81 <= off.interval_high["g"]), off


def test_an_integer_start_is_fitted_as_a_real():
    """theta given as integers (jnp.array(10)): fitted as reals, not rounded to a zero
    derivative (which would read as "the recordings do not determine g")."""
    step, rec = _stepped_ball()
    res = identify(step, rec, {"g": jnp.array(10), "e": jnp.array(0.8)}, "g",
                   bounds={"g": (1, 20)})  # fmt: skip
    assert res.converged and abs(res.theta["g"] - 9.81) < 1e-8, res


def test_trust_must_be_one_of_its_values():
    sys = damped_spring()
    rec = simulate_recording(sys.step, sys.s0, sys.theta, 20)
    with pytest.raises(ValueError, match="trust must be one of 'act', 'report', 'off'"):
        identify(sys.step, rec, sys.theta, "k", trust="yes")


def test_trust_strategy_objects_are_the_names():
    """``trust=`` takes the strategies ``Off()``, ``Report()``, ``Act()`` or their names:
    the same fit either way."""
    from diffsim.identification import Act, Off, Report, as_trust

    assert (as_trust("off"), as_trust("report"), as_trust("act")) == (Off(), Report(), Act())
    sys = damped_spring()
    rec = simulate_recording(sys.step, sys.s0, sys.theta, 100)
    start = dict(sys.theta, k=jnp.array(3.0))
    for name, obj in (("off", Off()), ("report", Report())):
        a = identify(sys.step, rec, start, "k", trust=name)
        b = identify(sys.step, rec, start, "k", trust=obj)
        assert a.theta == b.theta and a.jacobian_trusted == b.jacobian_trusted, (a, b)
        assert a.rollout_equivalents == b.rollout_equivalents
    assert a.jacobian_trusted is True


def test_smoothed_jacobian_is_exact_on_a_linear_response_and_zero_for_no_effect():
    """The smoothed Jacobian's column is the least-squares slope of antithetic differences
    over fixed Gaussian draws: for residuals linear in a parameter (a constant acceleration
    a: positions and velocities are linear in it) it equals the exact column to rounding,
    whatever the draws, and a parameter the step ignores (b) gets an exactly zero column."""
    from diffsim.identification._data import _stack, _Subset
    from diffsim.identification._problem import _jacobian, _Problem, _smoothed

    h = 0.01

    def step(s, th):
        x, v = s
        return (x + h * v, v + h * th["a"])

    theta = {"a": jnp.array(-2.0), "b": jnp.array(3.0)}
    rec = simulate_recording(step, (jnp.array(0.5), jnp.array(1.0)), theta, 50)
    data, T = _stack([rec], jnp.float64)
    params = parse_parameters("a, b", theta)
    problem = _Problem(step, _Subset(diffsim.identification.default_observe, ("qpos", "qvel")), params, T,
                       theta, data)  # fmt: skip
    x = jnp.array([-1.5, 2.0])
    _, J = _jacobian(problem, x)
    S = _smoothed(problem, x, jnp.float64).smoothed_jacobian(x)
    np.testing.assert_allclose(S[:, 0], J[:, 0], rtol=1e-9, atol=1e-12)
    assert float(jnp.max(jnp.abs(J[:, 0]))) > 0.1
    assert float(jnp.max(jnp.abs(S[:, 1]))) == 0.0


def _reverse_scans(jaxpr) -> int:
    """Scans run backwards (reverse mode's transpose of a rollout) in a jaxpr, nested ones
    included."""
    n = 0
    for eqn in jaxpr.eqns:
        if eqn.primitive.name == "scan" and eqn.params.get("reverse"):
            n += 1
        for v in eqn.params.values():
            for sub in v if isinstance(v, list | tuple) else [v]:
                inner = getattr(sub, "jaxpr", None)
                if inner is not None:
                    n += _reverse_scans(getattr(inner, "jaxpr", inner))
    return n


def test_the_fit_differentiates_the_rollout_in_forward_mode_only():
    """The fit's residuals carry their forward-mode Jacobian (``_forward_mode``): reverse
    mode through them (Optimistix's Jᵀr, a projection's gradient) transposes J @ dx, not the
    rollout — no backward scan in the program, which is what made MuJoCo fits compile
    slowly — and gives the reverse-mode gradient (closed-form check: rtol 1e-12)."""
    from diffsim.identification._problem import _forward_mode

    sys = nonlinear_spring(h=0.01, m=1.0, k=4.0, k3=2.0, c=0.3)

    def residuals(x):
        theta = dict(sys.theta, k=x[0], c=x[1])
        traj = diffsim.rollout(sys.step, sys.s0, theta, 200, include_initial=False)
        return traj[0] - 0.1

    x = jnp.array([3.0, 0.2])
    c = jax.random.normal(jax.random.key(1), (200,))
    direct = lambda x: c @ residuals(x)  # noqa: E731
    wrapped = lambda x: c @ _forward_mode(residuals)(x)  # noqa: E731
    assert _reverse_scans(jax.make_jaxpr(jax.grad(direct))(x).jaxpr) >= 1  # the check can fail
    assert _reverse_scans(jax.make_jaxpr(jax.grad(wrapped))(x).jaxpr) == 0
    np.testing.assert_allclose(jax.grad(wrapped)(x), jax.grad(direct)(x), rtol=1e-12)
    np.testing.assert_allclose(
        jax.jacfwd(_forward_mode(residuals))(x), jax.jacrev(residuals)(x), rtol=1e-12, atol=1e-14
    )
