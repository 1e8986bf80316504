"""The system interface: a step with default initial state and parameters."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import equinox as eqx


class System(eqx.Module):
    """A simulator ready to roll out: ``step``, default ``s0`` and ``theta``.

    Attributes:
        name: short name (static).
        step: the pure step ``step(state, theta[, u])`` — for integrated systems an
            :class:`diffsim.integrators.Integrator`, which also has an analytic ``.jacobian``.
        s0: default initial state (pytree).
        theta: default parameters (pytree).
        loss: optional scalar loss of a trajectory or final state (static callable).

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
