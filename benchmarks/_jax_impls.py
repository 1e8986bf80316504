"""diffsim and plain-JAX implementations of the task (see :mod:`benchmarks.task`)."""

from __future__ import annotations

import jax
import jax.numpy as jnp
import numpy as np

from .task import GH, X_TARGET, Y_TARGET, E, G, H, initial_state


def gravity(x, v, theta):
    """The task's acceleration ``(0, -g)`` for a position ``x = (x, y)``."""
    g = theta["g"]
    return jnp.stack([jnp.zeros_like(g), -g])


def ball_step():
    """One ball's step, composed from diffsim's public parts (what a user writes)::

        WithContact(SemiImplicitEuler(gravity, h), Restitution(Plane.ground(2), e="e",
                    position="reflect"))

    State ``(p, v)`` with ``p = (x, y)``, ``v = (vx, vy)``; θ = ``{"g", "e"}``.
    """
    from diffsim.contact import Plane, Restitution, WithContact
    from diffsim.integrators import SemiImplicitEuler

    return WithContact(
        SemiImplicitEuler(gravity, h=H),
        Restitution(Plane.ground(2), e="e", position="reflect"),
    )


THETA = {"g": np.float32(G), "e": np.float32(E)}


def ball_loss(step, steps: int, **rollout_options):
    """One ball's loss ``(x_T − 3)² + (y_T − 0.5)²`` as a function of its ``vy0``."""
    from diffsim import rollout

    theta = {k: jnp.asarray(v) for k, v in THETA.items()}

    def loss(vy0, x0, y0, vx0):
        s0 = (jnp.stack([x0, y0]), jnp.stack([vx0, vy0]))
        pT, _ = rollout(step, s0, theta, steps, trajectory=False, **rollout_options)
        return (pT[0] - X_TARGET) ** 2 + (pT[1] - Y_TARGET) ** 2

    return loss


class _JaxLoss:
    """A JAX loss ``loss(vy0, x0, y0, vx0)``, jitted for the forward and for value-and-grad."""

    threads = 1
    """XLA's CPU intra-op threading is off (``benchmarks._harness.XLA_FLAGS``)."""

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
    """diffsim, reverse mode: ``jax.value_and_grad`` of ``jax.vmap`` over ``diffsim.rollout``
    of the composed step (:func:`ball_step`), as the README shows."""

    name = "diffsim"

    def __init__(self, n: int, steps: int, **rollout_options):
        one = ball_loss(ball_step(), steps, **rollout_options)

        def loss(vy0, x0, y0, vx0):
            return jnp.sum(jax.vmap(one)(vy0, x0, y0, vx0))

        super().__init__(n, loss)


class DiffsimForwardImpl(DiffsimImpl):
    """diffsim in forward mode: ``diffsim.value_and_grad(..., batched=True, mode="forward")``
    (one tangent per ball, no stored residuals; ``mode="auto"`` picks it where reverse mode's
    residuals exceed the cache, see ``diffsim._grad.FORWARD_MIN_RESIDUAL_BYTES``)."""

    name = "diffsim-fwd"

    def __init__(self, n: int, steps: int, **rollout_options):
        super().__init__(n, steps, **rollout_options)
        self._one = ball_loss(ball_step(), steps, **rollout_options)

    def gradient(self) -> tuple[float, np.ndarray]:
        from diffsim import value_and_grad

        vy0, *rest = self._args
        res = value_and_grad(self._one, vy0, *rest, batched=True, mode="forward")
        return float(jnp.sum(res.value)), np.asarray(res.grad)


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
