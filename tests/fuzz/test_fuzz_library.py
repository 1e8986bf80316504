"""Property-based fuzzing of every public library entry point (issue 12).

Each test draws arguments — good values, edge values (0, negatives, tiny, huge, NaN, inf,
values that overflow float32), wrong types (strings, None, booleans, lists, nested
pytrees) and wrong shapes — calls one entry point, and accepts exactly two outcomes:

* a result whose every array leaf is finite and floating (or integer where the library
  counts something), or
* a ``ValueError`` / ``TypeError`` whose message names one of the entry point's
  arguments.

Anything else (another exception, a NaN or inf in the result, an error naming nothing)
is a defect. The tally (cases / clean rejections / results / defects) is printed at the
end of the module, per test with ``DIFFSIM_FUZZ_TALLY`` (tests/fuzz/_tally.py); ``DIFFSIM_FUZZ=long`` runs the long profile (tests/fuzz/conftest.py).
"""

from __future__ import annotations

import warnings

import jax
import jax.numpy as jnp
import numpy as np
import optax
import pytest
from _tally import Tally
from hypothesis import given
from hypothesis import strategies as st

import diffsim
from diffsim import contact, integrators, systems
from diffsim.estimators import ESTIMATORS, make_estimator

KEY = jax.random.PRNGKey(0)
TALLY = Tally("library fuzz")


@pytest.fixture(scope="module", autouse=True)
def _report(request):
    yield
    TALLY.report(request)


# --- values ------------------------------------------------------------------------------

EDGE_FLOATS = [0.0, -0.0, 1.0, -1.0, 1e-300, -1e-300, 1e-50, 1e38, 3.5e38, 1e300, -1e300]
BAD_FLOATS = [float("nan"), float("inf"), float("-inf")]

floats = st.one_of(
    st.floats(-10.0, 10.0, allow_nan=False),
    st.sampled_from(EDGE_FLOATS + BAD_FLOATS),
)
numbers = st.one_of(floats, st.integers(-3, 5), st.sampled_from([2**40, -(2**70)]))
junk = st.sampled_from(["abc", None, True, b"x", object(), 1 + 2j, [], {}])
scalars = st.one_of(numbers, junk)
arrays = st.builds(
    lambda shape, v: np.full(shape, v), st.sampled_from([(), (2,), (3,), (2, 2)]), floats
)
values = st.one_of(scalars, arrays, st.lists(floats, min_size=0, max_size=3))
pytrees = st.one_of(
    values,
    st.tuples(values, values),
    st.dictionaries(st.sampled_from(["a", "b"]), values, max_size=2),
)
# a step size is checked (finite and > 0 in its dtype); a finite h so large that h²·k
# overflows float64 leaves the model's domain, which no argument check can bound: the
# stepping tests keep |h| <= 1e38 (still far beyond float32's range in float32 runs)
step_sizes = st.one_of(
    st.floats(-10.0, 10.0), st.sampled_from([0.0, 1e-300, 1e-50, 1e38, *BAD_FLOATS]), junk
)
moderate = st.one_of(
    st.floats(-10.0, 10.0), st.sampled_from([0.0, 1e-300, 1e-50, 1e10, *BAD_FLOATS])
)


def no_nan(result) -> bool:
    """Finite inputs that overflow the model (h·v beyond the float range) may give inf —
    a loud overflow, not a wrong number; NaN never."""
    leaves = [np.asarray(a) for a in jax.tree_util.tree_leaves(result)]
    return all(np.issubdtype(a.dtype, np.number) and not np.any(np.isnan(a)) for a in leaves)


ints = st.one_of(st.integers(-2, 6), st.sampled_from([2.7, 3.0, "3", None, True, np.int64(3)]))
keys = st.one_of(st.just(KEY), st.sampled_from([3, "key", None, jnp.zeros(3), jax.random.key(1)]))


def _leaves_ok(result) -> bool:
    for leaf in jax.tree_util.tree_leaves(result):
        if isinstance(leaf, str | bool | type(None)):
            continue
        arr = np.asarray(leaf)
        if arr.dtype == np.bool_:
            continue
        # a rollout of a complex state is complex (a legitimate step): finite is what counts
        if not np.issubdtype(arr.dtype, np.number):
            return False
        if np.issubdtype(arr.dtype, np.inexact) and not np.all(np.isfinite(arr)):
            return False
    return True


def check(call, names, *, result_ok=_leaves_ok):
    """Run ``call``; the outcome must be a good result or a clean, named rejection."""
    try:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            result = call()
    except (ValueError, TypeError) as err:
        msg = str(err)
        if any(n in msg for n in names):
            TALLY.add("clean rejections")
            return
        TALLY.defect(f"{type(err).__name__} naming none of {names}: {msg[:200]}")
        raise AssertionError(f"error names no argument of {names}: {msg}") from err
    except Exception as err:
        TALLY.defect(f"{type(err).__name__}: {str(err)[:200]}")
        raise
    if not result_ok(result):
        TALLY.defect(f"bad result for {names}: {result!r}"[:300])
        raise AssertionError(f"not a finite, correctly typed result: {result!r}")
    TALLY.add("results")


def _lin_step(s, p):
    return jax.tree_util.tree_map(lambda a: 0.9 * a + 0.01 * jnp.tanh(_sum(p)), s)


def _sum(p):
    return sum(jnp.sum(jnp.tanh(jnp.asarray(x, float))) for x in jax.tree_util.tree_leaves(p))


def quad(t) -> jax.Array:
    return jnp.asarray(0.0) + sum(jnp.sum(jnp.tanh(x) ** 2) for x in jax.tree_util.tree_leaves(t))


# --- rollouts and Jacobians ----------------------------------------------------------------

ROLLOUT_ARGS = ["s0", "theta", "num_steps", "checkpoint", "unroll", "step", "inputs"]


@given(
    s0=pytrees,
    theta=pytrees,
    num_steps=ints,
    checkpoint=st.one_of(st.none(), ints, st.lists(ints, max_size=2), st.sampled_from(["sqrt"])),
)
def test_rollout(s0, theta, num_steps, checkpoint):
    check(
        lambda: diffsim.rollout(_lin_step, s0, theta, num_steps, checkpoint=checkpoint),
        ROLLOUT_ARGS,
    )


@given(
    s0=pytrees,
    theta=pytrees,
    num_steps=ints,
    method=st.sampled_from(["autodiff", "product", "forward", "adjoint", "bogus"]),
)
def test_rollout_jacobian(s0, theta, num_steps, method):
    check(
        lambda: diffsim.rollout_jacobian(_lin_step, s0, theta, num_steps, method=method),
        [*ROLLOUT_ARGS, "method", "step_jacobian"],
    )


FREE = systems.free_particle(h=0.1)


@given(x=floats, v=floats, a=numbers, num_steps=ints, cot=pytrees)
def test_analytic_routes(x, v, a, num_steps, cot):
    s0 = (x, v)
    theta = {"a": a}
    names = [*ROLLOUT_ARGS, "cotangent", "step_jacobian"]
    check(lambda: diffsim.forward_sensitivity(FREE.step, s0, theta, num_steps), names)
    check(lambda: diffsim.adjoint_vjp(FREE.step, s0, theta, num_steps, cot), names)
    check(lambda: diffsim.step_jacobian(FREE.step, s0, theta), ["state", "theta", "step"])


# --- gradients and estimators --------------------------------------------------------------


@given(theta=pytrees, mode=st.sampled_from(["auto", "forward", "reverse", "x"]), b=st.booleans())
def test_value_and_grad(theta, mode, b):
    check(lambda: diffsim.value_and_grad(quad, theta, mode=mode, batched=b), ["theta", "mode"])


OPTIONS = {
    "sigma": floats,
    "num_samples": ints,
    "step": floats,
    "gamma": floats,
    "delta": floats,
    "R": floats,
    "antithetic": st.one_of(st.booleans(), junk),
}


@given(data=st.data(), name=st.sampled_from([*ESTIMATORS, "nope"]), theta=pytrees, key=keys)
def test_estimators(data, name, theta, key):
    cls = ESTIMATORS.get(name)
    opts = {}
    if cls is not None:
        for o in cls.options:
            if data.draw(st.booleans()):
                opts[o.name] = data.draw(OPTIONS[o.name])
    names = ["estimator", *opts, "num_samples", "theta", "key"]

    def call():
        r = make_estimator(name, **opts)(quad, theta, key)
        # NaN marks a quantity the estimator does not compute (variance of exact, ...)
        return r.estimate, r.std_error, r.evaluations

    check(call, names)


SCHEDULES = st.sampled_from(
    [None, lambda k: 0.1 + 0 * k, lambda k: 0.0 * k, lambda k: -1.0 + 0 * k, lambda k: jnp.ones(2)]
)


@given(
    theta0=pytrees,
    est=st.sampled_from(list(ESTIMATORS)),
    steps=ints,
    key=keys,
    optimizer=st.sampled_from([None, optax.sgd(0.1), "adam", 0.1]),
    sigma_schedule=SCHEDULES,
)
def test_optimize(theta0, est, steps, key, optimizer, sigma_schedule):
    kw = {"num_samples": 4} if ESTIMATORS[est].takes("num_samples") else {}

    def call():
        r = diffsim.optimize(
            quad,
            theta0,
            make_estimator(est, **kw),
            steps=steps,
            key=key,
            optimizer=optimizer,
            sigma_schedule=sigma_schedule,
        )
        # σ and τ are NaN in the history when there is none to record
        return r.theta, r.loss, r.evaluations, r.history.theta, r.history.estimate.estimate

    check(call, ["theta0", "steps", "key", "optimizer", "sigma_schedule", "estimator"])


# --- the doctor ----------------------------------------------------------------------------


@given(theta=pytrees, key=keys, sigma=st.one_of(st.none(), floats, junk))
def test_diagnose(theta, key, sigma):
    def call():
        d = diffsim.diagnose(quad, theta, key, sigma=sigma, num_samples=16, num_directions=1)
        return d.verdict

    check(call, ["theta", "key", "sigma"], result_ok=lambda v: v in ("trusted", "untrusted"))


@given(theta=pytrees, steps=st.one_of(st.just((1e-2, 1e-3)), st.lists(floats, max_size=3)))
def test_check_grad(theta, steps):
    def call():
        return diffsim.doctor.check_grad(quad, theta, steps=steps).ok

    check(call, ["theta", "steps", "atol", "rtol"], result_ok=lambda v: isinstance(v, bool))


BALL = systems.bouncing_ball(h=0.05)


@given(y0=numbers, vy0=numbers, e=numbers, num_steps=ints, wrt=st.sampled_from(["theta", "s0"]))
def test_diagnose_rollout(y0, vy0, e, num_steps, wrt):
    def call():
        d = diffsim.doctor.diagnose_rollout(
            BALL.step,
            (y0, vy0),
            {"e": e, "g": 9.81},
            num_steps,
            lambda s: s[0],
            KEY,
            wrt=wrt,
            num_samples=16,
            num_directions=1,
        )
        return d.verdict

    check(call, [*ROLLOUT_ARGS, "wrt"], result_ok=lambda v: v in ("trusted", "untrusted"))


# --- contact models, integrators, systems --------------------------------------------------


@given(
    kind=st.sampled_from(["restitution", "stop_dead", "penalty"]),
    e=scalars,
    k=scalars,
    smoothing=st.one_of(st.none(), floats, junk),
    toi=st.booleans(),
    height=scalars,
    h=step_sizes,
    y=moderate,
    v=moderate,
)
def test_contact_models(kind, e, k, smoothing, toi, height, h, y, v):
    def call():
        plane = contact.Plane.ground(height=height)
        if kind == "restitution":
            c = contact.Restitution(plane, e=e, toi=toi and smoothing is None, smoothing=smoothing)
        elif kind == "stop_dead":
            c = contact.StopDead(plane, toi=toi and smoothing is None, smoothing=smoothing)
        else:
            c = contact.PenaltySpring(plane, k=k, smoothing=smoothing)
        step = contact.WithContact(
            integrators.SemiImplicitEuler(lambda x, v, th: -9.81 + 0 * x, h=h), c
        )
        return diffsim.rollout(step, (y, v), {}, 5, trajectory=False)

    check(
        call, ["e", "k", "smoothing", "offset", "height", "h", "s0", "c", "mass"], result_ok=no_nan
    )


@given(name=st.sampled_from(sorted(integrators.INTEGRATORS)), h=step_sizes, x=moderate, v=moderate)
def test_integrators(name, h, x, v):
    cls = dict(integrators.INTEGRATORS)[name]

    def call():
        integ = cls(lambda x, v, th: -th["k"] * x, h=h)
        return integ((x, v), {"k": 2.0}), integ.jacobian((x, v), {"k": 2.0})

    check(call, ["h", "state", "s0", "theta", "accel"], result_ok=no_nan)


FACTORY_KWARGS = {
    "free_particle": ["h", "x0", "v0", "a"],
    "pendulum": ["h", "g_over_l", "damping", "angle0", "omega0"],
    "nonlinear_spring": ["h", "m", "k", "k3", "c", "x0", "v0"],
    "harmonic_oscillator": ["h", "omega", "x0", "v0"],
    "bouncing_ball": ["h", "y0", "vy0", "g", "e", "smoothing"],
    "stiff_contact": ["h", "k", "c", "mass", "g", "y0", "vy0"],
    "double_pendulum": ["h", "g", "angles0", "rates0"],
}


@given(data=st.data(), name=st.sampled_from(sorted(FACTORY_KWARGS)))
def test_system_factories(data, name):
    factory = getattr(systems, name)
    kwargs = {}
    for arg in FACTORY_KWARGS[name]:
        if data.draw(st.booleans()):
            kwargs[arg] = data.draw(values if arg in ("angles0", "rates0") else scalars)

    def call():
        sys = factory(**kwargs)
        out = diffsim.rollout(sys.step, sys.s0, sys.theta, 3, trajectory=False)
        # a finite start may still leave the model's domain in 3 steps (h = 1e38): the
        # library's share is to start from what the user asked for, so only the
        # start state and parameters are held to "finite" here
        return sys.s0, sys.theta, jax.tree_util.tree_map(jnp.shape, out)

    check(call, [*FACTORY_KWARGS[name], "s0", "theta"])


@given(
    y0=numbers,
    vy0=numbers,
    e=numbers,
    h=numbers,
    num_steps=ints,
    toi=st.booleans(),
)
def test_bouncing_ball_helpers(y0, vy0, e, h, num_steps, toi):
    names = ["y0", "vy0", "e", "g", "h", "num_steps"]

    def call():
        return systems.bouncing_ball_final_state(y0, vy0, e, h=h, num_steps=num_steps, toi=toi)

    def result_ok(r):
        # the state may legitimately overflow for h·v beyond float range; the inputs were
        # finite, so only NaN (a wrong number) is a defect
        return all(not np.any(np.isnan(np.asarray(a))) for a in r)

    check(call, names, result_ok=result_ok)


# --- issue 26: constructor field types (D11), θ/step mismatch (D12) ----------------------

planes = st.one_of(
    st.sampled_from(["plane", None, 3.0, (1.0, 0.0), b"x", True]),
    st.builds(lambda: contact.Plane.ground()),
    st.builds(lambda: contact.Plane.wall(6.0, height=2.0)),
)
flags = st.one_of(st.booleans(), st.sampled_from(["yes", None, 1, 0, 0.0, "True", [], np.bool_(1)]))
choices = st.one_of(st.sampled_from(["substep", "linear", "project", "reflect"]), junk)


@given(
    kind=st.sampled_from(["restitution", "stop_dead", "penalty"]),
    plane=planes,
    toi=flags,
    location=choices,
    position=choices,
    kinematic=st.one_of(st.just(()), st.sampled_from([0, (0,), "ab", (0.5,), [1], None, (True,)])),
)
def test_contact_constructor_field_types(kind, plane, toi, location, position, kinematic):
    def call():
        if kind == "restitution":
            c = contact.Restitution(plane, toi=toi, location=location, position=position)
        elif kind == "stop_dead":
            c = contact.StopDead(plane, toi=toi, location=location)
        else:
            c = contact.PenaltySpring(plane, kinematic=kinematic)
        step = contact.WithContact(
            integrators.SemiImplicitEuler(lambda x, v, th: -9.81 + 0 * x, h=0.01), c
        )
        s0 = (jnp.array([5.0, 1.0]), jnp.array([4.0, 0.0]))
        return diffsim.rollout(step, s0, {"g": 9.81}, 3, trajectory=False)

    names = ["plane", "toi", "location", "position", "kinematic", "smoothing", "normal"]
    check(call, names, result_ok=no_nan)


FREE_SYSTEMS = {
    name: getattr(systems, name)()
    for name in ("free_particle", "bouncing_ball", "pendulum", "harmonic_oscillator")
}


@given(name=st.sampled_from(sorted(FREE_SYSTEMS)), theta=pytrees, s0=st.one_of(st.none(), pytrees))
def test_rollout_theta_and_state_the_step_does_not_read(name, theta, s0):
    sys = FREE_SYSTEMS[name]

    def call():
        return diffsim.rollout(sys.step, sys.s0 if s0 is None else s0, theta, 3, trajectory=False)

    check(call, ["theta", "s0", "h", "accel", "step"], result_ok=no_nan)


@given(
    name=st.sampled_from(["bouncing_ball", "free_particle", "pendulum", "double_pendulum"]),
    integrator=st.one_of(st.sampled_from(sorted(integrators.INTEGRATORS)), junk, st.just(int)),
    h=st.one_of(st.just(0.01), st.sampled_from([np.array([0.1, 0.2]), np.zeros((1,)), "0.1"])),
)
def test_system_integrator_and_step_types(name, integrator, h):
    registry = dict(integrators.INTEGRATORS)
    integ = (
        registry[integrator]
        if isinstance(integrator, str) and integrator in registry
        else integrator
    )

    def call():
        sys = getattr(systems, name)(h=h, integrator=integ)
        return diffsim.rollout(sys.step, sys.s0, sys.theta, 3, trajectory=False)

    check(call, ["integrator", "h"], result_ok=no_nan)
