"""Every evaluation count is in rollouts, on a policy objective too: a value or gradient of
``objective(θ)`` on its batch of ``num_states`` initial states is that many rollouts, as a
sampled estimator's sample is one (``diffsim.policies.rollouts_per_call``). Each count is
checked against the episodes the objective really simulated, tallied by a host callback in
its terminal cost (one tick per episode, batched or not)."""

from __future__ import annotations

import threading

import jax
import jax.numpy as jnp
import numpy as np
import optax
import pytest

import diffsim
from diffsim.estimators import (
    AlphaOrder,
    Auto,
    Exact,
    FiniteDifference,
    FirstOrder,
    ZerothOrder,
)
from diffsim.estimators._samplers import LADDER_STATES
from diffsim.policies import PolicyObjective, linear_policy, rollouts_per_call

B = 6  # the objective's batch


class _Tally:
    def __init__(self):
        self.episodes = 0
        self.lock = threading.Lock()

    def tick(self, x):
        # XLA may run host callbacks on several threads at once: a bare += lost episodes
        # under load (768 simulated, 741 tallied in a full run of the suite)
        with self.lock:
            self.episodes += int(np.size(x)) // 2  # one final state (2 numbers) per episode

    def objective(self, flat: bool = False) -> PolicyObjective:
        """x' = x + u, u = Θx, cost |x' − c|² on the final state, x₁ ~ N(m, I); ``flat``:
        a cost of 0 wherever the episodes reach (1 only beyond |x₁'| = 100)."""
        c = jnp.array([0.3, 2.0])

        def terminal(x):
            jax.debug.callback(self.tick, x)
            if flat:
                return jnp.where(jnp.abs(x[0]) > 100.0, 1.0, 0.0)
            return jnp.sum((x - c) ** 2)

        return PolicyObjective(
            lambda x, p, u: x + u,
            linear_policy,
            lambda key: jnp.array([1.0, -0.5]) + jax.random.normal(key, (2,)),
            cost=lambda x, u: jnp.zeros(()),
            horizon=1,
            terminal_cost=terminal,
            num_states=B,
            key=jax.random.PRNGKey(7),
        )

    def run(self, fn):
        self.episodes = 0
        out = fn()
        jax.effects_barrier()
        return out, self.episodes


def test_rollouts_per_call():
    assert rollouts_per_call(_Tally().objective()) == B
    assert rollouts_per_call(lambda t: t**2) == 1


@pytest.mark.parametrize(
    "estimator",
    [
        Exact(),
        FiniteDifference(),
        ZerothOrder(sigma=0.1, num_samples=8),
        FirstOrder(sigma=0.1, num_samples=8),
        AlphaOrder(sigma=0.1, num_samples=8),
    ],
    ids=lambda e: type(e).__name__,
)
def test_each_estimator_counts_the_episodes_it_simulates(estimator):
    """Exact: one gradient of the batch, B rollouts (it counted 1 before); central
    differences 2·d·B; the sampled estimators one rollout a sample (as before)."""
    t = _Tally()
    obj = t.objective()
    r, episodes = t.run(lambda: estimator(obj, jnp.zeros((2, 2)), jax.random.PRNGKey(3)))
    assert int(r.evaluations) == episodes
    if isinstance(estimator, Exact):
        assert int(r.grad_evaluations) == B
    if isinstance(estimator, FiniteDifference):
        assert int(r.loss_evaluations) == 2 * 4 * B


@pytest.mark.parametrize(
    ("flat", "max_samples"),
    [
        pytest.param(False, 8, id="N"),
        # ~25 s each on 2 cores under load (a compile of the rounds per case): the slow job
        pytest.param(False, 64, id="doubled", marks=pytest.mark.slow),
        pytest.param(True, 8, id="flat", marks=pytest.mark.slow),
    ],
)
def test_auto_on_a_policy_counts_every_round_it_draws(flat, max_samples):
    """Auto with action noise runs the doctor's rounds: N doubled while a statistic is
    undecided (here up to 64), σ widened ×4 twice on a cost that nothing moves within σ.
    Every round's episodes are counted; the ladder's noise-free cost at θ, one value and
    gradient of ``LADDER_STATES`` episodes, counts both, so each round counts exactly that
    many episodes more than it simulates."""
    t = _Tally()
    obj = t.objective(flat)
    auto = Auto(num_samples=8, max_samples=max_samples)
    key = jax.random.PRNGKey(6)  # on this key N = 8 leaves a statistic undecided
    r, episodes = t.run(lambda: auto(obj, jnp.zeros((2, 2)), key))
    rounds = 1 + int(r.widenings)
    assert int(r.evaluations) - episodes == min(8, LADDER_STATES) * rounds
    # a round simulates the ladder (8 states: L at θ with its gradient, then ±7 steps along
    # ū's 2 axes), 4 noise-free gradients, 3 episodes per pair and 1 per first-order sample
    used = int(r.grad_evaluations) - (8 + 4) * rounds - 8 * (rounds - 1)

    def simulated(n):
        return 8 * (1 + 2 * 7 * 2) + 4 + 3 * (n // 2) + n

    if flat:  # widened twice: σ = 16 × the default 5 % of action_scale 1
        assert int(r.widenings) == 2 and float(r.sigma_used) == pytest.approx(0.8)
        assert used == 8 and episodes == 3 * simulated(8)
    elif max_samples == 8:
        assert int(r.widenings) == 0 and used == 8 and episodes == simulated(8)
    else:  # undecided at N = 8: 8 more, then 16 more
        assert int(r.widenings) == 0 and used == 32 and episodes == simulated(32)


def test_lbfgs_on_a_policy_counts_the_batch_of_every_value_and_gradient():
    """``optimize`` with L-BFGS on the policy: its evaluations are the episodes its line
    searches simulated; the history reads the line search's values, and the loss once more
    where θ stopped moving (B episodes), not at each of the scan's remaining steps."""
    t = _Tally()
    obj = t.objective()
    r, episodes = t.run(
        lambda: diffsim.optimize(
            obj, jnp.zeros((2, 2)), Exact(), optimizer=optax.lbfgs(), steps=30,
            key=jax.random.PRNGKey(0),
        )
    )  # fmt: skip
    ran = int(r.steps_run)
    assert 0 < ran < 30  # it converged and the rest of the scan held θ
    assert int(r.evaluations) % B == 0
    assert episodes == int(r.evaluations) + B
    spent = np.asarray(r.history.evaluations)
    assert spent[-1] == int(r.evaluations) and np.all(spent[ran:] == spent[ran - 1])


@pytest.mark.slow  # a check and an L-BFGS phase on a policy: ~30 s on 2 cores
def test_the_default_method_on_a_policy_counts_the_episodes_it_simulates():
    """The default method: its check (sampled rollouts) and its L-BFGS phase (batch calls)
    in one unit. The check counts the ladder's loss at θ both as a value and with its
    gradient (at most ``LADDER_STATES`` episodes more than it ran); the history's one read
    of the L-BFGS phase (where θ stopped moving) is not counted."""
    t = _Tally()
    obj = t.objective()
    r, episodes = t.run(lambda: diffsim.optimize(obj, jnp.zeros((2, 2)), key=jax.random.PRNGKey(1)))
    phases = [d for d in r.decisions if d.method != "stop"]
    assert [d.method for d in phases] == ["lbfgs"]
    record = len(phases) * B
    over = int(r.evaluations) + record - episodes
    assert 0 <= over <= LADDER_STATES


def test_a_budget_for_a_policy_leaves_room_for_one_gradient_of_its_batch():
    """The smallest budget the default method accepts is a check and one gradient, which
    on a policy objective is a gradient of its whole batch (B rollouts), not 1."""
    from diffsim._decide import smallest_budget

    obj = _Tally().objective()
    least = smallest_budget(diffsim.Decide(), 4, B)
    assert least == smallest_budget(diffsim.Decide(), 4) - 1 + B
    with pytest.raises(ValueError, match=f"at least {least} evaluations for 4 parameters"):
        diffsim.optimize(obj, jnp.zeros((2, 2)), key=jax.random.PRNGKey(0), budget=least - 1)
