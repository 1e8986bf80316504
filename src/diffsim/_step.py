"""The step interface: ``step(state, theta[, u]) -> state`` and what it declares.

Every step the library builds (integrators, contact steps, the MJX and Brax adapters)
derives from :class:`AbstractStep` and declares its capabilities as fields and class
variables: its time step, its order of accuracy, whether it can be rebuilt at another time
step, whether it ships an analytic Jacobian, which state fields are solver memory. The
library reads these declarations, never probes a step's attributes. A plain function is a
step too: :func:`as_step` wraps it in a :class:`FunctionStep`, which declares nothing.
"""

# no `from __future__ import annotations`: Equinox reads AbstractVar annotations unstringified
import abc
from collections.abc import Callable
from typing import TYPE_CHECKING, Any, ClassVar

import equinox as eqx
from equinox import AbstractVar

from ._types import Matrix, Params, State


class AbstractStep(eqx.Module):
    """A pure step ``s' = f(s, θ[, u])`` with its declared capabilities.

    Attributes:
        h: the time step in seconds, or ``None`` for a step without one.
        order: the order of accuracy of the time discretization (1 unless declared).
        time_step_refinable: whether :meth:`with_time_step` builds the same model at
            another time step (what the doctor's discretization check runs at h/2).
        has_jacobian: whether :meth:`jacobian` gives the analytic per-step Jacobian.
        solver_memory: the state fields that are a solver's memory (a warm start), not the
            physical state.
        mj_model: the ``mujoco.MjModel`` a MuJoCo step runs, else ``None``.

    Example:
        >>> from diffsim import AbstractStep, as_step
        >>> from diffsim.integrators import RK4
        >>> rk4 = RK4(lambda x, v, th: -x, h=0.1)
        >>> isinstance(rk4, AbstractStep), rk4.order, rk4.has_jacobian
        (True, 4, True)
        >>> plain = as_step(lambda s, th: s)  # a bare function declares nothing
        >>> plain.h, plain.time_step_refinable, plain.has_jacobian, plain.solver_memory
        (None, False, False, ())
    """

    if TYPE_CHECKING:  # type checkers read an abstract attribute as a dataclass field

        @property
        def h(self) -> Any: ...

    else:
        h: AbstractVar[Any]

    order: ClassVar[int] = 1
    time_step_refinable: ClassVar[bool] = False
    has_jacobian: ClassVar[bool] = False
    solver_memory: ClassVar[tuple[str, ...]] = ()

    @abc.abstractmethod
    def __call__(self, state: State, theta: Params, u: Any = None) -> State:
        """One step: ``s_{t+1}`` from ``s_t``, the parameters θ and this step's input ``u``."""

    @property
    def mj_model(self) -> Any:
        """The ``mujoco.MjModel`` of a MuJoCo step (``None``: not one)."""
        return None

    def with_time_step(self, h: Any) -> "AbstractStep":
        """The same step at time step ``h`` (steps that declare ``time_step_refinable``).

        Raises:
            TypeError: the step declares ``time_step_refinable = False``.
        """
        raise TypeError(
            f"{type(self).__name__} cannot be rebuilt at another time step "
            f"(time_step_refinable is False)"
        )

    def jacobian(self, state: State, theta: Params, u: Any = None) -> tuple[Matrix, Matrix]:
        """The analytic per-step Jacobians ``(∂s'/∂s, ∂s'/∂θ)`` (steps that declare
        ``has_jacobian``), rows and columns in raveled order.

        Raises:
            TypeError: the step declares ``has_jacobian = False``.
        """
        raise TypeError(f"{type(self).__name__} has no analytic Jacobian (has_jacobian is False)")


class FunctionStep(AbstractStep):
    """A plain function ``fn(state, theta[, u])`` as a step: no time step, no Jacobian.

    Attributes:
        fn: the function.

    Example:
        >>> from diffsim import FunctionStep
        >>> step = FunctionStep(lambda s, th, u: s + th * u)
        >>> float(step(1.0, 2.0, 0.5)), step.h
        (2.0, None)
    """

    fn: Callable[..., State]

    @property
    def h(self) -> None:
        return None

    def __call__(self, state: State, theta: Params, u: Any = None) -> State:
        return self.fn(state, theta) if u is None else self.fn(state, theta, u)


def as_step(step: Any) -> AbstractStep:
    """``step`` as an :class:`AbstractStep`: itself, or a bare callable in a
    :class:`FunctionStep`.

    Raises:
        TypeError: ``step`` is not callable.

    Example:
        >>> from diffsim import as_step
        >>> from diffsim.integrators import RK4
        >>> rk4 = RK4(lambda x, v, th: -x, h=0.1)
        >>> as_step(rk4) is rk4, type(as_step(lambda s, th: s)).__name__
        (True, 'FunctionStep')
    """
    if isinstance(step, AbstractStep):
        return step
    if not callable(step):
        raise TypeError(f"step must be callable, got {step!r}")
    return FunctionStep(step)
