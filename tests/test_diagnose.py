"""The gradient doctor: check_grad, diagnose's flags on cases with known answers, battery."""

from __future__ import annotations

import json

import jax
import jax.numpy as jnp
import numpy as np
import pytest

from conftest import cli_runner
from diffsim import diagnose, rollout, rollout_jacobian, systems
from diffsim.cli import app
from diffsim.doctor import FLAGS, RULES, Thresholds, check_grad, diagnose_rollout, recommend
from diffsim.systems import SYSTEMS, double_pendulum
from diffsim.systems.battery import PRESETS, battery_table, run_battery

KEY = jax.random.PRNGKey(0)


# --- check_grad --------------------------------------------------------------------------
def test_check_grad_passes_on_a_correct_gradient():
    res = check_grad(
        lambda t: jnp.sum(jnp.sin(t["a"]) * t["b"] ** 2), {"a": jnp.array([0.3, 1.0]), "b": 2.0}
    )
    assert res.ok and res.passed.shape == (3,)
    assert np.max(res.rel_error) < 1e-7  # float64: the best step agrees to ~1e-9
    assert res.evaluations == {"loss": 2 * 5 * 3, "grad": 1}


def test_check_grad_catches_a_wrong_gradient_in_one_component():
    @jax.custom_vjp
    def f(x):
        return jnp.sum(x**2)

    def fwd(x):
        return f(x), x

    def bwd(x, g):  # wrong in component 1: 3x instead of 2x
        return (g * jnp.array([2.0, 3.0, 2.0]) * x,)

    f.defvjp(fwd, bwd)
    res = check_grad(f, jnp.array([1.0, -2.0, 0.5]))
    assert not res.ok
    assert res.passed.tolist() == [True, False, True]
    assert "MISMATCH" in str(res)


def test_check_grad_checks_a_given_gradient():
    """gradient=: the check compares the gradient given (here forward mode's, and a wrong
    one) with the same central differences, and counts no gradient evaluation."""
    loss = lambda t: jnp.sum(jnp.sin(t["a"]) * t["b"] ** 2)  # noqa: E731
    theta = {"a": jnp.array([0.3, 1.0]), "b": jnp.array(2.0)}
    fwd = jax.jacfwd(loss)(theta)
    res = check_grad(loss, theta, gradient=fwd)
    assert res.ok and np.max(res.rel_error) < 1e-7
    assert res.evaluations == {"loss": 2 * 5 * 3, "grad": 0}
    np.testing.assert_allclose(res.autodiff, check_grad(loss, theta).autodiff, rtol=1e-14)
    wrong = {"a": fwd["a"].at[1].multiply(1.5), "b": fwd["b"]}
    bad = check_grad(loss, theta, gradient=wrong)
    assert not bad.ok and bad.passed.tolist() == [True, False, True]
    nan = check_grad(loss, theta, gradient={"a": fwd["a"], "b": jnp.nan})
    assert not nan.ok and nan.passed.tolist() == [True, True, False]
    with pytest.raises(ValueError, match="gradient must have theta's structure"):
        check_grad(loss, theta, gradient={"a": fwd["a"]})
    with pytest.raises(ValueError, match="gradient must have theta's structure"):
        check_grad(loss, theta, gradient={"a": fwd["a"][:1], "b": fwd["b"]})


def test_check_grad_validates_its_arguments():
    with pytest.raises(ValueError, match="steps must be"):
        check_grad(lambda t: t**2, 1.0, steps=(0.1, -1.0))
    with pytest.raises(ValueError, match="theta"):
        check_grad(lambda t: t**2, float("nan"))


# --- diagnose on synthetic cases with known answers ---------------------------------------
def test_smooth_loss_is_trusted_and_cost_is_as_stated():
    d = diagnose(lambda t: jnp.sum((t - 1.0) ** 2 + 0.1 * t**3), jnp.array([0.3, -2.0, 1.5]), KEY)
    assert d.verdict == "trusted" and d.flags == ()
    assert d.exact_gradient_trusted
    # 1 + 2·k·m (k = 3 axes, m = 7 steps) + N loss evaluations, 1 + N gradients, with N the
    # first batch (128): a smooth loss is decided at once
    assert d.evaluations == {
        "loss": 1 + 2 * 3 * 7 + 128,
        "grad": 129,
        "samples": 128,
        "max_samples": 2048,
    }
    assert "exact gradient" in d.recommendation


def test_smooth_minimum_is_not_a_plateau():
    # exact gradient 0 at a smooth, asymmetric minimum; the smoothed gradient is not 0
    # (σ²/2·L''' ≠ 0) but the loss is curved, not flat: no plateau
    d = diagnose(lambda t: t**2 + t**3, jnp.asarray(0.0), KEY, sigma=0.3)
    assert d.flag_names == ()


def test_plateau_of_a_clipped_loss():
    # L = (θ − clip(θ, 1, 2))²: 0 on [1, 2], rises outside, within σ of θ = 1.2; no jump
    d = diagnose(lambda t: (t - jnp.clip(t, 1.0, 2.0)) ** 2, jnp.asarray(1.2), KEY, sigma=0.3)
    assert d.flag_names == ("plateau",)
    ev = d.flags[0].evidence
    assert ev["grad_norm"] == 0.0 and ev["local_change"] == 0.0 and ev["max_loss_change"] > 0.1
    assert "zeroth-order or alpha-order" in d.recommendation


def test_heaviside_near_and_far():
    heaviside = lambda t: jnp.where(t >= 0.0, 1.0, 0.0)  # noqa: E731
    near = diagnose(heaviside, jnp.asarray(0.05), KEY, sigma=0.1)
    assert "jump" in near.flag_names
    # FoBG is identically 0; ZoBG sees φ_σ(θ) = 3.52: the gap is the whole jump term
    np.testing.assert_allclose(near.measurements["first_mean"], 0.0)
    assert near.flags[[f.name for f in near.flags].index("jump")].evidence["z_first_vs_zeroth"] > 4
    far = diagnose(heaviside, jnp.asarray(2.0), KEY, sigma=0.1)  # 20σ away: nothing to see
    assert far.flag_names == ()


def test_non_finite_gradient_at_a_switch_point():
    trap = lambda t: jnp.where(t > 0, jnp.sqrt(jnp.abs(t)), 0.0)  # noqa: E731
    d = diagnose(trap, jnp.asarray(0.0), KEY, sigma=0.1)
    assert "non_finite" in d.flag_names
    assert d.flags[0].evidence["finite_gradient"] is False
    assert "double-where" in d.recommendation


def test_deterministic_given_the_key():
    f = lambda t: jnp.clip(t, 1.0, 2.0) ** 2  # noqa: E731
    a = diagnose(f, jnp.asarray(1.2), jax.random.PRNGKey(3), sigma=0.3).to_dict()
    b = diagnose(f, jnp.asarray(1.2), jax.random.PRNGKey(3), sigma=0.3).to_dict()
    assert json.dumps(a) == json.dumps(b)


@pytest.mark.parametrize(
    ("kwargs", "match"),
    [
        ({"sigma": 0.0}, "sigma must be finite and > 0"),
        ({"sigma": float("nan")}, "sigma must be finite and > 0"),
        ({"num_samples": 4}, "num_samples must be an integer >= 16"),
        ({"rel_steps": (0.1, 1.0, 0.01)}, "rel_steps must be"),
    ],
)
def test_diagnose_validates_its_arguments(kwargs, match):
    with pytest.raises(ValueError, match=match):
        diagnose(lambda t: t**2, jnp.asarray(1.0), KEY, **kwargs)


@pytest.mark.parametrize(
    ("fields", "match"),
    [
        ({"z_threshold": 0.0}, "z_threshold must be finite and > 0"),
        ({"z_clear": 5.0}, r"z_clear must be < z_threshold \(4.0\), got 5.0"),
        ({"gap_tolerance": 1.5}, "gap_tolerance must be"),
        ({"stiffness_ratio": -1.0}, "stiffness_ratio must be finite and > 0"),
        ({"chaos_growth": 1.0}, "chaos_growth must be a number > 1"),
        ({"concentration_limit": 1.0}, r"concentration_limit must be in \(0, 1\)"),
        ({"discretization_tolerance": 0.0}, r"discretization_tolerance must be in \(0, 1\]"),
    ],
)
def test_thresholds_are_one_options_object_checked_field_by_field(fields, match):
    """The doctor's thresholds are one :class:`Thresholds` (the object ``auto`` decides
    with), checked field by field with the field's name; the flat keywords are gone."""
    with pytest.raises(ValueError, match=match):
        diagnose(lambda t: t**2, jnp.asarray(1.0), KEY, thresholds=Thresholds(**fields))


@pytest.mark.slow  # ~15–50 s cold on 2 cores: the default suite stays under 10 min
def test_thresholds_reach_the_decision():
    """A band of doubt no statistic can leave makes the verdict inconclusive; the rollout's
    chaos_growth is read from the same object (the pendulum's growth, > 1e3, is no chaos
    under a 1e12 limit)."""
    with pytest.raises(TypeError, match="z_threshold"):
        diagnose(lambda t: t**2, jnp.asarray(1.0), KEY, z_threshold=3.0)  # type: ignore[call-arg]
    with pytest.raises(TypeError, match=r"thresholds must be a diffsim\.doctor\.Thresholds"):
        diagnose(lambda t: t**2, jnp.asarray(1.0), KEY, thresholds={"z_threshold": 3.0})
    step = lambda t: jnp.where(t > 0.0, 1.0, 0.0) + 0.1 * t  # noqa: E731
    doubt = Thresholds(z_clear=1e-9, z_threshold=1e9)
    d = diagnose(step, jnp.asarray(0.02), KEY, sigma=0.1, max_samples=128, thresholds=doubt)
    assert d.verdict == "inconclusive" and "jump" not in d.flag_names
    sys = double_pendulum()
    loss = lambda s: jnp.cos(s[0][1])  # noqa: E731
    lenient = Thresholds(chaos_growth=1e12)
    d = diagnose_rollout(sys.step, sys.s0, sys.theta, 800, loss, KEY, wrt="s0", num_samples=64,
                         thresholds=lenient)  # fmt: skip
    assert "chaos" not in d.flag_names and d.measurements["jacobian_growth"] > 1e3


def test_diagnose_rollout_validates_its_arguments():
    sys = double_pendulum()
    with pytest.raises(ValueError, match="wrt must be"):
        diagnose_rollout(sys.step, sys.s0, sys.theta, 50, lambda s: s[0][0], KEY, wrt="u")
    with pytest.raises(ValueError, match="num_steps must be an integer >= 8"):
        diagnose_rollout(sys.step, sys.s0, sys.theta, 4, lambda s: s[0][0], KEY)


# --- rollout-aware: chaos and stiffness ---------------------------------------------------
def test_chaos_at_long_horizon_only():
    sys = double_pendulum()
    loss = lambda s: jnp.cos(s[0][1])  # noqa: E731
    short = diagnose_rollout(sys.step, sys.s0, sys.theta, 50, loss, KEY, wrt="s0", num_samples=64)
    long = diagnose_rollout(sys.step, sys.s0, sys.theta, 800, loss, KEY, wrt="s0", num_samples=64)
    assert short.flag_names == ()
    assert long.flag_names == ("chaos",)
    ev = long.flags[0].evidence
    assert ev["growth_T8_to_T"] > 1e3 and ev["rate_per_step"] > 0 and ev["concentration"] < 0.5


def test_stiff_contact_flagged_from_samples_and_from_the_rollout():
    sys = systems.stiff_contact(k=1e6)

    def height(y0):
        return rollout(sys.step, (y0, sys.s0[1]), sys.theta, 240, trajectory=False)[0]

    plain = diagnose(height, jnp.asarray(1.0), KEY)  # samples only: heavy tails
    assert "stiffness" in plain.flag_names
    ev = plain.flags[plain.flag_names.index("stiffness")].evidence
    assert ev["stiffness_ratio"] > 20 and ev["first_kurtosis"] > 10
    roll = diagnose_rollout(sys.step, sys.s0, sys.theta, 240, lambda s: s[0], KEY, wrt="s0")
    assert roll.flag_names == ("stiffness",)
    assert roll.flags[0].evidence["concentration"] >= 0.5


def _swing(s, theta, u=0.0):
    """A swing pumped through its stiffness, k − u_t (semi-implicit Euler, h = 0.05)."""
    x, v = s
    v = v - 0.05 * (theta["k"] - u) * x
    return (x + 0.05 * v, v)


def test_rollout_jacobian_sees_the_per_step_inputs():
    # pumped at twice its frequency the swing is unstable (Mathieu): the Jacobian grows
    # exponentially only through the inputs; a step called without them (u = 0, as the
    # doctor's former private product scan did) is a stable oscillator
    T, s0, theta = 400, (1.0, 0.0), {"k": 1.0}
    pump = 1.5 * jnp.cos(2 * 0.05 * jnp.arange(T))
    pumped = diagnose_rollout(_swing, s0, theta, T, lambda s: s[0], KEY, wrt="s0", inputs=pump)
    still = diagnose_rollout(_swing, s0, theta, T, lambda s: s[0], KEY, wrt="s0")
    assert pumped.flag_names == ("chaos",) and pumped.measurements["jacobian_growth"] > 100
    assert still.flag_names == () and still.measurements["jacobian_growth"] < 2

    def final_state(y, t):
        s_t = rollout(_swing, (y[0], y[1]), theta, t, inputs=pump[:t], trajectory=False)
        return jnp.stack(s_t)

    m = pumped.measurements
    for t, norm in zip(m["horizons"], m["jacobian_norms"]):
        autodiff = jax.jacfwd(final_state)(jnp.array(s0), t)
        product, _ = rollout_jacobian(_swing, s0, theta, t, method="product", inputs=pump[:t])
        np.testing.assert_allclose(norm, np.linalg.norm(autodiff, 2), rtol=1e-12)
        np.testing.assert_allclose(norm, np.linalg.norm(product, 2), rtol=1e-12)
    # and central differences of the rollout itself (linear in s0: only rounding error)
    y0, delta = np.array(s0), 1e-6
    fd = [(final_state(y0 + delta * e, T) - final_state(y0 - delta * e, T)) / (2 * delta)
          for e in np.eye(2)]  # fmt: skip
    np.testing.assert_allclose(m["jacobian_norms"][-1], np.linalg.norm(np.stack(fd, 1), 2),
                               rtol=1e-7)  # fmt: skip


def test_rules_are_the_flags_and_order_the_advice():
    assert tuple(r.name for r in RULES) == FLAGS
    assert FLAGS == (
        "non_finite", "plateau", "jump", "kink", "stiffness", "chaos", "discretization"
    )  # fmt: skip
    everything = recommend(FLAGS, 0.1)
    # one piece of advice per flag, the most urgent first: NaN, horizon, jump, plateau, ...
    at = {r.name: everything.index(r.advise(frozenset(FLAGS), 0.1)) for r in RULES}
    assert sorted(at, key=at.get) == [
        "non_finite", "chaos", "jump", "plateau", "kink", "stiffness", "discretization",
    ]  # fmt: skip
    assert recommend(["plateau"], 0.1) != recommend(["plateau", "jump"], 0.1)


def _hinge(th):
    return jnp.abs(th[0]) + 0.5 * th[0] + (th[1] - 1.0) ** 2


@pytest.mark.slow
def test_a_kink_at_theta_is_flagged():
    """|θ₀| + θ₀/2 + (θ₁ − 1)² at θ₀ = 0: autodiff returns one side's slope (1.5; the
    other is −0.5). The one-sided differences change by exactly 2 at every small step, so
    the doctor raises ``kink`` with that size and recommends the mixed estimate."""
    at = jnp.array([0.0, 2.0])
    assert float(jax.grad(_hinge)(at)[0]) == 1.5  # one side, silently
    d = diagnose(_hinge, at, jax.random.key(0))
    assert d.verdict == "untrusted" and d.flag_names == ("kink",), d
    assert abs(d.measurements["fd_kink"] - 2.0) < 1e-3  # the change of slope, 1.5 − (−0.5)
    assert d.choice == "mixed"


@pytest.mark.slow
def test_a_kink_is_answered_by_auto_as_the_doctor_says_and_only_at_the_kink():
    """``Auto`` (same key, σ, N) does not return the exact gradient at the kink; 1e-3 away
    (20σ: the default σ is 5 % of |θ₀|) and for a smooth control the verdict is
    ``trusted`` with ``fd_kink`` = 0."""
    from diffsim.estimators import Auto

    at = jnp.array([0.0, 2.0])
    est = Auto()(_hinge, at, jax.random.key(0))
    assert est.choice_name == "mixed", est
    assert diagnose(_hinge, jnp.array([1e-3, 2.0]), jax.random.key(0)).verdict == "trusted"
    smooth = diagnose(lambda th: jnp.sum(th**2), at + 1.0, jax.random.key(0))
    assert smooth.verdict == "trusted" and smooth.measurements["fd_kink"] == 0.0


def test_line_gap_tells_a_smooth_loss_from_many_small_jumps():
    """The line test's statistic on central-difference errors along ĝ at the ladder's steps
    (σ, 0.3σ, …, 0.001σ; ‖∇L‖ = 1, rounding noise 1e-9/δ): a smooth loss's error shrinks
    like δ² (0), a constant share of ‖∇L‖ that does not shrink (dense small jumps: that
    share), an error growing like 1/δ (a jump: the smaller share of the last two steps), an
    error resolved at one step of at most 0.3σ only (0), and a ladder whose last direction
    is not ĝ (0)."""
    from diffsim.estimators._evidence import DEFAULT_REL_STEPS, line_gap

    rel = jnp.asarray(DEFAULT_REL_STEPS)
    noise = 1e-9 / rel
    one, yes = jnp.asarray(1.0), jnp.asarray(1.0)
    assert float(line_gap(0.5 * rel**2, noise, one, yes, rel)) == 0.0
    assert float(line_gap(0.8 + 0 * rel, noise, one, yes, rel)) == pytest.approx(0.8)
    assert float(line_gap(0.01 / rel, noise, one, yes, rel)) == pytest.approx(0.01 / 0.003)
    assert float(line_gap(0.8 + 0 * rel, 0.15 / rel, one, yes, rel)) == 0.0
    assert float(line_gap(0.8 + 0 * rel, noise, one, jnp.asarray(0.0), rel)) == 0.0


@pytest.mark.slow  # two rollouts of 16 balls × 500 steps diagnosed: ~25 s on 2 cores
@pytest.mark.parametrize("toi", [False, True], ids=["reflect", "toi"])
def test_many_small_jumps_along_the_gradient_are_a_jump(toi):
    """16 balls, θ ∈ R^320 (the battery's case). Independent of the doctor, a descent step
    along −∇L of 0.01σ and of 0.3σ: without time of impact the loss rises where the gradient
    promises a decrease (at 0.01σ by 40× the promise), with it the decrease is the
    gradient's within 1 %. The doctor flags the first a jump on the line test's evidence
    and trusts the second (the ladder's random directions alone had called both trusted)."""
    from diffsim.systems.battery import many_balls_loss

    loss, theta = many_balls_loss(toi)
    value, grad = jax.jit(jax.value_and_grad(loss))(theta)
    f, norm = jax.jit(loss), float(jnp.linalg.norm(grad))
    sigma = 0.05  # the default σ at θ = 0
    for step in (0.01 * sigma, 0.3 * sigma):
        change = float(f(theta - step * grad / norm) - value)
        if toi:
            assert change == pytest.approx(-step * norm, rel=0.01)
        else:
            assert change > 0
    if not toi:
        assert float(f(theta - 0.01 * sigma * grad / norm) - value) > 40 * 0.01 * sigma * norm
    d = diagnose(loss, theta, jax.random.PRNGKey(0))
    if toi:
        assert d.verdict == "trusted" and d.flag_names == ()
    else:
        assert d.flag_names == ("jump",)
        assert "does not follow its gradient" in d.flags[0].message
        assert d.flags[0].evidence["line_gap"] > 0.5


# --- the battery and the CLI --------------------------------------------------------------
@pytest.mark.slow
def test_battery_has_no_false_alarms_and_no_misses():
    rows = run_battery()
    assert len(rows) >= 22
    table = battery_table(rows)
    assert sum(len(r["false_alarms"]) for r in rows) == 0, table
    assert sum(len(r["misses"]) for r in rows) == 0, table
    assert not any(r["wrong_verdict"] for r in rows), table
    # the sequential test: clear cases stop at the first batch, the inconclusive one is shown
    assert {r["verdict"] for r in rows} == {"trusted", "untrusted", "inconclusive"}
    assert sum(r["samples"] == 128 for r in rows) >= 20, table
    # each flag is exercised by at least one case
    raised = {f for r in rows for f in r["flags"]}
    assert raised == set(FLAGS)


@pytest.mark.slow
def test_held_out_battery_has_no_false_alarms_and_no_misses():
    rows = run_battery(which="held_out")
    table = battery_table(rows)
    assert sum(len(r["false_alarms"]) + len(r["misses"]) for r in rows) == 0, table
    assert not any(r["wrong_verdict"] for r in rows), table


def test_cli_systems_are_the_doctor_presets():
    # one preset per registered system, in registry order (the first six as before)
    assert list(PRESETS) == list(SYSTEMS)
    assert list(PRESETS)[:6] == ["wall", "bounce", "stiff", "double-pendulum", "pendulum",
                                 "free-particle"]  # fmt: skip
    out = cli_runner().invoke(app, ["diagnose", "--system", "nope"])
    assert out.exit_code == 2
    message = " ".join(out.output.replace("│", " ").split())
    assert "is not one of " + ", ".join(f"'{name}'" for name in PRESETS) in message


def test_cli_diagnose_json_and_bad_input():
    runner = cli_runner()
    out = runner.invoke(
        app, ["diagnose", "--system", "wall", "--v0", "8", "--json", "--samples", "64"]
    )
    assert out.exit_code == 0, out.output
    data = json.loads(out.stdout)
    assert data["verdict"] == "untrusted" and data["flags"] == ["plateau"]
    assert {"recommendation", "evaluations", "evidence", "measurements"} <= set(data)
    assert data["evidence"]["plateau"]["grad_norm"] == 0.0
    for args, msg in (
        (["--v0", "20"], "v0 must be in [4.0, 14.0]"),
        (["--v0", "nan"], "v0 must be a finite number"),
        (["--sigma", "-1"], "sigma must be finite and > 0"),
        (["--system", "stiff", "--k", "0"], "k must be finite and > 0"),
    ):
        out = runner.invoke(app, ["diagnose", *args])
        assert out.exit_code == 2 and msg in out.output, (args, out.output)
