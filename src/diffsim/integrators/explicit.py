"""Explicit one-step schemes: semi-implicit Euler, explicit Euler, velocity Verlet, RK4."""

from __future__ import annotations

from typing import Any, ClassVar

from .._types import Params
from .base import ExplicitIntegrator, Lin


class SemiImplicitEuler(ExplicitIntegrator):
    r"""Semi-implicit (symplectic) Euler, the article's scheme.

    .. math:: v' = v + a(x, v)\,h, \qquad x' = x + v'\,h.

    First order, symplectic for velocity-independent forces. For constant acceleration
    the per-step Jacobian is ``[[1, h], [0, 1]]`` in (x, v) order.

    Example:
        >>> from diffsim.integrators import SemiImplicitEuler
        >>> step = SemiImplicitEuler(lambda x, v, th: th, h=0.5)
        >>> A, B = step.jacobian((0.0, 0.0), 1.0)
        >>> A.tolist(), B.tolist()
        ([[1.0, 0.5], [0.0, 1.0]], [[0.25], [0.5]])
    """

    order: ClassVar[int] = 1
    symplectic: ClassVar[bool] = True

    def scheme(self, x: Lin, v: Lin, theta: Params, u: Any, Dtheta: Any) -> tuple[Lin, Lin]:
        h = self.h
        v1 = v + h * self.lin_accel(x, v, theta, u, Dtheta)
        return x + h * v1, v1


class ExplicitEuler(ExplicitIntegrator):
    r"""Forward (explicit) Euler: :math:`x' = x + v h,\ v' = v + a(x, v) h`.

    First order, not symplectic: on an oscillator its energy grows like
    :math:`(1 + ω^2 h^2)^{t/h}`.

    Examples:
        >>> from diffsim.integrators import ExplicitEuler
        >>> step = ExplicitEuler(lambda x, v, th: -x, h=0.1)
        >>> x, v = step((1.0, 0.0), {})  # x uses the old v: x stays, v drops
        >>> float(x), round(float(v), 6)
        (1.0, -0.1)
    """

    order: ClassVar[int] = 1

    def scheme(self, x: Lin, v: Lin, theta: Params, u: Any, Dtheta: Any) -> tuple[Lin, Lin]:
        h = self.h
        a = self.lin_accel(x, v, theta, u, Dtheta)
        return x + h * v, v + h * a


class VelocityVerlet(ExplicitIntegrator):
    r"""Velocity Verlet (kick–drift–kick), second order and symplectic.

    .. math::
        v_{1/2} = v + \tfrac h2 a(x, v),\quad x' = x + h v_{1/2},\quad
        v' = v_{1/2} + \tfrac h2 a(x', v_{1/2}).

    With a velocity-dependent acceleration the half-step velocity stands in for v (the
    usual explicit choice); then the method is second order but no longer symplectic.

    Examples:
        >>> from diffsim.integrators import VelocityVerlet
        >>> step = VelocityVerlet(lambda x, v, th: -x, h=0.1)
        >>> [round(float(c), 6) for c in step((1.0, 0.0), {})]
        [0.995, -0.09975]
    """

    order: ClassVar[int] = 2
    symplectic: ClassVar[bool] = True

    def scheme(self, x: Lin, v: Lin, theta: Params, u: Any, Dtheta: Any) -> tuple[Lin, Lin]:
        h = self.h
        v_half = v + (h / 2) * self.lin_accel(x, v, theta, u, Dtheta)
        x1 = x + h * v_half
        v1 = v_half + (h / 2) * self.lin_accel(x1, v_half, theta, u, Dtheta)
        return x1, v1


class RK4(ExplicitIntegrator):
    r"""Classical fourth-order Runge–Kutta on :math:`y = (x, v)`, :math:`\dot y = (v, a)`.

    The control, if any, is held constant over the step (zero-order hold).

    Examples:
        >>> import math
        >>> from diffsim import rollout
        >>> from diffsim.integrators import RK4
        >>> step = RK4(lambda x, v, th: -th["w2"] * x, h=0.1)
        >>> x, v = rollout(step, (1.0, 0.0), {"w2": 1.0}, 10, trajectory=False)
        >>> abs(float(x) - math.cos(1.0)) < 1e-6  # fourth order
        True
    """

    order: ClassVar[int] = 4

    def scheme(self, x: Lin, v: Lin, theta: Params, u: Any, Dtheta: Any) -> tuple[Lin, Lin]:
        h = self.h

        def f(xs: Lin, vs: Lin) -> tuple[Lin, Lin]:
            return vs, self.lin_accel(xs, vs, theta, u, Dtheta)

        k1x, k1v = f(x, v)
        k2x, k2v = f(x + (h / 2) * k1x, v + (h / 2) * k1v)
        k3x, k3v = f(x + (h / 2) * k2x, v + (h / 2) * k2v)
        k4x, k4v = f(x + h * k3x, v + h * k3v)
        x1 = x + (h / 6) * (k1x + 2 * k2x + 2 * k3x + k4x)
        v1 = v + (h / 6) * (k1v + 2 * k2v + 2 * k3v + k4v)
        return x1, v1
