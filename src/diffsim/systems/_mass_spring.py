r"""A chain of masses and springs, and system identification by gradient descent.

Masses :math:`m_1..m_n` in a line, mass 1 tied to a fixed wall by spring :math:`k_1`, mass
i to mass i−1 by :math:`k_i`; the last mass is driven by a known force :math:`u(t)`:

.. math::
    m_i \ddot x_i = k_i (x_{i-1} - x_i) - k_{i+1} (x_i - x_{i+1}) + δ_{in} u,
    \qquad x_0 \equiv 0,\ k_{n+1} \equiv 0,

with displacements x (m). θ = ``{"m": (n,), "k": (n,)}`` (kg, N/m). Without the known
force only the ratios k/m would be identifiable (scaling every m and k together leaves the
motion unchanged); the drive fixes the scale.

:func:`mass_spring_identify` recovers θ from an observed trajectory by minimising the mean squared
position error with Optax Adam over log-parameters (so they stay positive); the whole
optimisation is one ``lax.scan`` under ``jit``.
"""

from __future__ import annotations

import jax
import jax.numpy as jnp
import optax

from .._checks import Domain, check_finite, check_finite_tree, check_int, check_positive
from .._rollout import rollout
from ..integrators import Integrator, SemiImplicitEuler, check_integrator_class
from .base import System


def _accel(x, v, theta, u):
    m, k = theta["m"], theta["k"]
    left = jnp.concatenate([jnp.zeros((1,), x.dtype), x[:-1]])
    k_next = jnp.concatenate([k[1:], jnp.zeros((1,), k.dtype)])
    right = jnp.concatenate([x[1:], jnp.zeros((1,), x.dtype)])
    f = k * (left - x) - k_next * (x - right)
    f = f.at[-1].add(u)
    return f / m


def mass_spring(
    n: int = 3,
    *,
    h: float = 0.01,
    masses=None,
    stiffnesses=None,
    x0=None,
    integrator: type[Integrator] = SemiImplicitEuler,
) -> System:
    """A chain of ``n`` masses; the step is ``step((x, v), theta, u)`` with u the force (N)
    on the last mass.

    Defaults: masses 1.0, 1.5, 2.0, ... kg, stiffnesses 20, 30, 40, ... N/m, at rest with
    the first mass displaced by 0.1 m. The loss is the mean squared position of the chain.

    Example:
        >>> from diffsim.systems import mass_spring
        >>> sys = mass_spring(2)
        >>> [round(float(m), 2) for m in sys.theta["m"]], [float(k) for k in sys.theta["k"]]
        ([1.0, 1.5], [20.0, 30.0])
    """
    n = check_int("n", n)
    check_positive("h", h)
    m = check_finite("masses", masses) if masses is not None else 1.0 + 0.5 * jnp.arange(n)
    k = (
        check_finite("stiffnesses", stiffnesses)
        if stiffnesses is not None
        else 20.0 + 10.0 * jnp.arange(n)
    )
    if m.shape != (n,) or k.shape != (n,):
        raise ValueError(f"masses and stiffnesses must have shape ({n},), got {m.shape}, {k.shape}")
    check_positive("masses", m)
    check_positive("stiffnesses", k)
    x = jnp.zeros(n).at[0].set(0.1) if x0 is None else check_finite("x0", x0)
    if x.shape != (n,):
        raise ValueError(f"x0 must have shape ({n},), got {x.shape}")
    s0 = (x, jnp.zeros_like(x))
    return System(
        "mass_spring",
        check_integrator_class(integrator)(_accel, h=h),
        s0,
        {"m": m, "k": k},
        loss=lambda traj: jnp.mean(traj[0] ** 2),
        u0=jnp.zeros(()),
        domains=(
            ("m", Domain(0.0, open_lower=True, what="a mass")),
            ("k", Domain(0.0, open_lower=True, what="a stiffness")),
        ),
    )


def mass_spring_drive(num_steps: int, h: float, amplitude: float = 1.0, omega: float = 3.0):
    """A known force ``u_t = amplitude · sin(ω t)`` on the last mass (N), shape (T,).

    Examples:
        >>> from diffsim.systems import mass_spring_drive
        >>> u = mass_spring_drive(100, 0.01)
        >>> u.shape, float(u[0])
        ((100,), 0.0)
    """
    num_steps = check_int("num_steps", num_steps)
    return amplitude * jnp.sin(omega * h * jnp.arange(num_steps))


def mass_spring_observe(system: System, theta, inputs):
    """Positions of the chain, shape (T, n), for parameters ``theta`` and forces ``inputs``.

    Examples:
        >>> from diffsim.systems import mass_spring, mass_spring_drive, mass_spring_observe
        >>> sys = mass_spring(3)
        >>> mass_spring_observe(sys, sys.theta, mass_spring_drive(50, 0.01)).shape
        (50, 3)
    """
    x, _ = rollout(
        system.step, system.s0, theta, inputs.shape[0], inputs=inputs, include_initial=False
    )
    return x


def mass_spring_identify(
    system: System,
    observed,
    inputs,
    theta_init,
    *,
    num_iters: int = 1500,
    learning_rate: float = 0.05,
):
    """Recover θ = {m, k} from observed positions by Adam on log-parameters.

    Args:
        system: the :func:`mass_spring` system (its step and s0 are used).
        observed: positions, shape (T, n).
        inputs: the known forces used to produce them, shape (T,).
        theta_init: starting guess ``{"m": (n,), "k": (n,)}`` (positive).
        num_iters: optimisation steps (>= 1). learning_rate: Adam step size (> 0).

    Returns:
        ``(theta, losses)``: the parameters with the lowest loss seen (Adam at a fixed step
        size wanders once it reaches the optimum, so the last iterate depends on rounding)
        and the loss at every iteration.

    Examples:
        >>> import jax.numpy as jnp
        >>> from diffsim.systems import mass_spring, mass_spring_drive, mass_spring_identify
        >>> from diffsim.systems import mass_spring_observe
        >>> sys = mass_spring(2)
        >>> u = mass_spring_drive(200, 0.01)
        >>> observed = mass_spring_observe(sys, sys.theta, u)
        >>> guess = {"m": 1.2 * sys.theta["m"], "k": 0.8 * sys.theta["k"]}
        >>> theta, losses = mass_spring_identify(sys, observed, u, guess, num_iters=800)
        >>> bool(jnp.allclose(theta["k"], sys.theta["k"], rtol=1e-2)), bool(losses[-1] < losses[0])
        (True, True)
    """
    num_iters = check_int("num_iters", num_iters)
    check_positive("learning_rate", learning_rate)
    check_finite_tree("observed", observed)
    check_positive("theta_init['m']", theta_init["m"])
    check_positive("theta_init['k']", theta_init["k"])
    return _identify(system, observed, inputs, theta_init, num_iters, learning_rate)


@jax.jit
def _mse(system, log_theta, observed, inputs):
    theta = jax.tree_util.tree_map(jnp.exp, log_theta)
    return jnp.mean((mass_spring_observe(system, theta, inputs) - observed) ** 2) / jnp.mean(
        observed**2
    )


def _identify(system, observed, inputs, theta_init, num_iters, learning_rate):
    opt = optax.adam(learning_rate)
    log0 = jax.tree_util.tree_map(jnp.log, theta_init)

    @jax.jit
    def run(log_theta):
        state = opt.init(log_theta)

        def body(carry, _):
            p, s, best, best_loss = carry
            loss, g = jax.value_and_grad(lambda q: _mse(system, q, observed, inputs))(p)
            better = loss < best_loss
            best = jax.tree_util.tree_map(lambda a, b: jnp.where(better, a, b), p, best)
            updates, s = opt.update(g, s, p)
            carry = (optax.apply_updates(p, updates), s, best, jnp.minimum(loss, best_loss))
            return carry, loss

        inf = jnp.asarray(jnp.inf, jnp.result_type(*jax.tree_util.tree_leaves(log_theta)))
        carry = (log_theta, state, log_theta, inf)
        (_, _, best, _), losses = jax.lax.scan(body, carry, None, length=num_iters)
        return jax.tree_util.tree_map(jnp.exp, best), losses

    return run(log0)
