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
    """

    name: str = eqx.field(static=True)
    step: Callable[..., Any]
    s0: Any
    theta: Any
    loss: Callable[..., Any] | None = eqx.field(static=True, default=None)
