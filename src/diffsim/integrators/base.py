"""The integrator interface: a step builder over (x, v) states with an acceleration.

An integrator is a pure step ``(x, v) -> (x', v')`` for ``x'' = a(x, v, θ[, u])`` with time
step ``h``. It also ships its analytic per-step Jacobian (:meth:`Integrator.jacobian`), built
from the scheme's own formulas and the acceleration's derivatives, so the library can chain
it forwards or backwards without autodiff through the rollout.
"""

from __future__ import annotations

import abc
import dataclasses
from collections.abc import Callable
from typing import Any, ClassVar

import equinox as eqx
import jax
import jax.numpy as jnp
from jax.flatten_util import ravel_pytree

from .._checks import as_arrays, check_positive
from .._coords import Coords
from .._step import AbstractStep
from .._types import Matrix, Params

Acceleration = Callable[..., Any]
"""``a(x, v, theta)`` or, with a control, ``a(x, v, theta, u)``; returns an array shaped like x."""

AccelerationJacobian = Callable[..., tuple[Matrix, Matrix, Matrix]]
"""``(∂a/∂x, ∂a/∂v, ∂a/∂θ)`` of shapes (n, n), (n, n), (n, n_θ) with θ raveled."""


def _as_array(h):
    # checked before the conversion, in the dtype it converts to: h=1e-50 would become 0
    # in float32 (and 1e300 inf), which the check after it could only report as 0 or inf
    check_positive("h", h)
    return jnp.asarray(h)


SCHEMES: list[str] = []
"""The class names of the package's schemes, for messages: filled by ``diffsim.integrators``
from its registry (``INTEGRATORS``), which this module sits below."""


def check_integrator_class(integrator: Any, name: str = "integrator") -> type[Integrator]:
    """``integrator`` when it is an :class:`Integrator` class (what the system factories
    take), else ``TypeError`` naming ``name`` and the registered choices.

    Examples:
        >>> from diffsim.integrators import RK4, check_integrator_class
        >>> check_integrator_class(RK4) is RK4
        True
    """
    if isinstance(integrator, type) and issubclass(integrator, Integrator):
        if getattr(integrator, "__abstractmethods__", None):
            raise TypeError(f"{name} must be a concrete Integrator class, got {integrator!r}")
        return integrator
    choices = ", ".join(sorted(SCHEMES))
    raise TypeError(
        f"{name} must be an Integrator class (one of {choices}, from diffsim.integrators), "
        f"got {integrator!r}"
    )


class Lin(eqx.Module):
    """A value with its derivative matrix ``D = ∂value/∂(x, v, θ)`` (rows = value entries).

    Integrator schemes are written once over ``Lin``; with ``D=None`` they compute values
    only, with ``D`` they also apply the chain rule analytically, stage by stage.

    Examples:
        >>> import jax.numpy as jnp
        >>> from diffsim.integrators import Lin
        >>> x = Lin(jnp.array([2.0]), jnp.array([[1.0, 0.0]]))  # x and ∂x/∂(x, v)
        >>> v = Lin(jnp.array([3.0]), jnp.array([[0.0, 1.0]]))
        >>> y = x + 0.5 * v  # the value and the chain rule, together
        >>> float(y.val[0]), y.D.tolist()
        (3.5, [[1.0, 0.5]])
    """

    val: Any
    D: Any = None

    def __add__(self, other: Lin) -> Lin:
        D = None if self.D is None else self.D + other.D
        return Lin(self.val + other.val, D)

    def __sub__(self, other: Lin) -> Lin:
        D = None if self.D is None else self.D - other.D
        return Lin(self.val - other.val, D)

    def __rmul__(self, c: Any) -> Lin:
        return Lin(c * self.val, None if self.D is None else c * self.D)


class CoordinateAcceleration(abc.ABC):
    """An acceleration that can also be evaluated on :class:`~diffsim._coords.Coords`.

    ``a(x, v, theta[, u])`` on the user's arrays, and :meth:`on_coords` on the coordinate
    view, so that accelerations built by the library (e.g. gravity plus penalty-spring
    contact forces) stay coordinate-wise inside a step.

    Examples:
        >>> import jax.numpy as jnp
        >>> from diffsim.integrators import CoordinateAcceleration, SemiImplicitEuler
        >>> class Drag(CoordinateAcceleration):
        ...     def __call__(self, x, v, theta, *u):
        ...         return -theta["c"] * v
        ...     def on_coords(self, x, v, theta, u):
        ...         return v.like([-theta["c"] * p for p in v.parts])
        >>> step = SemiImplicitEuler(Drag(), h=0.1)
        >>> x, v = step((jnp.zeros(2), jnp.ones(2)), {"c": 1.0})
        >>> [round(float(c), 4) for c in v]
        [0.9, 0.9]
    """

    @abc.abstractmethod
    def __call__(self, x, v, theta, *u): ...

    @abc.abstractmethod
    def on_coords(self, x: Coords, v: Coords, theta, u) -> Coords: ...


class Integrator(AbstractStep):
    """Abstract base: a time step of ``x'' = a(x, v, θ[, u])`` over states ``(x, v)``.

    ``x`` and ``v`` are arrays (or pytrees) of equal structure; the step is
    ``step((x, v), theta[, u]) -> (x', v')`` and :meth:`jacobian` its analytic per-step
    Jacobian. Subclasses implement :meth:`step_coords` (the step on the coordinate view,
    which :meth:`__call__` wraps) and :meth:`jacobian`; explicit one-step schemes derive from
    :class:`ExplicitIntegrator` and write only their ``scheme``.

    Attributes:
        accel: the acceleration ``a(x, v, theta[, u])`` (static: a hashable callable).
        h: time step in seconds (> 0); an array, so it can be traced and differentiated.
        accel_jacobian: optional analytic ``(∂a/∂x, ∂a/∂v, ∂a/∂θ)``; when absent the
            acceleration alone (never the rollout) is differentiated by ``jax.jacfwd``.

    Examples:
        >>> from diffsim.integrators import INTEGRATORS, Integrator
        >>> all(issubclass(cls, Integrator) for cls in INTEGRATORS.values())
        True
        >>> step = INTEGRATORS["rk4"](lambda x, v, th: -x, h=0.1)
        >>> [round(float(c), 6) for c in step((1.0, 0.0), {})]  # cos, −sin at t = 0.1
        [0.995004, -0.099833]
    """

    accel: Acceleration = eqx.field(static=True)
    h: Any = eqx.field(converter=_as_array)
    accel_jacobian: AccelerationJacobian | None = eqx.field(static=True, default=None)

    order: ClassVar[int]  # every concrete integrator declares it (checked when built)
    symplectic: ClassVar[bool] = False
    time_step_refinable: ClassVar[bool] = True
    has_jacobian: ClassVar[bool] = True

    def __check_init__(self):
        # declared by the integrator's own class or one between it and Integrator (the
        # step interface's default of 1 is no declaration of a scheme's accuracy)
        order = next(
            (
                vars(c)["order"]
                for c in type(self).__mro__
                if issubclass(c, Integrator) and "order" in vars(c)
            ),
            None,
        )
        if isinstance(order, bool) or not isinstance(order, int) or order < 1:
            raise TypeError(
                f"{type(self).__name__} must declare its order of accuracy as a class "
                f"attribute, an integer >= 1 (order = 1 for Euler), got {order!r}"
            )
        if not callable(self.accel):
            raise TypeError(f"accel must be callable a(x, v, theta[, u]), got {self.accel!r}")
        if self.accel_jacobian is not None and not callable(self.accel_jacobian):
            raise TypeError(
                f"accel_jacobian must be None or callable (x, v, theta[, u]) -> (∂a/∂x, "
                f"∂a/∂v, ∂a/∂θ), got {self.accel_jacobian!r}"
            )
        check_positive("h", self.h)
        if jnp.ndim(self.h) != 0:  # one step for the whole state (vmap batches it unseen)
            raise ValueError(
                f"h must be a scalar time step (seconds), got an array of shape "
                f"{tuple(jnp.shape(self.h))}; vmap over h to run several step sizes"
            )

    # --- the acceleration and its derivatives -------------------------------------------
    def _a(self, x, v, theta, u):
        a = self.accel(x, v, theta) if u is None else self.accel(x, v, theta, u)

        def fit(ai, xi):
            ai = jnp.asarray(ai, jnp.result_type(xi))
            try:
                return jnp.broadcast_to(ai, jnp.shape(xi))
            except ValueError:  # named, not JAX's "Cannot broadcast to shape ..."
                raise ValueError(
                    f"accel(x, v, theta) returned shape {tuple(ai.shape)} for a position of "
                    f"shape {tuple(jnp.shape(xi))}: theta (or the state) has entries of the "
                    f"wrong shape for this acceleration"
                ) from None

        return jax.tree_util.tree_map(fit, a, x)

    def _a_coords(self, x: Coords, v: Coords, theta, u) -> Coords:
        if isinstance(self.accel, CoordinateAcceleration):
            return self.accel.on_coords(x, v, theta, u)
        a = Coords.split(self._a(x.stack(), v.stack(), theta, u))
        return x.like(a.parts)

    def _a_jac(self, x, v, theta, u):
        n = jnp.size(x)
        if self.accel_jacobian is not None:
            args = (x, v, theta) if u is None else (x, v, theta, u)
            Ax, Av, At = self.accel_jacobian(*args)
            p = ravel_pytree(theta)[0].size
            return (
                jnp.reshape(Ax, (n, n)),
                jnp.reshape(Av, (n, n)),
                jnp.reshape(At, (n, p)),
            )
        p_flat, unravel = ravel_pytree(theta)

        def flat_a(xf, vf, pf):
            a = self._a(xf.reshape(jnp.shape(x)), vf.reshape(jnp.shape(v)), unravel(pf), u)
            return jnp.ravel(a)

        return jax.jacfwd(flat_a, argnums=(0, 1, 2))(jnp.ravel(x), jnp.ravel(v), p_flat)

    # --- the contract --------------------------------------------------------------------
    @abc.abstractmethod
    def step_coords(self, x: Coords, v: Coords, theta: Params, u: Any) -> tuple[Coords, Coords]:
        """One step on the coordinate view: ``(x, v) -> (x', v')`` as :class:`Coords`."""

    @abc.abstractmethod
    def jacobian(self, state, theta: Params, u: Any = None) -> tuple[Matrix, Matrix]:
        r"""Analytic per-step Jacobians ``(∂(x',v')/∂(x,v), ∂(x',v')/∂θ)``.

        Rows and columns in raveled order: all of x then all of v; θ raveled.
        """

    def with_time_step(self, h: Any) -> Integrator:
        """The same integrator at time step ``h``."""
        return eqx.tree_at(lambda s: s.h, self, jnp.asarray(h))

    def __call__(self, state, theta: Params, u: Any = None):
        """``(x, v) -> (x', v')``: one step of length ``h``."""
        x, v = _unpack(state)
        x1, v1 = self.step_coords(Coords.split(x), Coords.split(v), theta, u)
        return x1.stack(), v1.stack()


class ExplicitIntegrator(Integrator):
    """An explicit one-step scheme written once over :class:`Lin` values.

    The same ``scheme`` gives the step (on coordinates, ``D=None``) and its analytic
    Jacobian (on raveled arrays with derivative matrices).

    Examples:
        >>> from diffsim.integrators import ExplicitIntegrator, Lin
        >>> class Euler(ExplicitIntegrator):  # the scheme, once: step and analytic Jacobian
        ...     order = 1
        ...     def scheme(self, x, v, theta, u, Dtheta):
        ...         a = self.lin_accel(x, v, theta, u, Dtheta)
        ...         return x + self.h * v, v + self.h * a
        >>> step = Euler(lambda x, v, th: -th * x, h=0.5)
        >>> A, B = step.jacobian((1.0, 0.0), 2.0)
        >>> A.tolist(), B.tolist()
        ([[1.0, 0.5], [-1.0, 1.0]], [[0.0], [-0.5]])
    """

    def lin_accel(self, x: Lin, v: Lin, theta: Params, u: Any, Dtheta: Any) -> Lin:
        """``a(x, v, θ)`` as a ``Lin``: ``D_a = A_x D_x + A_v D_v + A_θ D_θ``."""
        if x.D is None:
            return Lin(self._a_coords(x.val, v.val, theta, u))
        a = self._a(x.val, v.val, theta, u)
        Ax, Av, At = self._a_jac(x.val, v.val, theta, u)
        return Lin(a, Ax @ x.D + Av @ v.D + At @ Dtheta)

    @abc.abstractmethod
    def scheme(self, x: Lin, v: Lin, theta: Params, u: Any, Dtheta: Any) -> tuple[Lin, Lin]:
        """One step of the method over ``Lin`` values: returns ``(x', v')``."""

    def step_coords(self, x: Coords, v: Coords, theta: Params, u: Any) -> tuple[Coords, Coords]:
        x1, v1 = self.scheme(Lin(x), Lin(v), theta, u, None)
        return x1.val, v1.val

    def jacobian(self, state, theta: Params, u: Any = None) -> tuple[Matrix, Matrix]:
        x, v = _unpack(state)
        if not isinstance(x, jax.Array):  # a pytree state: the same scheme on the raveled one
            xf, unravel = ravel_pytree(x)
            accel = _RaveledAccel(self.accel, unravel)
            flat = dataclasses.replace(self, accel=accel, accel_jacobian=None)
            return flat.jacobian((xf, ravel_pytree(v)[0]), theta, u)
        n = jnp.size(x)
        p = ravel_pytree(theta)[0].size
        dtype = jnp.result_type(x, v, float)
        eye = jnp.eye(2 * n + p, dtype=dtype)
        Dx, Dv, Dt = eye[:n], eye[n : 2 * n], eye[2 * n :]
        x0 = Lin(x.astype(dtype), Dx)
        v0 = Lin(v.astype(dtype), Dv)
        x1, v1 = self.scheme(x0, v0, theta, u, Dt)
        D = jnp.concatenate([x1.D, v1.D], axis=0)
        return D[:, : 2 * n], D[:, 2 * n :]


class _RaveledAccel:
    """The user's acceleration seen on raveled states (for Jacobians of pytree states)."""

    def __init__(self, accel: Acceleration, unravel: Callable[[Any], Any]):
        self.accel, self.unravel = accel, unravel

    def __call__(self, x, v, theta, *u):
        return ravel_pytree(self.accel(self.unravel(x), self.unravel(v), theta, *u))[0]


def _unpack(state):
    if not (isinstance(state, (tuple, list)) and len(state) == 2):
        raise TypeError(
            f"state must be a pair (x, v) of arrays (or pytrees) of equal shape, "
            f"got {type(state).__name__}"
        )
    # a concrete state (a step called directly, not inside a rollout's trace) is checked as
    # the step computes with it: numeric and finite in its dtype, named state[0] / state[1]
    x, v = (as_arrays(f"state[{i}]", a) for i, a in enumerate(state))
    sx = jax.tree_util.tree_map(jnp.shape, x)
    sv = jax.tree_util.tree_map(jnp.shape, v)
    if jax.tree_util.tree_structure(x) != jax.tree_util.tree_structure(v) or sx != sv:
        raise ValueError(f"state (x, v) must have equal shapes, got {sx} and {sv}")
    return x, v
