# %% [markdown]
# # The article, step by step
#
# The article behind diffsim makes four points: a rollout's derivative is a product of
# per-step Jacobians; a bounce breaks that product; a wall turns the loss into a plateau,
# a cliff and a basin; and randomized smoothing gives a useful gradient where the exact one
# is useless. This page computes each of them with the library (it is a script that the
# site build executes; every number below is its output, and the `assert`s fail the build
# if the library disagrees with the article).

# %%
import jax
import jax.numpy as jnp
import matplotlib.pyplot as plt
import numpy as np

import diffsim
from diffsim.estimators import make_estimator
from diffsim.systems import bouncing_ball_final_state_jacobian, free_particle
from diffsim.systems import projectile_wall as pw

jax.config.update("jax_enable_x64", True)  # float64: the checks below are to 1e-9

# %% [markdown]
# ## 1. The chain rule: `[[1, h], [0, 1]]` and `[[1, T h], [0, 1]]`
#
# The free particle under semi-implicit Euler (`v ← v + a h; x ← x + v h`) has, in (x, v)
# order, the per-step Jacobian `[[1, h], [0, 1]]`. A rollout of T steps multiplies T of
# them, so its Jacobian is `[[1, T h], [0, 1]]`: the off-diagonal is the elapsed time.

# %%
T, h = 2, 1 / 60
sys = free_particle(h=h)
A, B = diffsim.step_jacobian(sys.step, sys.s0, sys.theta)
print("per-step Jacobian A =", np.round(np.asarray(A), 4).tolist())
assert np.allclose(A, [[1, h], [0, 1]], atol=1e-12)

routes = {}
for method in ("autodiff", "product", "forward", "adjoint"):
    J_s0, J_theta = diffsim.rollout_jacobian(sys.step, sys.s0, sys.theta, T, method=method)
    routes[method] = np.asarray(J_s0)
    print(f"{method:>8}: {np.round(routes[method], 4).tolist()}")

for J in routes.values():
    assert abs(J[0, 1] - T * h) < 1e-9 and np.allclose(J, [[1, T * h], [0, 1]], atol=1e-9)

# %% [markdown]
# Four routes — autodiff through the scan, the product of per-step autodiff Jacobians, and
# the integrator's *analytic* per-step Jacobians chained forwards or backwards — give the
# same matrix. The same holds for any horizon:

# %%
J, _ = diffsim.rollout_jacobian(sys.step, sys.s0, sys.theta, 120)
print("T = 120:", np.round(np.asarray(J), 6).tolist(), " T h =", 120 * h)
assert abs(J[0, 1] - 120 * h) < 1e-9

# %% [markdown]
# ## 2. The bounce breaks the product
#
# A ball at y₀ = 1 m falls at v₀ = −1 m/s (no gravity, g = 0) onto the ground, bounces with
# restitution e = 0.8, and is observed at T = 2 s. Analytically ∂y_T/∂y₀ = −e = −0.8: a ball
# that starts higher hits later and so ends lower. The naive impulse (reflect the velocity
# at the step where penetration is found) forgets *where inside the step* the ball hit;
# time-of-impact correction (`toi=True`) locates the impact inside the step.

# %%
rows = {}
for toi in (True, False):
    d = bouncing_ball_final_state_jacobian(1.0, -1.0, 0.8, 0.0, h=1e-3, num_steps=2000, toi=toi)
    rows["time of impact" if toi else "naive"] = (float(d["dy_dy0"]), float(d["dy_dvy0"]))
for name, (dy0, dv0) in rows.items():
    print(f"{name:>15}: dy_T/dy0 = {dy0:+.4f}   dy_T/dv0 = {dv0:+.4f}")

assert abs(rows["time of impact"][0] - (-0.8)) < 1e-6
assert abs(rows["time of impact"][1] - (-1.6)) < 1e-6
assert abs(rows["naive"][0]) < 1e-9  # 100 % error: the naive gradient is 0

# %% [markdown]
# The naive gradient is **0** where the truth is −0.8, and −0.8 where it is −1.6. Nothing
# warns you: autodiff differentiated the program it was given, exactly.
#
# ## 3. The wall: a plateau, a cliff and a basin
#
# A projectile launched at 45° with speed v₀ toward a target at x = 10 m; a 2 m wall at
# x = 6 m. Clear the wall and the ball flies on to R = v₀²/g; hit it and it stops dead.
# The loss is (x − 10)². `projectile_wall.loss` is a time-stepped rollout
# (h = 1/240 s) of the library's integrator and contact parts.

# %%
v0 = jnp.linspace(4.0, 14.0, 801)
L = pw.loss(v0)
lo, hi = pw.plateau_bounds()
v_star = pw.optimal_v0()
print(f"plateau: {lo:.3f} < v0 < {hi:.3f} m/s; optimum v0* = {v_star:.3f} m/s")
print(f"v0 = 8: landing x = {float(pw.landing_x(8.0)):.2f} m, loss = {float(pw.loss(8.0)):.2f}")
assert abs(float(pw.landing_x(8.0)) - 6.0) < 1e-9 and abs(float(pw.loss(8.0)) - 16.0) < 1e-9

fig, ax = plt.subplots(figsize=(7, 3.2))
ax.plot(v0, L, lw=1.5, label="loss (x − 10)², time-stepped")
ax.axvspan(lo, hi, color="0.9", label="plateau (ball hits the wall)")
ax.axvline(v_star, ls=":", c="k", lw=1, label=f"v0* = {v_star:.3f}")
ax.set(xlabel="launch speed v0 (m/s)", ylabel="loss (m²)", ylim=(-2, 40))
ax.legend(fontsize=8)
plt.show()

# %% [markdown]
# On the plateau autodiff returns **exactly 0**: every v₀ there lands at x = 6. Across the
# cliff the loss drops by about 15, but the gradients on both sides are finite and say
# nothing about it; central differences straddling the cliff grow like 1/δ.

# %%
grad = jax.grad(pw.loss)
for v in (8.0, 9.3, 9.45, 11.0):
    print(f"v0 = {v:5.2f}: loss {float(pw.loss(v)):6.2f}, d loss/d v0 = {float(grad(v)):+.3f}")
assert float(grad(8.0)) == 0.0

# the basin: autodiff = central differences = the chain rule 2(x − 10)·dR/dv0, dR/dv0 = 2v0/g
v, g = 11.0, 9.81
x = float(pw.landing_x(v))
chain = 2 * (x - 10) * 2 * v / g
fd_basin = float((pw.loss(v + 1e-4) - pw.loss(v - 1e-4)) / 2e-4)
print(f"basin: autodiff {float(grad(v)):.4f}, central FD {fd_basin:.4f}, chain {chain:.4f}")
assert abs(float(grad(v)) - fd_basin) / abs(fd_basin) < 1e-4
assert abs(float(grad(v)) - chain) / abs(chain) < 0.01

# locate the time-stepped cliff by bisection: the plateau's loss is 16, the basin's ~1
a, b = 9.3, 9.5
for _ in range(40):
    mid = 0.5 * (a + b)
    a, b = (mid, b) if float(pw.loss(mid)) > 8 else (a, mid)
cliff = 0.5 * (a + b)
print(f"the time-stepped cliff: v0 = {cliff:.4f} m/s (closed form {hi:.4f})")
deltas = np.array([1e-1, 1e-2, 1e-3, 1e-4])
fd = [float((pw.loss(cliff + d) - pw.loss(cliff - d)) / (2 * d)) for d in deltas]
slope = np.polyfit(np.log(deltas), np.log(np.abs(fd)), 1)[0]
print("central differences across the cliff:", [f"{f:.3g}" for f in fd], f"slope {slope:.2f}")
assert abs(slope + 1) < 0.1  # |FD| ∝ 1/δ: a jump, not a slope

# %% [markdown]
# ## 4. Randomized smoothing and the estimators
#
# The smoothed loss F(v₀) = E L(v₀ + σw), w ~ N(0, 1), slopes where L is flat: on the
# plateau it points toward the cliff and the basin beyond. Its gradient can be estimated
# from loss values only (ZoBG), from sampled gradients (FoBG, which misses the jump), or
# from both (AoBG); `auto` decides per call. At v₀ = 8 with σ = 0.5:

# %%
key = jax.random.PRNGKey(0)
theta = jnp.asarray(8.0)
results = {}
for name in ("exact", "zeroth", "first", "alpha", "auto"):
    opts = {} if name in ("exact", "auto") else {"sigma": 0.5, "num_samples": 256}
    est = make_estimator(name, **opts)(pw.loss, theta, key)
    value, se, evals = float(est.estimate), float(est.std_error), int(est.evaluations)
    results[name] = (value, se, evals)
    print(f"{name:>6}: {value:+8.3f} ± {se:.3f}  ({evals} evaluations)")

assert results["exact"][0] == 0.0
for name in ("zeroth", "alpha"):
    est, se, _ = results[name]
    assert est < 0 and abs(est) > 2 * se, name  # descent moves v0 up, off the plateau
# auto decides from the doctor's batch at its own σ (5 % of v0 = 0.4 m/s): on the plateau it
# chooses zeroth-order samples; fewer of them than above, so its estimate is noisier
assert results["auto"][0] < 0

# %% [markdown]
# The exact gradient is 0; the smoothing estimators see the slope of the smoothed loss
# (negative: increase v₀), each with its standard error and its cost in simulator
# evaluations. Figure: the randomized estimates as slopes through the loss at v₀ = 8.

# %%
fig, ax = plt.subplots(figsize=(7, 3.2))
ax.plot(v0, L, c="0.6", lw=1, label="loss")
L8 = float(pw.loss(8.0))
dv = np.linspace(-0.6, 0.6, 3)
for name, (est, se, _) in results.items():
    ax.plot(8.0 + dv, L8 + est * dv, lw=2, label=f"{name}: {est:+.1f} ± {2 * se:.1f}")
ax.set(xlabel="launch speed v0 (m/s)", ylabel="loss (m²)", xlim=(6.5, 11), ylim=(-2, 30))
ax.legend(fontsize=8)
plt.show()

# %% [markdown]
# What to do with these gradients — descend with `diffsim.optimize`, check them with the
# doctor — is the subject of the next two tutorials:
# [Is my gradient trustworthy?](trustworthy.py) and
# [Optimize a push through contact](pushing.py).
