"""Training a controller through contact: the paper's control tasks with every estimator.

    python -m benchmarks.control [--task tennis] [--seeds 3] [--steps S] [--samples N] [--sigma σ]
                                 [--no-es] [--no-apg] [--only-apg]
    python -m benchmarks.control --task push-soft push-stiff friction --seeds 5

Each task of :data:`diffsim.TASKS` trained by :meth:`diffsim.Task.train` — the paper's
recipe for it (σ, N, optimiser, iterations; ``--steps/--samples/--sigma`` override them) —
with FoBG, ZoBG, AoBG, ``auto`` (deciding on every step) and ``auto`` deciding on one step in
K = ``--decide-every`` (25; :class:`~diffsim.estimators.Auto`'s ``decide_every``), the
latter also at the best fixed estimator's simulator evaluations (``auto-every@best``:
``optimize(budget=...)``), from the task's start (``--estimators`` picks the rows).
Reported per estimator, medians over
the seeds with the range: the final noise-free loss, the task's score where it has one (tennis:
the fraction of 200 held-out balls returned), the simulator evaluations and the wall time.
Tennis (:mod:`diffsim.systems.tennis`): a linear policy Θ ∈ R^{3×7} from Θ = 0, noise on every
step's action, every sample its own initial state; the loss is the cost over 64 fixed initial
states. The trajectory optimisations (:mod:`diffsim.systems.box_trajopt`): the forces on each
step, plain gradient descent with the paper's constant step.

Evolution strategies at FoBG's budget (``--no-es`` skips them): OpenAI-ES and separable
CMA-ES from evosax (``pip install evosax``, in the ``bench`` extra), each on the noise-free
loss L(θ) from the task's start, the whole run one ``jax.jit`` (generations by
``lax.scan``, each population by one ``jax.vmap`` of L), as many generations as fit in the
simulator evaluations FoBG used — counted as rollouts, as FoBG's are: one L(θ) of a
trajectory optimisation is one rollout, one of tennis ``loss.num_states`` (64), while a
FoBG sample is one rollout with its backward pass. Both start at step size σ (the task's,
or ``--sigma``; for tennis σ is in the action's units and serves as the step in Θ).
OpenAI-ES: a population of :data:`OPENAI_ES_POPULATION` (antithetic pairs), centred ranks,
σ fixed, Adam with the learning rate :data:`OPENAI_ES_LR` · σ. sep-CMA-ES: evosax's
defaults, σ adapted, the population 4 + ⌊3 ln d⌋ of d = dim θ. Reported: L at the final
mean (that evaluation not counted, as ``optimize``'s loss is not). Times, for every method:
``run s`` is the median wall time of a seed after the first, ``compile s`` the first seed's
extra time (tracing and compiling; later seeds reuse the compiled run, as
:meth:`~diffsim.Task.train` and the ES's one ``jax.jit`` do).
Brax APG (``--task pendulum``, ``tennis``; ``--no-apg`` skips it, ``--only-apg`` runs it
alone; it needs ``brax``): :mod:`benchmarks._apg`, the pendulum as a Brax ``PipelineEnv`` on
the ``mjx`` backend (the same MJCF, observation, initial states and horizon, reward minus the same
per-step cost), trained by ``brax.training.agents.apg.train.train`` with Brax's defaults but
for the episode length (100), 16 environments, one evaluation, ``use_float64``, and
``opt.iterations = 1`` in the env's model (reverse mode cannot go through MJX's
``while_loop`` solver), for FoBG's simulator steps rounded down to whole updates of
16 × 32 steps; its deterministic policy is then scored by diffsim's own rollout, as every
other row. "Brax APG" is Brax's default policy network (4 × 32, ELU, layer norm, tanh),
"Brax APG (linear)" the same factory with ``hidden_layer_sizes=()`` (tanh of a linear map).
``evaluations`` there is steps / 100 (rollout-equivalents); Brax re-traces its loop on every
call, so its ``run s`` includes tracing (its compiled programs come from a persistent cache
after the first seed). Tennis (``--task tennis``): no Brax pipeline simulates it, so its env
is diffsim's own step as a Brax ``Env`` (:func:`benchmarks._apg.make_objective_env`: the same
initial states, per-step cost, and the terminal cost as the episode's last reward), 200
environments (FoBG's N), episodes of 200 steps, ``u = 2·tanh(·)``; scored on the held-out
balls by diffsim's rollout.
"""

from __future__ import annotations

import argparse
import importlib.metadata
import sys
import time

import jax
import jax.flatten_util
import jax.numpy as jnp
import numpy as np
import optax

from diffsim import TASKS
from diffsim.estimators import Auto, make_estimator
from diffsim.policies import PolicyObjective

NAMES = {"first": "FoBG", "zeroth": "ZoBG", "alpha": "AoBG", "auto": "auto",
         "auto-every": "auto, K", "auto-every@best": "auto, K, best's budget"}  # fmt: skip
FIXED = ("first", "zeroth", "alpha")
"""The fixed estimators; ``auto-every@best`` runs at the simulator evaluations of the best of
those measured before it in the same run (:func:`_best_fixed`)."""
DECIDE_EVERY = 25
"""``auto-every``'s row: :class:`~diffsim.estimators.Auto` with ``decide_every`` K (the
decision on one step in K, the estimator it chose on the others)."""
ES = ("OpenAI-ES", "sep-CMA-ES")
OPENAI_ES_POPULATION = 10
"""OpenAI-ES's population, 5 antithetic pairs (with :data:`OPENAI_ES_LR`, the best of a small
sweep, population 10, 20, 50 and learning rate 0.1, 0.3, 1 σ, on the trajectory
optimisations' seeds 0–2)."""
OPENAI_ES_LR = 0.3
"""OpenAI-ES's Adam learning rate, in units of σ."""
APG_TASKS = {"pendulum": 16, "tennis": 200}
"""The tasks with Brax APG rows, and APG's parallel environments there (FoBG's N)."""
EVOSAX = "the ES baselines need evosax: pip install evosax (or --no-es to skip them)"


def _evosax():
    """evosax's algorithms, or a one-line exit saying how to install it."""
    try:
        from evosax.algorithms import Open_ES, Sep_CMA_ES
    except ImportError:
        raise SystemExit(EVOSAX) from None
    return importlib.metadata.version("evosax"), Open_ES, Sep_CMA_ES


def evolution(name: str, loss, theta0, sigma: float, budget: int, per_call: int):
    """``(run, population, generations)``: ``run(key, start) -> (θ, curve)``, the strategy
    ``name``'s mean from ``start`` (shaped as ``theta0``: one compiled run for every start)
    after as many generations as ``budget`` rollouts allow (``per_call`` rollouts per L(θ))
    and L at the mean after each generation (for the learning curves; not counted, as
    ``optimize``'s loss history is not), the whole loop jitted."""
    _, Open_ES, Sep_CMA_ES = _evosax()
    dim = int(jax.flatten_util.ravel_pytree(theta0)[0].size)
    if name == "OpenAI-ES":
        population = OPENAI_ES_POPULATION
        es = Open_ES(population, theta0, optimizer=optax.adam(OPENAI_ES_LR * sigma),
                     std_schedule=optax.constant_schedule(sigma))  # fmt: skip
        params = es.default_params
    else:
        population = 4 + int(3 * np.log(dim))  # CMA-ES's default
        es = Sep_CMA_ES(population, theta0)
        params = es.default_params.replace(std_init=jnp.asarray(sigma))
    generations = budget // (population * per_call)
    fitness = jax.vmap(loss)

    @jax.jit
    def run(key, start):
        k0, key = jax.random.split(key)
        state = es.init(k0, start, params)

        def generation(state, k):
            k_ask, k_tell = jax.random.split(k)
            pop, state = es.ask(k_ask, state, params)
            state, _ = es.tell(k_tell, pop, fitness(pop), state, params)
            return state, loss(es.get_mean(state))

        state, curve = jax.lax.scan(generation, state, jax.random.split(key, generations))
        return es.get_mean(state), curve

    return run, population, generations


def _spread(v, fmt):
    return f"{fmt(np.median(v))} [{fmt(min(v))}, {fmt(max(v))}]" if v else "—"


def _compile_and_run(times):
    """(compile, run) seconds from each seed's wall time: run is the median of the seeds
    after the first (the first alone with one seed), compile the first's extra time."""
    run = float(np.median(times[1:] if len(times) > 1 else times))
    return max(times[0] - run, 0.0), run


def _row(label, costs, fracs, evals, times):
    compile_s, run_s = _compile_and_run(times)
    return (
        f"{label:<10} {_spread(costs, lambda c: f'{c:.1f}'):>28} "
        f"{_spread(fracs, lambda f: f'{f:.0%}'):>22} {int(np.median(evals)):>12} "
        f"{compile_s:>9.1f} {run_s:>7.2f}"
    )


def run(task: str, seeds: int, steps: int | None, samples: int | None,
        sigma: float | None, es: bool = True, apg: bool = True,
        only_apg: bool = False, estimators: tuple[str, ...] = tuple(NAMES),
        decide_every: int = DECIDE_EVERY,
        curves: dict[str, list[tuple[np.ndarray, np.ndarray]]] | None = None,
        ) -> list[str]:  # fmt: skip
    """The task's table rows; ``curves``, when given, receives each row's learning curves,
    ``label -> [(simulator evaluations, loss) per seed]``."""
    spec = TASKS[task]
    sigma = spec.sigma if sigma is None else sigma
    samples = spec.num_samples if samples is None else samples
    steps = spec.steps if steps is None else steps
    loss, theta0 = spec.problem()
    start = f"{task}: the start costs {float(loss(theta0)):.1f}"
    if spec.score is not None:
        start += f" and scores {float(spec.score(loss, theta0)):.0%} ({spec.score_name})"
    opt = spec.optimizer_text()
    rows = [
        f"{start}; {steps} steps of {opt}, N = {samples}, σ = {sigma}, {seeds} seeds: "
        "median [min, max]",
        f"{'estimator':<10} {'loss':>28} {'score':>22} {'evaluations':>12} {'compile s':>9} "
        f"{'run s':>7}",
    ]
    budget = samples * steps  # FoBG's, replaced by what it counts
    if only_apg:
        return rows + _apg_rows(task, seeds, budget, loss)
    fixed: dict[str, tuple[float, float, int]] = {}  # name -> (median score, loss, evals)
    for name in estimators:
        label, cap = NAMES[name], None
        if name.startswith("auto-every"):
            label = f"auto, K={decide_every}"
            est = Auto(sigma=sigma, num_samples=samples, decide_every=decide_every)
            if name == "auto-every@best":
                best = _best_fixed(fixed)
                cap = fixed[best][2]
                label += f", {NAMES[best]}'s {cap}"
        else:
            est = make_estimator(name, sigma=sigma, num_samples=samples)
        costs, fracs, evals, times = [], [], [], []
        for seed in range(seeds):
            t = time.perf_counter()
            r = spec.train(est, key=jax.random.PRNGKey(seed), steps=steps, budget=cap)
            jax.block_until_ready(r.theta)
            times.append(time.perf_counter() - t)
            costs.append(float(r.loss))
            if spec.score is not None:
                fracs.append(float(spec.score(loss, r.theta)))
            evals.append(int(r.evaluations))
            if curves is not None:  # one name per row on every task (the budget left out)
                named = label if cap is None else f"auto, K={decide_every}, the best's budget"
                curves.setdefault(named, []).append(_curve(r))
        if name == "first":
            budget = int(np.median(evals))
        if name in FIXED:
            score = float(np.median(fracs)) if fracs else 0.0
            fixed[name] = (score, float(np.median(costs)), int(np.median(evals)))
        rows.append(_row(label, costs, fracs, evals, times))
        print(rows[-1], flush=True)
    if not es:
        return rows + (_apg_rows(task, seeds, budget, loss) if apg else [])
    per_call = loss.num_states if isinstance(loss, PolicyObjective) else 1
    rows.append(
        f"evosax {_evosax()[0]}, at FoBG's {budget} rollouts"
        + (f" ({per_call} per L(θ))" if per_call > 1 else "")
        + f", from the start with the step σ = {sigma}: OpenAI-ES with σ fixed, Adam's "
        f"learning rate {OPENAI_ES_LR * sigma:g}; sep-CMA-ES with σ adapted"
    )
    print(rows[-1], flush=True)
    for label in ES:
        costs, fracs, times = [], [], []
        go, population, generations = evolution(label, loss, theta0, sigma, budget, per_call)
        for seed in range(seeds):
            t = time.perf_counter()  # the first seed compiles go, the others reuse it
            theta, curve = jax.block_until_ready(go(jax.random.PRNGKey(seed), theta0))
            times.append(time.perf_counter() - t)
            if curves is not None:
                spent = population * per_call * np.arange(generations + 1)
                start = float(loss(theta0))
                curves.setdefault(label, []).append((spent, np.r_[start, np.asarray(curve)]))
            costs.append(float(loss(theta)))
            if spec.score is not None:
                fracs.append(float(spec.score(loss, theta)))
        evals = [generations * population * per_call]
        rows.append(
            _row(label, costs, fracs, evals, times)
            + f"  population {population}, {generations} generations"
        )
        print(rows[-1], flush=True)
    return rows + (_apg_rows(task, seeds, budget, loss) if apg else [])


def _curve(r) -> tuple[np.ndarray, np.ndarray]:
    """An ``optimize`` run's learning curve: the noise-free loss at θ_k against the
    simulator evaluations spent before step k, then the final loss at the run's total (the
    steps a budget skipped, which spent nothing, left out)."""
    spent = np.asarray(r.history.evaluations)
    ran = np.r_[True, np.diff(spent) > 0]
    before = np.r_[0, spent[:-1]][ran]
    return np.r_[before, spent[-1]], np.r_[np.asarray(r.history.loss)[ran], float(r.loss)]


def figure(path: str, tasks: dict[str, dict[str, list]]) -> None:
    """The learning curves, one panel per task: each row's median loss over the seeds
    against simulator evaluations, the band its range (each seed's curve read, as a step
    function, at common evaluation counts)."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    cols = min(len(tasks), 2)
    rows_n = -(-len(tasks) // cols)
    fig, axes = plt.subplots(rows_n, cols, figsize=(5.2 * cols, 3.6 * rows_n), squeeze=False)
    for ax, (task, rows) in zip(axes.flat, tasks.items()):
        for label, seeds in rows.items():
            top = max(float(x[-1]) for x, _ in seeds)
            grid = np.unique(np.r_[0.0, np.geomspace(1.0, max(top, 1.0), 200)])
            at = np.array([y[np.searchsorted(x, grid, side="right") - 1] for x, y in seeds])
            style = "--" if label in ES else "-"
            (line,) = ax.plot(grid[1:], np.median(at, 0)[1:], style, label=label, lw=1.4)
            ax.fill_between(grid[1:], at.min(0)[1:], at.max(0)[1:], color=line.get_color(),
                            alpha=0.12, lw=0)  # fmt: skip
        seeds_n = max(len(seeds) for seeds in rows.values())
        ax.set(title=f"{task} (median, band: range over {seeds_n} seeds)",
               xscale="log", yscale="log", xlabel="simulator evaluations",
               ylabel="loss (noise-free)")  # fmt: skip
        ax.title.set_fontsize(9)
        ax.grid(alpha=0.3, which="both", lw=0.5)
    for ax in list(axes.flat)[len(tasks) :]:
        ax.axis("off")
    handles, labels = axes.flat[0].get_legend_handles_labels()
    fig.legend(handles, labels, loc="lower center", ncol=min(len(labels), 4), fontsize=8)
    fig.tight_layout(rect=(0, 0.035 * -(-len(labels) // 4) + 0.01, 1, 1))
    fig.savefig(path, dpi=120)
    print(f"wrote {path}", flush=True)


def _best_fixed(fixed: dict[str, tuple[float, float, int]]) -> str:
    """The best fixed estimator measured so far: the highest median score (where the task
    scores), then the lowest median loss."""
    if not fixed:
        raise SystemExit("auto-every@best needs a fixed estimator's row before it: "
                         "--estimators first zeroth alpha auto-every@best")  # fmt: skip
    return min(fixed, key=lambda n: (-fixed[n][0], fixed[n][1]))


def _apg_rows(task: str, seeds: int, budget: int, loss) -> list[str]:
    """Brax APG's rows at FoBG's ``budget`` rollouts (pendulum and tennis; see the
    docstring)."""
    if task not in APG_TASKS:
        return []
    from benchmarks import _apg

    horizon = loss.horizon
    envs = APG_TASKS[task]
    scale = _apg.TENNIS_ACTION_SCALE
    what = ("opt.iterations = 1" if task == "pendulum"
            else f"diffsim's step as a Brax Env, u = {scale:g}·tanh; the H={horizon} row "
            f"differentiates whole episodes, updates of {envs} envs × {horizon} steps")  # fmt: skip
    head = (
        f"Brax APG (brax {importlib.metadata.version('brax')}), at FoBG's {budget} rollouts "
        f"({budget * horizon} steps, rounded down to updates of {envs} envs × "
        f"{_apg.HORIZON_LENGTH} steps): Brax's defaults (Adam 1e-4 decaying 0.997 an update), "
        f"{what}; scored by diffsim's rollout"
    )
    print(head, flush=True)
    return [head, *_apg.rows(seeds, budget * horizon, _row, task, envs)]


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("--task", nargs="+", default=["tennis"], choices=list(TASKS))
    p.add_argument("--seeds", type=int, default=3)
    p.add_argument("--steps", type=int, default=None)
    p.add_argument("--samples", type=int, default=None)
    p.add_argument("--sigma", type=float, default=None)
    p.add_argument("--estimators", nargs="+", default=list(NAMES), choices=list(NAMES),
                   help="the estimator rows (FoBG's evaluations set the ES budget)")  # fmt: skip
    p.add_argument("--decide-every", type=int, default=DECIDE_EVERY,
                   help="K of the 'auto-every' row")  # fmt: skip
    p.add_argument("--no-es", dest="es", action="store_false",
                   help="skip the evolution strategies (they need evosax)")  # fmt: skip
    p.add_argument("--no-apg", dest="apg", action="store_false",
                   help="skip Brax APG (pendulum and tennis; it needs brax)")  # fmt: skip
    p.add_argument("--only-apg", action="store_true",
                   help="Brax APG's rows alone (pendulum, tennis)")  # fmt: skip
    p.add_argument("--figure", help="also draw the rows' learning curves (a .png path)")
    a = p.parse_args(argv)
    if a.es and not a.only_apg:
        _evosax()  # before any training: say at once how to install it
    jax.config.update("jax_enable_x64", True)
    drawn: dict[str, dict[str, list]] = {}
    for task in a.task:
        rows = run(
            task,
            a.seeds,
            a.steps,
            a.samples,
            a.sigma,
            a.es,
            a.apg,
            a.only_apg,
            tuple(a.estimators),
            a.decide_every,
            drawn.setdefault(task, {}) if a.figure else None,
        )
        print("\n".join(rows), flush=True)  # the whole table, header first, for the record
    if a.figure:
        figure(a.figure, drawn)
    return 0


if __name__ == "__main__":
    sys.exit(main())
