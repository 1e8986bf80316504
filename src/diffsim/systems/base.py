"""The system interface: a step with default initial state and parameters."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import equinox as eqx

from .._checks import Domain, check_domains


class System(eqx.Module):
    """A simulator ready to roll out: ``step``, default ``s0`` and ``theta``.

    Attributes:
        name: short name (static).
        step: the pure step ``step(state, theta[, u])`` — for integrated systems an
            :class:`diffsim.integrators.Integrator`, which also has an analytic ``.jacobian``.
        s0: default initial state (pytree).
        theta: default parameters (pytree).
        loss: optional scalar loss of a trajectory or final state (static callable).
        u0: an input for one step, for a step that takes one (``step(state, theta, u)``:
            the mass-spring chain's force); ``None`` for ``step(state, theta)``. With it,
            :meth:`step_once` calls either kind the same way.
        domains: ``(name, Domain)`` pairs: where each named entry of θ is physical, the
            range the factory accepts (:meth:`check_physical`); names left out are not
            restricted.

    Examples:
        >>> import diffsim
        >>> from diffsim.systems import free_particle
        >>> sys = free_particle(h=0.5, a=0.0, v0=2.0)  # factories return a System
        >>> x, v = diffsim.rollout(sys.step, sys.s0, sys.theta, 2, trajectory=False)
        >>> sys.name, float(x), float(v)
        ('free_particle', 2.0, 2.0)
    """

    name: str = eqx.field(static=True)
    step: Callable[..., Any]
    s0: Any
    theta: Any
    loss: Callable[..., Any] | None = eqx.field(static=True, default=None)
    u0: Any = None
    domains: tuple[tuple[str, Domain], ...] = eqx.field(static=True, default=())

    def check_physical(self, theta: Any = None) -> None:
        """Raise ``ValueError`` naming the first entry of ``theta`` (default :attr:`theta`)
        outside the range where this system's factory accepts it (:attr:`domains`: a mass
        > 0, a restitution in [0, 1], ...); what a recording made at that θ would simulate
        is not the physical system.

        Example:
            >>> from diffsim.systems import mass_spring
            >>> sys = mass_spring(3)
            >>> sys.check_physical({"m": [1.0, 0.0, 2.0], "k": sys.theta["k"]})
            Traceback (most recent call last):
            ...
            ValueError: theta['m'][1] = 0 is outside (0, inf), the range of a mass
        """
        check_domains("theta", self.theta if theta is None else theta, dict(self.domains))

    def step_once(self, state: Any = None, theta: Any = None) -> Any:
        """One step from ``state`` (default :attr:`s0`) with ``theta`` (default
        :attr:`theta`), given :attr:`u0` when the step takes an input.

        Example:
            >>> from diffsim.systems import mass_spring
            >>> x, v = mass_spring(2, h=0.01).step_once()  # u0 = 0 N on the last mass
            >>> round(float(v[0]), 3)  # −(k₁ + k₂) x₁ / m₁ · h = −(20 + 30) · 0.1 / 1 · 0.01
            -0.05
        """
        state = self.s0 if state is None else state
        theta = self.theta if theta is None else theta
        return self.step(state, theta) if self.u0 is None else self.step(state, theta, self.u0)
