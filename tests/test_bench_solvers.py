"""``benchmarks.solvers``: its curve arithmetic against hand-built curves, and every method's
counted evaluations against a loss that counts its own calls."""

import math
import sys
from pathlib import Path

import jax
import jax.numpy as jnp
import numpy as np
import pytest

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from benchmarks import solvers  # noqa: E402

jax.config.update("jax_enable_x64", True)


def test_curve_arithmetic_on_a_hand_built_curve():
    # unsorted points, a NaN (never counts as reached) and a rise (best-so-far holds)
    spent = np.array([30, 0, 10, 20, 40])
    loss = np.array([0.9, 5.0, np.nan, 2.0, 1.5])
    x, y = solvers.best_so_far(spent, loss)
    assert x.tolist() == [0, 10, 20, 30, 40]
    assert y.tolist() == [5.0, 5.0, 2.0, 0.9, 0.9]
    assert solvers.evaluations_to(spent, loss, 2.0) == 20
    assert solvers.evaluations_to(spent, loss, 1.0) == 30
    assert solvers.evaluations_to(spent, loss, 0.5) == math.inf
    assert solvers.loss_at(spent, loss, 25) == 2.0
    assert solvers.loss_at(spent, loss, 10_000) == 0.9
    # within 0.5 % of the best: relative, or the task's tolerance where the best is ~0
    assert solvers.threshold(-200.0, 0.0) == -199.0
    assert solvers.threshold(1e-9, 0.0025) == pytest.approx(0.0025 + 1e-9)


def test_the_best_setting_and_the_table():
    runs_a = [solvers.Run(np.array([0, 50, 500]), np.array([10.0, 2.0, 1.0]), 500, 1.0)] * 2
    runs_b = [solvers.Run(np.array([0, 50, 500]), np.array([10.0, 9.0, 8.0]), 500, 1.0)] * 2
    a = solvers.Config("FoBG + Adam", "lr a", lambda s, n: runs_a[0])
    b = solvers.Config("FoBG + Adam", "lr b", lambda s, n: runs_b[0])
    d = solvers.Config("default (decide)", "-", lambda s, n: runs_a[0])
    rows, best = solvers.rows({b: runs_b, a: runs_a, d: runs_a}, 0.0, 1_000)
    assert best == 1.0
    fobg = next(r for r in rows if r.family == "FoBG + Adam")
    assert fobg.setting == "lr a"  # reaches 1.0 (<= 1.005); "lr b" never does
    assert fobg.reach == [500.0, 500.0]
    assert fobg.at[100] == [2.0, 2.0] and fobg.at[10_000] == [math.inf, math.inf]
    text = "\n".join(solvers.table("t", rows, best, solvers.threshold(best, 0.0), 1_000))
    assert "| FoBG + Adam | lr a | 2/2 | 500 [500, 500] | 2 [2, 2] | 1 [1, 1] | — |" in text


class _Counting:
    """A quadratic whose every evaluation (a rollout, batched or not, its gradient's forward
    pass included) is counted on the host."""

    def __init__(self):
        self.calls = 0

    def tick(self, t):
        self.calls += int(np.size(t))

    def __call__(self, theta):
        jax.debug.callback(self.tick, theta[..., 0])
        return jnp.sum((theta - jnp.arange(1.0, 3.0)) ** 2) + 0.5 * theta[0] * theta[1]


def _problem(loss):
    start = jnp.array([4.0, -3.0])
    return solvers.Problem("quad", loss, lambda seed, n: start, 1, 0.3, 4, 0.1, 0.0,
                           lambda *a: None)  # fmt: skip


@pytest.mark.parametrize("make", ["decide", "lbfgs", "first", "zeroth", "OpenAI-ES"])
def test_counted_evaluations_match_a_counting_loss(make):
    """What each method's run says it spent is what the loss saw, less the evaluations made
    for the record alone (``optimize``'s loss where a step did not evaluate it already, an
    ES's at its mean after each generation and at the start)."""
    if make == "OpenAI-ES":
        pytest.importorskip("evosax")  # the bench extra
    loss = _Counting()
    p = _problem(loss)
    budget = 300
    if make == "decide":
        c = solvers._decide(p, budget)
    elif make == "lbfgs":
        c = solvers._lbfgs(p, budget)
    elif make == "OpenAI-ES":
        c = solvers._es(p, make, 1.0, budget, 1)
    else:
        c = solvers._adam(p, make, 1.0, budget)
    loss.calls = 0
    run = c.run(0, 1)
    jax.effects_barrier()
    assert 0 < run.total <= budget + 20  # a run stops within one step of its budget
    assert run.spent[-1] <= run.total and np.all(np.diff(run.spent) >= 0)
    if make == "OpenAI-ES":
        generations = len(run.spent) - 1
        assert loss.calls == run.total + generations + 1
    else:
        # the record: one loss per scanned step of each phase, and one at each phase's end;
        # a check of the default counts its value at θ once more than it calls the loss (it
        # comes with its gradient): the count errs against the default, by one a check
        checks = sum(solvers.checked(d) for d in run.result.decisions)
        over = run.total + _recorded(run, make) - loss.calls
        assert 0 <= over <= checks
        assert checks == (1 if make == "decide" else 0)


def _recorded(run, make):
    """The loss evaluations made for the record alone, in each phase: an L-BFGS phase's
    history reads the line search's own value at each iterate, and the loss once more where
    its steps stopped (θ then holds) or at its end; a sampling phase reads the loss at every
    iterate a step ran from, and once more."""
    r = run.result
    if not r.decisions:
        return 1 if make == "lbfgs" else int(r.steps_run) + 1
    ends = [d.step for d in r.decisions[1:]]
    return sum(1 if d.method == "lbfgs" else end - d.step + 1
               for d, end in zip(r.decisions, ends) if d.method != "stop")  # fmt: skip


def test_the_guide_tables_are_the_record():
    """Every row of the solvers tables in docs/guides/control.md is a line of
    docs/records/solvers.txt (the record the guide quotes; issue 24)."""
    guide = (ROOT / "docs/guides/control.md").read_text()
    record = set((ROOT / "docs/records/solvers.txt").read_text().splitlines())
    section = guide.split("## Every solver at its best setting", 1)[1].split("\n## ", 1)[0]
    rows = [line for line in section.splitlines() if line.startswith("| ") and "---" not in line]
    quoted = [line for line in rows if not line.startswith("| method |")]
    assert len(quoted) >= 8
    assert [line for line in quoted if line not in record] == []
