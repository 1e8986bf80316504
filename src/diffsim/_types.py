"""Type aliases used across diffsim's public signatures."""

from __future__ import annotations

from typing import Any, Protocol

from jaxtyping import Array, ArrayLike, Float, PyTree

State = PyTree[ArrayLike]
"""A simulator state: any pytree of arrays (for integrators, a tuple ``(x, v)``)."""

Params = PyTree[ArrayLike]
"""Parameters θ: any pytree of arrays (masses, stiffnesses, launch speeds, ...)."""

Inputs = PyTree[ArrayLike]
"""Per-step inputs (controls) ``u_t``: a pytree whose leaves have leading axis ``num_steps``."""

Matrix = Float[Array, "m n"]


class StepJacobian(Protocol):
    """Analytic per-step Jacobians ``(∂s_{t+1}/∂s_t, ∂s_{t+1}/∂θ)`` as matrices.

    Rows and columns follow ``jax.flatten_util.ravel_pytree`` order of the state and of θ.
    """

    def __call__(self, state: State, theta: Params, *args: Any) -> tuple[Matrix, Matrix]: ...
