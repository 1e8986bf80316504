"""The registries: every registered estimator and system passes the same tests, and the CLI,
the doctor and the page read them. The two toys below are ``CONTRIBUTING.md``'s worked
examples, registered for one test each (one file + one registry line)."""

from __future__ import annotations

import dataclasses
import json

import equinox as eqx
import jax
import jax.numpy as jnp
import numpy as np
import pytest
from jaxtyping import Array

from conftest import cli_runner
from diffsim import rollout
from diffsim.app._model import ESTIMATOR_LABELS, PAGE_ESTIMATORS
from diffsim.cli import app
from diffsim.estimators import (
    BASE_QUANTITIES,
    ESTIMATORS,
    QUANTITIES,
    Cost,
    Estimator,
    GradientEstimate,
    Option,
    make_estimator,
)
from diffsim.estimators.base import flatten_loss, make_result, mean_and_stats
from diffsim.integrators import SemiImplicitEuler
from diffsim.systems import SYSTEMS, LossProblem, RolloutProblem, System, SystemSpec
from diffsim.systems import projectile_wall as pw
from diffsim.systems.battery import PRESETS, check_problem

runner = cli_runner()


# --- the worked examples of CONTRIBUTING.md ---------------------------------------------------


class RandomDirection(Estimator):
    r"""Central differences along N random directions :math:`u_i \sim N(0, I)`:
    :math:`\hat g = \frac1N \sum_i \frac{L(θ + δu_i) − L(θ − δu_i)}{2δ} u_i`, unbiased for ∇L
    up to O(δ²) since :math:`\mathbb E[u u^T] = I`; 2N loss evaluations, no σ."""

    label = "random-direction differences"
    short_label = "RD"
    summary = "central differences along N random directions: no σ, 2N loss evaluations"
    options = (
        Option("step", "δ, the step", float, "θ's units", 0.0, None, exclusive=True),
        Option("num_samples", "N, random directions", int, "", 2),
    )
    randomized = True
    reports = ("variance",)

    step: Array = eqx.field(converter=jnp.asarray, default=1e-3)
    num_samples: int = eqx.field(static=True, default=16)

    def __call__(self, loss, theta, key) -> GradientEstimate:
        f, x, unravel = flatten_loss(loss, theta)
        u = jax.random.normal(key, (self.num_samples, x.shape[0]), x.dtype)
        h = jnp.asarray(self.step, x.dtype)
        slopes = (jax.vmap(f)(x + h * u) - jax.vmap(f)(x - h * u)) / (2 * h)
        mean, se, var = mean_and_stats(slopes[:, None] * u)
        return make_result(
            unravel,
            mean,
            se,
            loss_evaluations=2 * self.num_samples,
            grad_evaluations=0,
            variance=var,
        )

    def cost(self, dim: int) -> Cost:
        """2N losses, two vmaps of N (the CLI's memory and time guards read this)."""
        return Cost(2 * self.num_samples, 0, 2 * self.num_samples)


def drag_particle(h: float = 0.01, *, c: float = 0.5, g: float = 9.81, v0: float = 0.0) -> System:
    """A particle falling with linear drag: ẍ = −g − c ẋ, θ = {"c", "g"} (1/s, m/s²)."""
    step = SemiImplicitEuler(lambda x, v, th: -th["g"] - th["c"] * v, h=h)
    s0 = (jnp.asarray(0.0), jnp.asarray(v0))
    return System("drag_particle", step, s0, {"c": jnp.asarray(c), "g": jnp.asarray(g)})


def drag_velocity(v0, c, g, t):
    """Closed form: v(t) = (v0 + g/c) e^{−ct} − g/c."""
    return (v0 + g / c) * jnp.exp(-c * t) - g / c


DRAG = SystemSpec(
    "drag-particle",
    "particle falling with linear drag",
    drag_particle,
    (Option("steps", "rollout horizon T", int, "", 0, default=200),),
    lambda steps=None: RolloutProblem(drag_particle(), steps or 200, lambda s: s[1] ** 2),
    closed_forms={"velocity": drag_velocity},
)


@pytest.fixture
def with_toys(monkeypatch):
    """The toys registered (the "one registry line" each), for one test."""
    monkeypatch.setitem(ESTIMATORS, "rd", RandomDirection)
    monkeypatch.setitem(SYSTEMS, "drag-particle", DRAG)


# --- every estimator ----------------------------------------------------------------------------


def _check_estimator(name: str) -> None:
    cls = ESTIMATORS[name]
    assert cls.label and cls.short_label and cls.summary
    fields = {f.name for f in dataclasses.fields(cls)}
    assert {o.name for o in cls.options} <= fields
    est = make_estimator(name, **cls.defaults())
    assert est == cls()
    if cls.smoothing:
        assert cls.takes("sigma") and cls.randomized
        assert float(est.with_sigma(0.25).smoothing_scale()) == 0.25
    else:
        assert est.smoothing_scale() is None and est.with_sigma(0.25) is est
    assert set(cls.reports) <= set(QUANTITIES)
    r = est(lambda t: jnp.sum(jnp.sin(t)), jnp.array([0.3, -0.2]), jax.random.PRNGKey(1))
    report = r.report()
    assert list(report) == [*BASE_QUANTITIES, *cls.reports]
    assert all(item.quantity is QUANTITIES[n] for n, item in report.items())
    # within 4 SE (plus σ's smoothing bias, e^{−σ²/2} − 1 = −0.5 % at σ = 0.1, or FD's)
    err = np.abs(np.asarray(report["estimate"].value) - np.cos([0.3, -0.2]))
    assert np.all(err <= 4 * np.asarray(report["std_error"].value) + 0.01)
    assert int(report["evaluations"].value) == int(r.loss_evaluations + r.grad_evaluations)


def _cli_json(args):
    res = runner.invoke(app, [*args, "--json"])
    assert res.exit_code == 0, res.output
    return json.loads(res.stdout.strip().splitlines()[-1])


def _check_estimator_cli(name: str) -> None:
    """`diffsim estimate` reports what the library computes, for any estimator, with or
    without σ; `diffsim optimize` runs with it."""
    cls = ESTIMATORS[name]
    out = _cli_json(["estimate", "--v0", "9.0", "-e", name, "--sigma", "0.5", "-n", "16"])
    given = {"sigma": 0.5, "num_samples": 16}
    est = make_estimator(name, **{k: v for k, v in given.items() if cls.takes(k)})
    r = est(pw.loss, np.float64(9.0), jax.random.PRNGKey(0))  # CLI: float64
    for key, item in r.report().items():
        if key == "choice" and r.choice_name is not None:  # auto's choice, by name
            assert out[key] == r.choice_name
            continue
        assert out[key] == pytest.approx(float(item.value), rel=1e-12, nan_ok=True), key
    assert ("sigma" in out) == cls.takes("sigma") and ("samples" in out) == cls.takes("num_samples")
    opt = _cli_json(["optimize", "--v0", "8.0", "-e", name, "--steps", "3", "-n", "4"])
    assert len(opt["history"]["v0"]) == 3
    # strict JSON: no σ is null (with a note saying why), never a bare NaN
    sig = opt["history"]["sigma"]
    assert all(v is None for v in sig) == (not cls.smoothing)
    assert all(v is not None and np.isfinite(v) for v in sig) == cls.smoothing


def test_estimator_declares_and_reports(estimator_name):
    _check_estimator(estimator_name)


def test_estimator_through_the_cli(estimator_name):
    _check_estimator_cli(estimator_name)


def _edges(option):
    """Values just inside and just outside an option's declared range."""
    inside, outside = [], []
    lo, hi = option.minimum, option.maximum
    step = (option.multiple_of or 1) if option.kind is int else 1e-9
    if lo is not None:
        (outside if option.exclusive else inside).append(option.kind(lo))
        inside.append(option.kind(lo + step))
        outside.append(option.kind(lo - step))
    if hi is not None:
        (outside if option.exclusive else inside).append(option.kind(hi))
        inside.append(option.kind(hi - step))
        outside.append(option.kind(hi + step))
    return inside, outside


def test_options_and_settings_are_one_self_validating_type(estimator_name):
    """An estimator's declared options check what its constructor checks: a value on the
    wrong side of a declared bound is refused by both, one on the right side by neither (so
    the declaration the CLI and the page read is the constructor's contract); a system's
    settings are the same type, and every default is one its option accepts."""
    cls = ESTIMATORS[estimator_name]
    assert all(type(o) is Option for o in cls.options)
    for option in cls.options:
        if option.kind is bool:
            assert option.check(True) is True
            with pytest.raises(ValueError, match=f"^{option.name} must be true or false"):
                option.check(1)
            continue
        inside, outside = _edges(option)
        assert inside and outside, option
        if option.multiple_of:  # a value between two multiples
            outside.append(inside[-1] + 1)
        for value in inside:
            assert option.check(value) == value
            assert option.parse(repr(value)) == value
            cls(**{option.name: value})
        for value in outside:
            with pytest.raises(ValueError, match=f"^{option.name} must be "):
                option.check(value)
            with pytest.raises(ValueError, match=option.name):
                cls(**{option.name: value})
    for spec in SYSTEMS.values():
        for setting in spec.settings:
            assert type(setting) is Option
            assert setting.check(setting.default) == setting.default, (spec.name, setting)


def test_cli_help_lists_every_estimator():
    res = runner.invoke(app, ["estimate", "--help"])
    text = " ".join(res.output.replace("│", " ").split())
    for name, cls in ESTIMATORS.items():
        assert f"{name}:" in text and cls.summary.split(":")[0] in text


def test_page_lists_the_registered_estimators():
    assert PAGE_ESTIMATORS == tuple(n for n, c in ESTIMATORS.items() if not c.diagnostic)
    assert list(ESTIMATOR_LABELS)[:-1] == list(PAGE_ESTIMATORS)


def test_worked_example_estimator(with_toys):
    # the shared tests, on the toy (an estimator without σ: the CLI must not stumble on it)
    _check_estimator("rd")
    _check_estimator_cli("rd")
    # and it is unbiased: within 4 SE of the exact gradient of a smooth loss
    r = make_estimator("rd", num_samples=4000, step=1e-4)(
        lambda t: jnp.sum(t**3), jnp.array([1.0, -0.5]), jax.random.PRNGKey(3)
    )
    assert np.all(np.abs(r.estimate - np.array([3.0, 0.75])) < 4 * r.std_error)
    # the CLI's memory guard covers it (from its declared cost: 2N losses held at once): a
    # sample count that would not fit is one line before anything is compiled, exit 2
    res = runner.invoke(app, ["estimate", "-e", "rd", "--samples", "100000000"])
    assert res.exit_code == 2, res.output
    assert "--samples 100000000" in res.stderr and "GB of memory" in res.stderr


_COST_CASES = (
    (lambda t: jnp.sum(t**2), jnp.array([0.3, -0.2, 0.5])),  # smooth, d = 3
    (lambda t: jnp.where(jnp.sum(t) > 0.13, 1.0, 0.0), jnp.array([0.1])),  # plateau by a cliff
)


def test_declared_cost_bounds_the_counts_and_is_attained(estimator_name):
    # what the CLI's guards charge (Estimator.cost) is never below what a call reports, and
    # is reached: by every call of a fixed estimator, and by an adaptive one (auto) in its
    # worst case (σ widened twice on the plateau, then N doubled to the budget by the cliff
    # now inside σ: 93 losses and 51 gradients at N = 8, budget 32) on some of 32 keys —
    # one vmapped call, each key's counts its own
    cls = ESTIMATORS[estimator_name]
    small = {"num_samples": 8, "max_samples": 32}
    est = cls(**{k: v for k, v in small.items() if k in {f.name for f in dataclasses.fields(cls)}})
    keys = jax.random.split(jax.random.PRNGKey(0), 32)
    attained = []
    for loss, theta in _COST_CASES:
        declared = est.cost(theta.shape[0])
        assert isinstance(declared, Cost) and declared.batch >= 1
        r = jax.vmap(lambda k, loss=loss, theta=theta: est(loss, theta, k))(keys)
        used = np.stack([np.asarray(r.loss_evaluations), np.asarray(r.grad_evaluations)], axis=1)
        assert np.all(used[:, 0] <= declared.loss_evaluations), (used, declared)
        assert np.all(used[:, 1] <= declared.grad_evaluations), (used, declared)
        attained.append(any(tuple(u) == declared[:2] for u in used.tolist()))
    assert any(attained), [est.cost(t.shape[0]) for _, t in _COST_CASES]


def test_an_estimator_must_declare_its_cost():
    class NoCost(Estimator):
        def __call__(self, loss, theta, key):
            raise AssertionError("not called")

    with pytest.raises(TypeError, match="cost"):
        NoCost()


# --- every system -------------------------------------------------------------------------------


def _check_system(name: str) -> None:
    spec = SYSTEMS[name]
    assert spec.name == name and spec.title
    sys = spec.factory()
    assert isinstance(sys, System)
    s1 = sys.step_once()  # with its declared input when the step takes one
    assert all(np.all(np.isfinite(np.asarray(a))) for a in jax.tree_util.tree_leaves(s1))
    for s in spec.settings:
        lo = -np.inf if s.minimum is None else s.minimum
        hi = np.inf if s.maximum is None else s.maximum
        assert isinstance(s.default, s.kind) and lo <= s.default <= hi, s
    for preset in spec.presets:
        spec.build(preset)
    with pytest.raises(ValueError, match="takes the settings"):
        spec.build(nope=1)
    short = {"steps": 8} if any(s.name == "steps" for s in spec.settings) else {}
    problem = spec.build(**short)
    if isinstance(problem, LossProblem):
        g = jax.grad(problem.loss)(problem.theta)
    else:
        assert isinstance(problem, RolloutProblem)
        r = problem

        def loss(s0):
            return r.loss(rollout(r.system.step, s0, r.system.theta, r.num_steps, trajectory=False))

        g = jax.grad(loss)(jax.tree_util.tree_map(jnp.asarray, r.system.s0))
    assert all(np.all(np.isfinite(np.asarray(a))) for a in jax.tree_util.tree_leaves(g))
    assert all(callable(f) for f in spec.closed_forms.values())


def test_system_registered_once_and_usable(system_name):
    _check_system(system_name)
    # the doctor and `diffsim diagnose --system` read the registry
    assert system_name in PRESETS


def test_worked_example_system(with_toys):
    _check_system("drag-particle")
    # the doctor examines it like any registered system
    d = check_problem(DRAG.build())(jax.random.PRNGKey(0), num_samples=64)
    assert d.verdict == "trusted"
    # and its closed form holds to O(h)
    sys = drag_particle(h=1e-3)
    _, vT = rollout(sys.step, sys.s0, sys.theta, 1000, trajectory=False)
    assert float(vT) == pytest.approx(float(drag_velocity(0.0, 0.5, 9.81, 1.0)), rel=1e-3)


def test_no_public_name_shadows_a_module():
    import importlib
    import pkgutil

    import diffsim

    for pkg in (diffsim, diffsim.systems, diffsim.estimators, diffsim.doctor):
        for info in pkgutil.iter_modules(pkg.__path__):
            if info.name.startswith("_"):
                continue
            module = importlib.import_module(f"{pkg.__name__}.{info.name}")
            assert getattr(pkg, info.name, module) is module, f"{pkg.__name__}.{info.name}"
    import diffsim._optimize

    assert diffsim.optimize is diffsim._optimize.optimize
    assert set(diffsim.__all__) >= {"doctor", "systems", "estimators", "optimize"}


# issue 48 item 5: the names moved off the top level, and where each lives now (CHANGELOG)
MOVED = {
    "estimators": ("DEFAULT_SIGMA", "Relative", "sigma_vector", "Option"),
    "optimization": (
        "METHODS", "Method", "Schedule", "cosine_anneal", "default_optimizer", "OptimizeHistory",
    ),
    "identification": ("Parameter", "parse_parameters", "simulate_recording", "default_observe"),
}  # fmt: skip


def test_the_top_level_is_what_a_user_composes():
    """32 names and 9 namespaces at the top level; each moved name is in its namespace's
    ``__all__`` and no longer at the top."""
    import types

    import diffsim

    names = [n for n in diffsim.__all__ if n != "__version__"]
    spaces = [n for n in names if isinstance(getattr(diffsim, n), types.ModuleType)]
    assert (len(names) - len(spaces), len(spaces)) == (32, 9), sorted(names)
    for space, moved in MOVED.items():
        module = getattr(diffsim, space)
        for name in moved:
            assert name in module.__all__ and name not in diffsim.__all__, (space, name)
            assert not hasattr(diffsim, name), name


def test_worked_example_runs_through_the_cli(with_toys):
    """CONTRIBUTING's ``diffsim diagnose --system drag-particle``: a system registered after
    import is a ``--system`` choice (the registry is read when the command runs), and
    ``--set steps=T`` reaches its registered setting; the CLI's verdict, flags and cost are
    the library's own for the same settings and key."""
    assert "drag-particle" in PRESETS
    for args, settings in (([], {"steps": 0}), (["--set", "steps=100"], {"steps": 100})):
        out = _cli_json(["diagnose", "--system", "drag-particle", "--samples", "64", *args])
        direct = PRESETS["drag-particle"].build(**settings)(jax.random.PRNGKey(0), num_samples=64)
        want = json.loads(json.dumps(direct.to_dict()))
        assert out["verdict"] == "trusted"
        for key in ("verdict", "choice", "flags", "evaluations", "evidence"):
            assert out[key] == want[key], key
    # the horizon changed what was measured: 200 steps (the default) against 100
    short = _cli_json(
        ["diagnose", "--system", "drag-particle", "--samples", "64", "--set", "steps=100"]
    )
    full = _cli_json(["diagnose", "--system", "drag-particle", "--samples", "64"])
    assert short["measurements"] != full["measurements"]


def test_cli_set_is_the_flag_and_is_checked_by_the_registry():
    """``--set v0=9.5`` is ``--v0 9.5`` (the same JSON); a bad name, value or range is one
    line naming the setting and what it accepts, from the registry's ``Option``."""
    by_set = _cli_json(["diagnose", "--system", "wall", "--samples", "64", "--set", "v0=9.5"])
    by_flag = _cli_json(["diagnose", "--system", "wall", "--samples", "64", "--v0", "9.5"])
    assert by_set == by_flag
    for args, message in (
        (["--system", "wall", "--set", "v0=20"], "v0 must be a number in [4, 14] m/s, got '20'"),
        (["--system", "wall", "--set", "c=1"], "NAME a setting of --system wall (v0)"),
        (["--system", "bounce", "--set", "toi=maybe"], "toi must be true or false"),
        (["--system", "stiff", "--set", "steps=3"], "steps must be an integer >= 8"),
        (["--system", "nope"], "--system: 'nope' is not one of 'wall', 'bounce'"),
        (["--battery", "--set", "v0=9"], "--set does not apply to --battery"),
    ):
        res = runner.invoke(app, ["diagnose", *args])
        assert res.exit_code == 2, (args, res.output)
        assert message in res.stderr and len(res.stderr.strip().splitlines()) == 1, res.stderr
