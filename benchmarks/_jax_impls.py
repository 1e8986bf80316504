"""diffsim and plain-JAX implementations of the task (see :mod:`benchmarks.task`)."""

from __future__ import annotations

import jax
import jax.numpy as jnp
import numpy as np

from .task import GH, X_TARGET, Y_TARGET, E, G, H, initial_state


def ball_step(state, theta):
    """One step of the task as a diffsim step: a pure ``step(state, theta) -> state``.

    ``state`` is a struct of arrays ``(x, y, vx, vy)``; ``theta`` holds the physical
    parameters ``g`` and ``e`` as arrays, so they are differentiable and vmappable.
    """
    x, y, vx, vy = state
    vy = vy - theta["g"] * H
    x = x + vx * H
    y = y + vy * H
    hit = (y < 0) & (vy < 0)
    return x, jnp.where(hit, -y, y), vx, jnp.where(hit, -theta["e"] * vy, vy)


def final_loss(state):
    x, y, _, _ = state
    return jnp.sum((x - X_TARGET) ** 2 + (y - Y_TARGET) ** 2)


class _JaxLoss:
    """A JAX loss ``loss(vy0, x0, y0, vx0)``, jitted for the forward and for value-and-grad."""

    def __init__(self, n: int, loss) -> None:
        x0, y0, vx0, vy0 = (jnp.asarray(a) for a in initial_state(n))
        self._args = (vy0, x0, y0, vx0)
        self._loss = jax.jit(loss)
        self._grad = jax.jit(jax.value_and_grad(loss))

    def forward(self) -> float:
        return float(self._loss(*self._args))

    def gradient(self) -> tuple[float, np.ndarray]:
        value, g = self._grad(*self._args)
        return float(value), np.asarray(g)


class DiffsimImpl(_JaxLoss):
    """diffsim: ``diffsim.rollout(ball_step, s0, theta, T, trajectory=False)``."""

    name = "diffsim"

    def __init__(self, n: int, steps: int, **rollout_options):
        from diffsim import rollout

        theta = {"g": jnp.float32(G), "e": jnp.float32(E)}

        def loss(vy0, x0, y0, vx0):
            sT = rollout(
                ball_step, (x0, y0, vx0, vy0), theta, steps, trajectory=False, **rollout_options
            )
            return final_loss(sT)

        super().__init__(n, loss)


class PlainJaxImpl(_JaxLoss):
    """JAX the obvious way: ``jax.grad`` of a hand-written ``lax.scan``, constants inlined."""

    name = "jax"

    def __init__(self, n: int, steps: int):
        def body(carry, _):
            x, y, vx, vy = carry
            vy = vy - GH
            x = x + vx * H
            y = y + vy * H
            hit = (y < 0) & (vy < 0)
            return (x, jnp.where(hit, -y, y), vx, jnp.where(hit, -E * vy, vy)), None

        def loss(vy0, x0, y0, vx0):
            (x, y, _, _), _ = jax.lax.scan(body, (x0, y0, vx0, vy0), None, length=steps)
            return jnp.sum((x - X_TARGET) ** 2 + (y - Y_TARGET) ** 2)

        super().__init__(n, loss)


class NumpyImpl:
    """NumPy, forward only: the same loop over time on whole arrays."""

    name = "numpy"
    has_gradient = False

    def __init__(self, n: int, steps: int):
        self._s0 = initial_state(n)
        self._steps = steps

    def forward(self) -> float:
        x, y, vx, vy = (a.copy() for a in self._s0)
        h, gh, e = np.float32(H), np.float32(GH), np.float32(E)
        for _ in range(self._steps):
            vy -= gh
            x += vx * h
            y += vy * h
            hit = (y < 0) & (vy < 0)
            np.negative(y, out=y, where=hit)
            np.multiply(vy, -e, out=vy, where=hit)
        return float(np.sum((x - X_TARGET) ** 2 + (y - Y_TARGET) ** 2, dtype=np.float64))
