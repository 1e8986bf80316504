"""Per-step and rollout Jacobians, by three routes that must agree.

(a) ``"autodiff"``: forward-mode autodiff through the whole rollout;
(b) ``"product"``: per-step Jacobians (by autodiff of one step) multiplied along the
    trajectory, :math:`∂s_T/∂s_0 = A_{T-1} \\cdots A_0`;
(c) ``"forward"`` / ``"adjoint"``: the user's *analytic* per-step Jacobians chained by the
    library — forward sensitivities :math:`S_{t+1} = A_t S_t,\\ P_{t+1} = A_t P_t + B_t`, or the
    backward adjoint :math:`Λ_t = Λ_{t+1} A_t,\\ G \\mathrel{+}= Λ_{t+1} B_t` — with no
    autodiff through the rollout.

Matrices index the state and θ in ``jax.flatten_util.ravel_pytree`` order: for a state
``(x, v)`` of scalars the order is (x, v), as in the article.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any, Literal, cast

import equinox as eqx
import jax
import jax.numpy as jnp
from jax.flatten_util import ravel_pytree

from ._checks import as_arrays, as_used, is_concrete
from ._rollout import call_step, check_step_output
from ._rollout import prepare as _prepare
from ._step import as_step
from ._types import Inputs, Matrix, Params, State, StepJacobian

Method = Literal["autodiff", "product", "forward", "adjoint"]
METHODS: tuple[str, ...] = ("autodiff", "product", "forward", "adjoint")


def _flat_step(step, s_like, theta_like):
    """``step`` as a map of flat vectors ``(s, θ, u) -> s'``."""
    _, unravel_s = ravel_pytree(s_like)
    _, unravel_p = ravel_pytree(theta_like)

    def f(s_flat, p_flat, u):
        out = call_step(step, unravel_s(s_flat), unravel_p(p_flat), u)
        return ravel_pytree(out)[0]

    return f


def _autodiff_step_jacobian(step, state, theta, u):
    s_flat, _ = ravel_pytree(state)
    p_flat, _ = ravel_pytree(theta)
    f = _flat_step(step, state, theta)
    return jax.jacfwd(f, argnums=(0, 1))(s_flat, p_flat, u)


def step_jacobian(
    step: Callable[..., State], state: State, theta: Params, u: Any = None
) -> tuple[Matrix, Matrix]:
    r"""Per-step Jacobians :math:`(∂s_{t+1}/∂s_t,\ ∂s_{t+1}/∂θ)` of ``step`` by autodiff.

    Args:
        step: ``step(state, theta[, u])``.
        state: the state :math:`s_t` at which to linearise.
        theta: parameters θ.
        u: this step's input, or ``None``.

    Returns:
        ``(A, B)``: ``A`` of shape (n_s, n_s) and ``B`` of shape (n_s, n_θ), in raveled order.

    Example:
        >>> from diffsim import step_jacobian
        >>> from diffsim.systems import free_particle
        >>> sys = free_particle(h=0.5)
        >>> A, B = step_jacobian(sys.step, sys.s0, sys.theta)
        >>> A.tolist()
        [[1.0, 0.5], [0.0, 1.0]]
    """
    if not callable(step):
        raise TypeError(f"step must be callable, got {step!r}")
    # differentiated: integer leaves become floats, as in rollout_jacobian
    state = as_arrays("state", state, floating=True)
    theta = as_arrays("theta", theta, floating=True)
    if u is not None:
        u = as_arrays("u", u)
    check_step_output(step, state, theta, u)
    return _step_jacobian_jit(step, state, theta, u)


_step_jacobian_jit = eqx.filter_jit(_autodiff_step_jacobian)


def _resolve_step_jacobian(step, given, method) -> Callable[..., tuple[Matrix, Matrix]]:
    if given is not None:
        if not callable(given):
            raise TypeError(f"step_jacobian must be callable, got {given!r}")
        return cast(Callable[..., tuple[Matrix, Matrix]], given)
    declared = as_step(step)
    if not declared.has_jacobian:
        raise ValueError(
            f"method={method!r} chains analytic per-step Jacobians: pass "
            "step_jacobian=fn(state, theta[, u]) -> (A, B), or use a step that declares "
            "an analytic jacobian (has_jacobian; every diffsim integrator does)"
        )
    return declared.jacobian


def _call_jac(jac, s, theta, u):
    return jac(s, theta) if u is None else jac(s, theta, u)


def _check_jacobian_shapes(jac, s0, theta, u0):
    n_s = ravel_pytree(s0)[0].size
    n_p = ravel_pytree(theta)[0].size
    A, B = jax.eval_shape(lambda s, p, u: _call_jac(jac, s, p, u), s0, theta, u0)
    if A.shape != (n_s, n_s) or B.shape != (n_s, n_p):
        raise ValueError(
            f"step_jacobian must return (A, B) with A of shape ({n_s}, {n_s}) and B of shape "
            f"({n_s}, {n_p}) (raveled state and theta), got {A.shape} and {B.shape}"
        )


def _jacobians_along(step, jac, s0, theta, inputs, num_steps):
    """Scan the rollout and chain Jacobians forwards: returns (S_T, P_T)."""
    n_s = ravel_pytree(s0)[0].size
    n_p = ravel_pytree(theta)[0].size
    dtype = ravel_pytree(s0)[0].dtype

    def body(carry, u):
        s, S, P = carry
        A, B = jac(s, theta, u)
        return (call_step(step, s, theta, u), A @ S, A @ P + B), None

    init = (s0, jnp.eye(n_s, dtype=dtype), jnp.zeros((n_s, n_p), dtype))
    (_, S, P), _ = jax.lax.scan(body, init, inputs, length=num_steps)
    return S, P


@eqx.filter_jit
def _product_jit(step, s0, theta, inputs, num_steps):
    return _jacobians_along(
        step, lambda s, p, u: _autodiff_step_jacobian(step, s, p, u), s0, theta, inputs, num_steps
    )


@eqx.filter_jit
def _forward_jit(step, jac, s0, theta, inputs, num_steps):
    return _jacobians_along(
        step, lambda s, p, u: _call_jac(jac, s, p, u), s0, theta, inputs, num_steps
    )


@eqx.filter_jit
def _autodiff_jit(step, s0, theta, inputs, num_steps):
    s_flat, unravel_s = ravel_pytree(s0)
    p_flat, unravel_p = ravel_pytree(theta)

    def final(sf, pf):
        def body(s, u):
            return call_step(step, s, unravel_p(pf), u), None

        sT, _ = jax.lax.scan(body, unravel_s(sf), inputs, length=num_steps)
        return ravel_pytree(sT)[0]

    return jax.jacfwd(final, argnums=(0, 1))(s_flat, p_flat)


@eqx.filter_jit
def _adjoint_jit(step, jac, s0, theta, inputs, num_steps, cotangents):
    """Backward adjoint: cotangent rows Λ (k × n_s) pulled back from s_T to (s_0, θ)."""
    n_p = ravel_pytree(theta)[0].size

    def fwd(s, u):
        return call_step(step, s, theta, u), s  # keep s_t: the linearisation point

    _, states = jax.lax.scan(fwd, s0, inputs, length=num_steps)

    def bwd(carry, xs):
        lam, g = carry
        s, u = xs
        A, B = _call_jac(jac, s, theta, u)
        return (lam @ A, g + lam @ B), None

    init = (cotangents, jnp.zeros((cotangents.shape[0], n_p), cotangents.dtype))
    (lam0, g), _ = jax.lax.scan(bwd, init, (states, inputs), length=num_steps, reverse=True)
    return lam0, g


def rollout_jacobian(
    step: Callable[..., State],
    s0: State,
    theta: Params,
    num_steps: int,
    *,
    method: Method = "autodiff",
    inputs: Inputs | None = None,
    step_jacobian: StepJacobian | None = None,
) -> tuple[Matrix, Matrix]:
    r"""Rollout Jacobians :math:`(∂s_T/∂s_0,\ ∂s_T/∂θ)` by the chosen route.

    Args:
        step: ``step(state, theta[, u])``.
        s0: initial state (pytree). theta: parameters (pytree).
        num_steps: T >= 1.
        method: ``"autodiff"`` (through the scan), ``"product"`` (per-step autodiff
            Jacobians multiplied along the trajectory), ``"forward"`` (analytic per-step
            Jacobians, forward sensitivities) or ``"adjoint"`` (analytic per-step Jacobians,
            backward adjoint).
        inputs: optional per-step inputs, leading axis T.
        step_jacobian: analytic ``fn(state, theta[, u]) -> (A, B)`` for ``"forward"`` and
            ``"adjoint"``; defaults to ``step.jacobian`` (every diffsim integrator has one).

    Returns:
        ``(J_s0, J_theta)`` of shapes (n_s, n_s) and (n_s, n_θ), raveled order.

    Example:
        >>> from diffsim import rollout_jacobian
        >>> from diffsim.systems import free_particle
        >>> sys = free_particle(h=1 / 60)
        >>> J, _ = rollout_jacobian(sys.step, sys.s0, sys.theta, 2, method="adjoint")
        >>> [[round(float(c), 4) for c in row] for row in J]
        [[1.0, 0.0333], [0.0, 1.0]]
    """
    if method not in METHODS:
        raise ValueError(f"method must be one of {METHODS}, got {method!r}")
    s0, theta, num_steps, inputs, u0 = _prepare(step, s0, theta, num_steps, inputs, floating=True)
    if method == "autodiff":
        return _autodiff_jit(step, s0, theta, inputs, num_steps)
    if method == "product":
        return _product_jit(step, s0, theta, inputs, num_steps)
    jac = _resolve_step_jacobian(step, step_jacobian, method)
    _check_jacobian_shapes(jac, s0, theta, u0)
    if method == "forward":
        return _forward_jit(step, jac, s0, theta, inputs, num_steps)
    n_s = ravel_pytree(s0)[0].size
    eye = jnp.eye(n_s, dtype=ravel_pytree(s0)[0].dtype)
    return _adjoint_jit(step, jac, s0, theta, inputs, num_steps, eye)


def forward_sensitivity(
    step: Callable[..., State],
    s0: State,
    theta: Params,
    num_steps: int,
    *,
    inputs: Inputs | None = None,
    step_jacobian: StepJacobian | None = None,
) -> tuple[Matrix, Matrix]:
    """Forward sensitivities from analytic per-step Jacobians (``method="forward"``).

    Examples:
        >>> from diffsim import forward_sensitivity
        >>> from diffsim.systems import free_particle
        >>> sys = free_particle(h=0.5)
        >>> J_s0, J_theta = forward_sensitivity(sys.step, sys.s0, sys.theta, 4)  # analytic, chained
        >>> J_s0.tolist(), J_theta.tolist()  # [[1, T h], [0, 1]] and (h² T(T+1)/2, T h)
        ([[1.0, 2.0], [0.0, 1.0]], [[2.5], [2.0]])
    """
    return rollout_jacobian(
        step, s0, theta, num_steps, method="forward", inputs=inputs, step_jacobian=step_jacobian
    )


def adjoint_vjp(
    step: Callable[..., State],
    s0: State,
    theta: Params,
    num_steps: int,
    cotangent: State,
    *,
    inputs: Inputs | None = None,
    step_jacobian: StepJacobian | None = None,
) -> tuple[State, Params]:
    r"""Backward adjoint: pull a cotangent on :math:`s_T` back to :math:`(s_0, θ)`.

    With :math:`λ_T` = ``cotangent`` (e.g. :math:`∂L/∂s_T`), runs
    :math:`λ_t = A_t^\top λ_{t+1}` and :math:`g_θ = \sum_t B_t^\top λ_{t+1}` backwards in
    time from analytic per-step Jacobians: the gradient of any loss of :math:`s_T`, without
    autodiff through the rollout. Cost per step: one Jacobian evaluation and two
    vector–matrix products.

    Returns:
        ``(dL/ds0, dL/dtheta)`` as pytrees shaped like ``s0`` and ``theta``.

    Examples:
        >>> import jax.numpy as jnp
        >>> from diffsim import adjoint_vjp
        >>> from diffsim.systems import free_particle
        >>> sys = free_particle(h=0.5)
        >>> g_s0, g_theta = adjoint_vjp(sys.step, sys.s0, sys.theta, 4, cotangent=(1.0, 0.0))
        >>> [float(c) for c in g_s0], float(g_theta["a"])  # ∂x_T/∂(x0, v0), ∂x_T/∂a
        ([1.0, 2.0], 2.5)
    """
    s0, theta, num_steps, inputs, u0 = _prepare(step, s0, theta, num_steps, inputs, floating=True)
    cotangent = as_arrays("cotangent", cotangent, floating=True)
    lam_flat, _ = ravel_pytree(cotangent)
    s_flat, unravel_s = ravel_pytree(s0)
    if is_concrete(lam_flat):  # in the state's dtype: 1e300 is inf in float32
        as_used("cotangent", lam_flat, s_flat.dtype)
    _, unravel_p = ravel_pytree(theta)
    if lam_flat.shape != s_flat.shape:
        raise ValueError(
            f"cotangent must have the shape of the state ({s_flat.size} numbers), "
            f"got {lam_flat.size}"
        )
    jac = _resolve_step_jacobian(step, step_jacobian, "adjoint")
    _check_jacobian_shapes(jac, s0, theta, u0)
    lam0, g = _adjoint_jit(
        step, jac, s0, theta, inputs, num_steps, lam_flat.astype(s_flat.dtype)[None, :]
    )
    return unravel_s(lam0[0]), unravel_p(g[0])
