"""``python -m benchmarks.scale``: where gradients must win — one family, p = 10 … 10⁵ (issue 47).

    python -m benchmarks.scale [--sizes 10,100,1000,10000,100000] [--max-tangents 10000]
                               [--es-budget 20000] [--figure docs/figures/scale.png] [--json]
                               [--save rows.json] [--replot rows.json]

**The family.** ``N = 400`` balls fall onto a floor (the composed public step
``WithContact(SemiImplicitEuler, Restitution(..., toi=True))``: restitution e = 0.8 with
the impact's time inside the step, h = 1/240 s) for ``T = 250`` steps (1.04 s: one or two
bounces each, from :func:`benchmarks.task.initial_state`), each pushed up by a thrust
``u`` (m/s²) that θ ∈ R^p sets piecewise constant over the N·T = 10⁵ ball-steps
(ball-major: θ_k drives 10⁵/p consecutive ball-steps — at p = 10 forty balls for the whole
horizon, at p = 10⁵ one value per ball and step). The loss tracks a hover at 1 m with a
small effort cost::

    L(θ) = mean_{i,t} (y_{t,i} − 1)² + 10⁻⁴ · mean_{i,t} (u_{t,i} − g)²,   θ₀ = 0.

The simulation is the same for every p; only its parametrisation is refined.

**Cost per gradient** (warm, the median of ``--rounds`` calls), against the forward rollout
(``jax.jit(loss)``):

* ``reverse``: ``diffsim.value_and_grad(loss, θ, mode="reverse")``; its memory is XLA's
  temporary buffer of the compiled ``jax.grad(loss)`` (``memory_analysis``);
* ``auto``: the mode ``diffsim.value_and_grad`` picks by default;
* ``forward``: ``diffsim.value_and_grad(..., mode="forward")``, p tangents in one pass;
* ``central FD``: ``diffsim.estimators.FiniteDifference()``, 2p rollouts in one ``vmap``;
* ``doctor``: ``diffsim.diagnose(loss, θ, key)``, the trust check (its evaluations and
  verdict).

Forward mode and central differences do p (or 2p) rollouts' worth of work, 1,024 at a time
(``diffsim._sharding.basis_map``): beyond ``--max-tangents`` they are not run (at p = 10⁵,
an hour here), and the row gives the linear extrapolation from the largest p run, marked
``est.``; above p = 1,000 they are timed once.

**To a target.** From θ₀ = 0: ``diffsim.optimize(loss, θ₀, key=...)`` (the default:
the doctor's check, then L-BFGS on the trusted gradient), ``optimize(..., Exact(),
optimizer=optax.lbfgs())``, and OpenAI-ES (evosax, :func:`benchmarks.control.evolution`)
with ``--es-budget`` rollouts at each σ of :data:`ES_SIGMAS` (the best σ is reported). The
target at each p is 90 % of the best decrease any of them found,
``L₀ − 0.9 (L₀ − L_best)``; a row gives the evaluations (one rollout or one gradient each,
as ``optimize`` counts them) before its loss first reached it. Central differences and
forward mode give the gradient reverse mode gives (to rounding): driven by the same L-BFGS
they take its iterates and pay 2p rollouts (FD) per gradient, which the ``FD + L-BFGS``
column computes from the L-BFGS run's gradient count (computed, not run).
"""

from __future__ import annotations

import argparse
import json
import sys
import time
from typing import Any

import jax
import jax.numpy as jnp
import numpy as np

from ._harness import first_and_median

N_BALLS = 400
STEPS = 250
HOVER = 1.0
EFFORT = 1e-4
ES_SIGMAS = (0.3, 1.0, 3.0)
"""OpenAI-ES's σ (m/s² of thrust) sweep; its Adam rate is
:data:`benchmarks.control.OPENAI_ES_LR` · σ."""
SIZES = (10, 100, 1000, 10_000, 100_000)


def make_loss(p: int, n: int = N_BALLS, steps: int = STEPS, dtype: Any = jnp.float32):
    """``L(θ)`` for θ ∈ R^p (see the module docstring) in ``dtype``; ``p`` must divide
    ``n · steps``."""
    import diffsim
    from diffsim.contact import Plane, Restitution, WithContact
    from diffsim.integrators import SemiImplicitEuler

    from .task import E, G, H, initial_state

    if p < 1 or (n * steps) % p:
        raise ValueError(f"p must divide N·T = {n * steps}, got {p}")

    def accel(x, v, theta, u):
        return jnp.stack([jnp.zeros_like(u), u - theta["g"]])

    step = WithContact(SemiImplicitEuler(accel, h=H), Restitution(Plane.ground(2), e="e", toi=True))
    batch = jax.vmap(step, in_axes=(0, None, 0))
    x0, y0, vx0, vy0 = (jnp.asarray(a, dtype) for a in initial_state(n))
    s0 = (jnp.stack([x0, y0], -1), jnp.stack([vx0, vy0], -1))
    phys = {"g": jnp.asarray(G, dtype), "e": jnp.asarray(E, dtype)}
    per = n * steps // p

    def loss(theta):
        u = jnp.repeat(theta, per).reshape(n, steps).T  # (T, N): ball-major pieces
        ps, _ = diffsim.rollout(batch, s0, phys, steps, inputs=u, include_initial=False)
        return jnp.mean((ps[..., 1] - HOVER) ** 2) + EFFORT * jnp.mean((u - G) ** 2)

    return loss


def _median_time(fn, rounds: int) -> float:
    """The median of ``rounds`` warm calls (after one that compiles), s."""
    return first_and_median(fn, rounds)[1]


def gradient_costs(p: int, rounds: int, max_tangents: int, loss=None) -> dict[str, Any]:
    """The cost-per-gradient row at ``p`` (seconds; ``None`` where not run)."""
    import diffsim
    from diffsim.estimators import FiniteDifference

    loss = make_loss(p) if loss is None else loss
    theta = jnp.zeros(p, jnp.float32)
    fwd = jax.jit(loss)
    row: dict[str, Any] = {"p": p, "forward_rollout": _median_time(lambda: fwd(theta), rounds)}
    row["reverse"] = _median_time(
        lambda: diffsim.value_and_grad(loss, theta, mode="reverse").grad, rounds
    )
    compiled = jax.jit(jax.grad(loss)).lower(theta).compile()
    row["reverse_temp_bytes"] = int(compiled.memory_analysis().temp_size_in_bytes)
    row["auto_mode"] = diffsim.value_and_grad(loss, theta).mode
    if p <= max_tangents:  # p rollouts' worth of work each: one timed call beyond 1,000
        slow = rounds if p <= 1000 else 1
        row["forward_mode"] = _median_time(
            lambda: diffsim.value_and_grad(loss, theta, mode="forward").grad, slow
        )
        row["central_fd"] = _median_time(lambda: FiniteDifference()(loss, theta).estimate, slow)
    key = jax.random.PRNGKey(0)
    diagnose = diffsim.diagnose(loss, theta, key)  # compiles
    t = time.perf_counter()
    diagnose = diffsim.diagnose(loss, theta, key)
    row["doctor"] = time.perf_counter() - t
    row["doctor_evaluations"] = int(diagnose.evaluations["loss"] + diagnose.evaluations["grad"])
    row["doctor_verdict"] = diagnose.verdict
    return row


def _reach(evaluations: np.ndarray, losses: np.ndarray, target: float) -> int | None:
    hit = np.nonzero(losses <= target)[0]
    return None if hit.size == 0 else int(evaluations[hit[0]])


def to_target(p: int, es_budget: int, steps: int = 100, loss=None) -> dict[str, Any]:
    """The to-a-target row at ``p``: each method's curve (evaluations before each iterate,
    the loss there), the target and the evaluations to it."""
    import optax

    import diffsim
    from diffsim.estimators import Exact

    from . import control

    loss = make_loss(p) if loss is None else loss
    theta0 = jnp.zeros(p, jnp.float32)
    key = jax.random.PRNGKey(0)
    l0 = float(loss(theta0))
    curves: dict[str, tuple[np.ndarray, np.ndarray]] = {}
    seconds: dict[str, float] = {}
    runs = {
        "default (decide)": lambda: diffsim.optimize(loss, theta0, key=key, steps=steps),
        "exact + L-BFGS": lambda: diffsim.optimize(
            loss, theta0, Exact(), key=key, steps=steps, optimizer=optax.lbfgs()
        ),
    }
    grads = {}
    for name, go in runs.items():
        t = time.perf_counter()
        r = go()
        seconds[name] = time.perf_counter() - t
        h = r.history
        before = np.r_[0, np.asarray(h.evaluations)[:-1]]  # spent before iterate k
        ran = np.asarray(h.evaluations) > before
        curves[name] = (np.r_[before[ran], int(r.evaluations)],
                        np.r_[np.asarray(h.loss)[ran], float(r.loss)])  # fmt: skip
        grads[name] = int(r.grad_evaluations)
    best_es = None
    for sigma in ES_SIGMAS:
        go, population, generations = control.evolution(
            "OpenAI-ES", loss, theta0, sigma, es_budget, 1
        )
        t = time.perf_counter()
        _, curve = jax.block_until_ready(go(key, theta0))
        s = time.perf_counter() - t
        spent = population * np.arange(generations + 1)
        losses = np.r_[l0, np.asarray(curve)]
        if best_es is None or np.min(losses) < np.min(best_es[1][1]):
            best_es = (sigma, (spent, losses), s)
    assert best_es is not None
    curves["OpenAI-ES"], seconds["OpenAI-ES"] = best_es[1], best_es[2]
    best = min(float(np.min(c[1])) for c in curves.values())
    target = l0 - 0.9 * (l0 - best)
    reached = {name: _reach(*c, target) for name, c in curves.items()}
    lbfgs = reached["exact + L-BFGS"]
    # FD driving the same L-BFGS: the same iterates, each gradient 2p rollouts (computed)
    fd = None if lbfgs is None else int(lbfgs + grads["exact + L-BFGS"] * (2 * p - 1))
    return {"p": p, "es_sigma": best_es[0], "loss0": l0, "best": best, "target": target,
            "reached": reached, "final": {k: float(np.min(c[1])) for k, c in curves.items()},
            "seconds": seconds, "fd_lbfgs_computed": fd,
            "curves": {k: [c[0].tolist(), c[1].tolist()] for k, c in curves.items()}}  # fmt: skip


def _extrapolated(rows: list[dict], name: str) -> None:
    """Fill ``name`` beyond the largest p run, linearly in p (marked in ``<name>_est``)."""
    ran = [r for r in rows if name in r]
    if not ran:
        return
    last = ran[-1]
    for r in rows:
        if name not in r:
            r[name] = last[name] * r["p"] / last["p"]
            r[f"{name}_est"] = True


def _fmt_ms(r: dict, name: str) -> str:
    if name not in r:
        return "—"
    ratio = r[name] / r["forward_rollout"]
    est = " est." if r.get(f"{name}_est") else ""
    return f"{1e3 * r[name]:.3g} ms ({ratio:.3g}×){est}"


def cost_table(rows: list[dict]) -> list[str]:
    out = [f"{'p':>7} {'rollout':>9} {'reverse (÷ rollout)':>22} {'XLA temp':>9} "
           f"{'auto':>8} {'forward mode':>26} {'central FD':>26} {'doctor':>24}"]  # fmt: skip
    for r in rows:
        doctor = f"{r['doctor']:.2f} s, {r['doctor_evaluations']} ev ({r['doctor_verdict']})"
        out.append(
            f"{r['p']:>7} {1e3 * r['forward_rollout']:>6.3g} ms {_fmt_ms(r, 'reverse'):>22} "
            f"{r['reverse_temp_bytes'] / 2**20:>5.1f} MiB {r['auto_mode']:>8} "
            f"{_fmt_ms(r, 'forward_mode'):>26} {_fmt_ms(r, 'central_fd'):>26} {doctor:>24}"
        )
    return out


def target_table(rows: list[dict]) -> list[str]:
    names = [k for k in rows[0]["reached"] if k != "OpenAI-ES"]
    out = [f"{'p':>7} {'L0':>7} {'target':>7} " + " ".join(f"{n:>18}" for n in names)
           + f" {'OpenAI-ES (best σ)':>28} {'FD + L-BFGS (computed)':>23}"]  # fmt: skip

    def cell(r, k):  # not reached: more than the run's evaluations
        got = r["reached"][k]
        return f"> {int(r['curves'][k][0][-1])}" if got is None else str(got)

    for r in rows:
        es_cell = f"{cell(r, 'OpenAI-ES')} (σ {r['es_sigma']:g}, {r['final']['OpenAI-ES']:.4f})"
        fd = r["fd_lbfgs_computed"]
        out.append(f"{r['p']:>7} {r['loss0']:>7.4f} {r['target']:>7.4f} "
                   + " ".join(f"{cell(r, n):>18}" for n in names)
                   + f" {es_cell:>28} {('—' if fd is None else str(fd)):>23}")  # fmt: skip
    return out


def figure(costs: list[dict], targets: list[dict], path: str) -> None:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, (a, b) = plt.subplots(1, 2, figsize=(11, 4.2))
    p = np.array([r["p"] for r in costs])
    labels = {
        "reverse": "reverse mode",
        "forward_mode": "forward mode",
        "central_fd": "central differences",
        "doctor": "the doctor (a trust check)",
    }
    for name, label in labels.items():
        y = np.array([r[name] / r["forward_rollout"] for r in costs])
        est = np.array([bool(r.get(f"{name}_est")) for r in costs])
        (line,) = a.loglog(p[~est], y[~est], "o-", label=label)
        if est.any():
            k = max(0, int(np.argmax(est)) - 1)
            a.loglog(p[k:], y[k:], "--", color=line.get_color())
    a.set(xlabel="parameters p", ylabel="time ÷ one forward rollout",
          title="cost of one gradient (dashed: extrapolated)")  # fmt: skip
    a.legend()
    pt = [r["p"] for r in targets]

    def gaps(values):  # a p where the target was not reached breaks the line
        return [np.nan if v is None else v for v in values]

    for name in targets[0]["reached"]:
        b.loglog(pt, gaps(r["reached"][name] for r in targets), "o-", label=name)
    fd = gaps(r["fd_lbfgs_computed"] for r in targets)
    b.loglog(pt, fd, "k:", marker=".", label="FD + L-BFGS (computed)")
    b.set(xlabel="parameters p", ylabel="evaluations to 90 % of the best decrease",
          title="to a target (missing: not reached)")  # fmt: skip
    b.legend(fontsize=8)
    fig.tight_layout()
    fig.savefig(path, dpi=110)


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(
        prog="python -m benchmarks.scale", description=(__doc__ or "").split("\n")[0]
    )
    ap.add_argument("--sizes", default=",".join(map(str, SIZES)))
    ap.add_argument("--rounds", type=int, default=5)
    ap.add_argument("--max-tangents", type=int, default=10_000)
    ap.add_argument("--es-budget", type=int, default=20_000)
    ap.add_argument("--steps", type=int, default=100, help="optimize's steps")
    ap.add_argument("--figure", default=None)
    ap.add_argument("--json", action="store_true", help="print the rows as JSON")
    ap.add_argument("--save", default=None, help="also write the rows as JSON to this file")
    ap.add_argument(
        "--replot", default=None, help="the tables and --figure from a --save file; runs nothing"
    )
    args = ap.parse_args(argv)
    sizes = [int(s) for s in args.sizes.split(",")]
    floors = (("--rounds", args.rounds, 1), ("--max-tangents", args.max_tangents, 1),
              ("--es-budget", args.es_budget, 10), ("--steps", args.steps, 1))  # fmt: skip
    for name, v, lo in floors:
        if v < lo:
            ap.error(f"{name} must be >= {lo}, got {v}")
    bad = [s for s in sizes if s < 1 or (N_BALLS * STEPS) % s]
    if bad:
        ap.error(f"--sizes must divide N·T = {N_BALLS * STEPS}, got {bad}")
    if args.replot:
        with open(args.replot) as f:
            rows = json.load(f)
        return report(rows["costs"], rows["targets"], rows["es_budget"], args.figure)
    costs = []
    for p in sizes:
        print(f"p = {p}: cost per gradient …", file=sys.stderr, flush=True)
        costs.append(gradient_costs(p, args.rounds, args.max_tangents))
    for name in ("forward_mode", "central_fd"):
        _extrapolated(costs, name)
    targets = []
    for p in sizes:
        print(f"p = {p}: to the target …", file=sys.stderr, flush=True)
        targets.append(to_target(p, args.es_budget, args.steps))
    rows = {"costs": costs, "targets": targets, "es_budget": args.es_budget}
    if args.save:
        with open(args.save, "w") as f:
            json.dump(rows, f)
    if args.json:
        json.dump(rows, sys.stdout, indent=1)
        return 0
    return report(costs, targets, args.es_budget, args.figure)


def report(costs: list[dict], targets: list[dict], es_budget: int, path: str | None) -> int:
    """Print the two tables (and draw the figure to ``path``)."""
    print(f"jax {jax.__version__} on {jax.devices()[0].device_kind}; N = {N_BALLS} balls, "
          f"T = {STEPS} steps, float32")  # fmt: skip
    print("\ncost of one gradient (warm, median of rounds):")
    print("\n".join(cost_table(costs)))
    print(f"\nevaluations to the target (90 % of the best decrease; OpenAI-ES budget "
          f"{es_budget} rollouts at each σ of {ES_SIGMAS}):")  # fmt: skip
    print("\n".join(target_table(targets)))
    if path:
        figure(costs, targets, path)
        print(f"\nfigure: {path}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
