# %% [markdown]
# # Is my gradient trustworthy?
#
# `jax.grad` always returns a number. Through contact that number can be exactly zero where
# the loss still changes, blind to a jump, dominated by a barely resolved stiff contact, or
# exponentially sensitive to the horizon. `diffsim.diagnose(loss, θ, key)` measures which
# case you are in. This tutorial asks the doctor about four losses whose right answer the
# physics knows, reads its reports, and shows what to do about each flag. (Executed by the
# site build; the `assert`s fail it if a verdict changes.)

# %%
import jax
import jax.numpy as jnp
import matplotlib.pyplot as plt

import diffsim
from diffsim.doctor import FLAGS, recommend
from diffsim.systems import double_pendulum, stiff_contact
from diffsim.systems import projectile_wall as pw

jax.config.update("jax_enable_x64", True)
key = jax.random.PRNGKey(0)

# %% [markdown]
# ## 1. The wall: where is the exact gradient right?
#
# The article's loss (x − 10)² of the projectile over the wall ([the article
# tutorial](article.py)): a smooth stretch short of the wall, a plateau where every ball
# hits the wall, a cliff, and a basin. The doctor compares the exact gradient with central
# differences and with first- and zeroth-order samples of the gradient smoothed at
# σ (default: 5 % of v₀).

# %%
expected = {5.0: (), 8.0: ("plateau",), 9.5: ("jump",), 11.0: ()}
reports = {}
for v0, flags in expected.items():
    r = diffsim.diagnose(pw.loss, v0, key)
    reports[v0] = r
    exact = float(jax.grad(pw.loss)(v0))
    print(f"v0 = {v0:4.1f}: {r.verdict:9s} flags {r.flag_names}  exact gradient {exact:+.3f}")
    assert r.flag_names == flags, (v0, r.flag_names)

# %% [markdown]
# The full report at v₀ = 8 — the verdict, the evidence for each flag, the
# recommendation and what the check cost:

# %%
print(reports[8.0])
assert reports[8.0].verdict == "untrusted" and not reports[8.0].exact_gradient_trusted

# %% [markdown]
# The gradient is zero on the plateau, yet the smoothed loss slopes (its gradient,
# measured from the samples, is in the evidence as `smoothed_grad_norm`). Where the doctor
# speaks:

# %%
v = jnp.linspace(4.0, 13.0, 600)
fig, ax = plt.subplots(figsize=(7, 3.2))
ax.plot(v, pw.loss(v), c="0.5", lw=1.2, label="loss (x − 10)²")
colors = {"trusted": "tab:green", "untrusted": "tab:red", "inconclusive": "tab:orange"}
for v0, r in reports.items():
    label = f"v0 = {v0:g}: {r.verdict}" + (f" ({', '.join(r.flag_names)})" if r.flag_names else "")
    ax.plot([v0], [float(pw.loss(v0))], "o", ms=9, c=colors[r.verdict], label=label)
ax.set(xlabel="launch speed v0 (m/s)", ylabel="loss (m²)", ylim=(-2, 35))
ax.legend(fontsize=8)
plt.show()

# %% [markdown]
# ## 2. A stiff contact: `stiffness`
#
# A ball dropped on a penalty spring of stiffness k, stepped at h = 1/240 s. At
# k = 10⁴ N/m the contact lasts many steps; at k = 10⁵ it lasts about 2.4 steps, and the
# derivative of the height after 1 s with respect to the drop height is dominated by how
# one or two steps sample the spring. `diagnose_rollout` takes the rollout itself, so it
# also sees the per-step Jacobians.

# %%
height = lambda s: s[0]  # the ball's height at T  # noqa: E731
stiff = {}
for k in (1e4, 1e5):
    sc = stiff_contact(k=k)
    stiff[k] = diffsim.doctor.diagnose_rollout(sc.step, sc.s0, sc.theta, 240, height, key, wrt="s0")
    print(f"k = {k:.0e}: {stiff[k].verdict:9s} flags {stiff[k].flag_names}")
assert stiff[1e4].flag_names == () and stiff[1e5].flag_names == ("stiffness",)

# %% [markdown]
# ## 3. A chaotic horizon: `chaos`
#
# The double pendulum released from large angles. Over 0.5 s the gradient of the lower
# angle's cosine with respect to the initial state is fine; over 8 s the rollout Jacobian
# has grown by orders of magnitude, spread over the whole horizon — no first-order
# gradient means much there, however exactly it is computed.

# %%
dp = double_pendulum()
cos_lower = lambda s: jnp.cos(s[0][1])  # noqa: E731
chaos = {}
for T in (50, 800):
    chaos[T] = diffsim.doctor.diagnose_rollout(dp.step, dp.s0, dp.theta, T, cos_lower, key, wrt="s0")
    growth = chaos[T].measurements["jacobian_growth"]
    print(f"T = {T:3d}: {chaos[T].verdict:9s} {chaos[T].flag_names}  growth T/8 → T: {growth:.3g}×")
assert chaos[50].flag_names == () and chaos[800].flag_names == ("chaos",)

# %% [markdown]
# ## 4. `non_finite`: a NaN trap
#
# `jnp.where(θ > 0, jnp.sqrt(θ), 0)` looks safe, but its gradient at θ = 0 is
# 0 · ∞ = NaN. The doctor refuses to rest any other flag on a non-finite number.

# %%
trap = lambda t: jnp.where(t > 0, jnp.sqrt(jnp.abs(t)), 0.0) + t**2  # noqa: E731
r = diffsim.diagnose(trap, 0.0, key, sigma=0.1)
print(r.verdict, r.flag_names, " gradient:", float(jax.grad(trap)(0.0)))
assert r.flag_names == ("non_finite",)

# %% [markdown]
# ## What to do about each flag
#
# The recommendation in every report is the library's `diffsim.doctor.recommend(flags, σ)`.
# For each flag alone, at σ = 0.4:

# %%
for flag in FLAGS:
    print(f"{flag:>10}: {recommend((flag,), 0.4)}\n")
print(f"{'(none)':>10}: {recommend((), 0.4)}")

# %% [markdown]
# The same table, with what each flag means, is on
# [the doctor's concept page](../concepts/doctor.md#the-flags-and-what-to-do-about-each);
# how well the flags are right on 34 cases with known answers is on
# [Validation](../validation.md#the-doctor). Next:
# [Optimize a push through contact](pushing.py), with the estimators the doctor recommends.
