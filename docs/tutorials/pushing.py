# %% [markdown]
# # Optimize a push through contact
#
# Suh et al.'s stiff pushing task (ICML 2022), built from the library's parts
# (`diffsim.systems.pushing`): a kinematic pusher drives a box through a penalty spring of
# stiffness k. The decision is the pusher's velocity on each of T = 50 steps (h = 0.01 s),
# a 50-dimensional θ; the loss is the squared distance of the box's final position from
# its goal plus a small effort penalty. This tutorial looks at the loss, measures how the
# gradient estimators' noise depends on the contact's stiffness, and optimizes the push
# with each of them. (Executed by the site build; the `assert`s fail it if the library's
# results change.)

# %%
import jax
import jax.numpy as jnp
import matplotlib.pyplot as plt
import numpy as np
import optax

import diffsim
from diffsim.estimators import make_estimator
from diffsim.systems import pushing as push

jax.config.update("jax_enable_x64", True)
GOAL = 0.3  # m: where the box should end (it starts at rest at 0.2 m)


def box_x(u, k):
    """The box's final position after pushing with velocities u (one per step)."""
    x_T, _ = diffsim.rollout(
        push.push_step(), push.initial_state(u.dtype), {"k": jnp.asarray(k, u.dtype)},
        u.shape[0], inputs=u, trajectory=False,
    )  # fmt: skip
    return x_T[1]


# %% [markdown]
# ## 1. The loss along constant pushes
#
# With a constant velocity u the pusher travels u · 0.5 m in the horizon; the box sits
# 0.2 m away, so below u = 0.4 m/s the pusher never reaches it: the box does not move, the
# exact gradient of its position is zero, and the loss's gradient is only the effort
# penalty's (which says: push less). Above, the stiffer the contact, the more directly the box
# follows the pusher.

# %%
speeds = jnp.linspace(0.0, 1.2, 121)
fig, ax = plt.subplots(figsize=(7, 3.2))
for k in (10.0, 100.0, 1000.0):
    xs = jax.vmap(lambda s, k=k: box_x(s * jnp.ones(push.NUM_STEPS), k))(speeds)
    ax.plot(speeds, xs, label=f"k = {k:g} N/m")
ax.axhline(GOAL, ls=":", c="k", lw=1, label="goal")
ax.axvline(0.4, ls="--", c="0.6", lw=1, label="pusher reaches the box")
ax.set(xlabel="constant pusher velocity u (m/s)", ylabel="box's final x (m)")
ax.legend(fontsize=8)
plt.show()

u_short = push.initial_controls(speed=0.2)
g_short = jax.grad(box_x)(u_short, 100.0)
print("∂(box x)/∂u at u = 0.2 m/s (no contact): max |g| =", float(jnp.max(jnp.abs(g_short))))
assert float(jnp.max(jnp.abs(g_short))) == 0.0

# %% [markdown]
# ## 2. Stiffness and the estimators' noise
#
# Suh et al.'s finding: first-order samples ∇L(θ + σw) inherit the contact's stiffness —
# their variance grows with k — while zeroth-order samples only see loss values, whose
# variance does not. At u = 0.6 m/s (in contact), σ = 0.05 per step, 64 samples each:

# %%
u0 = push.initial_controls(speed=0.6)
key = jax.random.PRNGKey(0)
spread = {}
for k in (10.0, 100.0, 1000.0):
    loss = lambda u, k=k: push.push_loss(u, k, target=GOAL)  # noqa: E731
    for name in ("zeroth", "first"):
        est = make_estimator(name, sigma=0.05, num_samples=64)(loss, u0, key)
        spread[name, k] = float(jnp.linalg.norm(est.std_error))
    print(f"k = {k:6g}: ‖SE‖ zeroth {spread['zeroth', k]:.2e}, first {spread['first', k]:.2e}")

# the first-order estimate's noise grows with the stiffness, and faster than zeroth order's
assert spread["first", 1000.0] > 3 * spread["first", 10.0]
growth = {name: spread[name, 1000.0] / spread[name, 10.0] for name in ("zeroth", "first")}
assert growth["first"] > growth["zeroth"]

# %% [markdown]
# The first-order noise grows about tenfold from k = 10 to k = 1000; the zeroth-order noise
# does not grow with k (it moves with the samples drawn), but in 50 dimensions it is larger
# at every k here: which one wins depends on both, which is why `alpha` and `auto` measure
# them at run time.
#
# ## 3. Optimize the push
#
# `diffsim.optimize` runs Adam with any estimator as one compiled scan. Every estimator
# starts from the same push, u = 0.6 m/s on every step, at k = 100 N/m; the smoothing
# estimators get σ = 0.1 annealed to 0.01 and 16 samples per step (the settings of
# `python -m benchmarks.success`); `auto` picks everything itself.

# %%
K, STEPS = 100.0, 150
loss = lambda u: push.push_loss(u, K, target=GOAL)  # noqa: E731
schedule = diffsim.optimization.cosine_anneal(0.1, 0.01, STEPS, fraction=0.6)
runs = {}
for name in ("exact", "zeroth", "first", "alpha", "auto"):
    opts = {} if name in ("exact", "auto") else {"sigma": 0.1, "num_samples": 16}
    runs[name] = diffsim.optimize(
        loss, u0, make_estimator(name, **opts), steps=STEPS, key=key,
        optimizer=optax.adam(0.05), sigma_schedule=None if name in ("exact", "auto") else schedule,
    )  # fmt: skip
    r = runs[name]
    print(
        f"{name:>6}: box at {float(box_x(r.theta, K)):.4f} m, loss {float(r.loss):.2e}, "
        f"{int(r.evaluations)} simulator evaluations"
    )

fig, ax = plt.subplots(figsize=(7, 3.2))
for name, r in runs.items():
    ax.semilogy(np.asarray(r.history.loss), label=name)
ax.set(xlabel="Adam step", ylabel="loss")
ax.legend(fontsize=8)
plt.show()

start = float(loss(u0))
for name, r in runs.items():
    assert float(r.loss) < 0.1 * start, name  # every estimator makes progress from contact

# %% [markdown]
# From a push that touches the box, every estimator descends; they differ in cost (the
# evaluations above) and in the noise they carry into the final pushes. From a push that
# does not reach the box, the exact gradient only lowers the effort: the pusher slows down
# and the box never moves.

# %%
stuck = diffsim.optimize(
    loss, u_short, make_estimator("exact"), steps=20, key=key, optimizer=optax.adam(0.05)
)
x_stuck = float(box_x(stuck.theta, K))
print(f"exact from u = 0.2 m/s: box at {x_stuck:.4f} m (it starts at {push.BOX_X0} m)")
assert x_stuck == push.BOX_X0

# %% [markdown]
# Smoothing with σ ≤ 0.1 per step does not close a 0.2 m gap either: success over 24
# starts for every estimator on this task, with the evaluations each needs, is measured by
# `python -m benchmarks.success` ([Validation](../validation.md#estimators-success-over-24-starts)).
# Next steps: [Optimize through contact](../guides/optimize-contact.md) (the how-to) and
# [the estimators](../estimators.md) (the concepts).
