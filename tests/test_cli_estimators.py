"""``diffsim estimate`` / ``diffsim optimize``."""

from __future__ import annotations

import json
import re

import jax
import jax.numpy as jnp
import numpy as np
import pytest

import diffsim
from conftest import cli_runner
from diffsim.cli import app
from diffsim.estimators import ESTIMATORS, ZerothOrder
from diffsim.systems import projectile_wall as pw
from diffsim.systems import wall_study

runner = cli_runner()


def _json(args):
    res = runner.invoke(app, args)
    assert res.exit_code == 0, res.output
    return json.loads(res.stdout.strip().splitlines()[-1])


def test_estimate_json(estimator_name):
    name = estimator_name
    out = _json(["estimate", "--system", "wall", "--v0", "9.0", "--estimator", name, "--json"])
    assert {"estimate", "std_error", "evaluations"} <= out.keys()
    assert set(ESTIMATORS[name].reports) <= out.keys()
    if "alpha" in ESTIMATORS[name].reports:
        assert 0.0 <= out["alpha"] <= 1.0
    if name == "exact":  # the plateau: 0, one gradient evaluation
        assert out["estimate"] == 0.0 and out["evaluations"] == 1


def _table(text: str) -> dict[str, str]:
    rows = (line.strip("│ ").split("│") for line in text.splitlines() if line.count("│") == 3)
    return {k.strip(): v.strip() for k, v in rows}


def test_estimate_table_shows_the_library_numbers():
    res = runner.invoke(app, ["estimate", "--v0", "8", "--estimator", "zeroth", "--samples", "8"])
    assert res.exit_code == 0, res.output
    rows = _table(res.output)
    r = ZerothOrder(num_samples=8)(  # σ by the one rule: 5 % of v0
        pw.loss, np.float64(8.0), jax.random.PRNGKey(0)
    )
    assert rows["estimate"] == f"{float(r.estimate):.6g}"
    assert rows["std_error"] == f"{float(r.std_error):.6g}"
    assert rows["evaluations"] == rows["loss_evaluations"] == "9"  # N + 1 loss evaluations
    assert rows["grad_evaluations"] == "0"
    assert rows["sigma_used"] == "0.4" and rows["samples"] == "8" and "sigma" not in rows


# the default method from the plateau, and the adam recipe with AoBG just below the cliff
@pytest.mark.parametrize("v0,extra", [(7.7, []), (8.0, []), (8.7, []), (9.38, ["-e", "alpha"])])
def test_optimize_defaults_from_plateau(v0, extra):
    out = _json(["optimize", "--system", "wall", "--v0", str(v0), *extra, "--json"])
    assert out["method"] == ("adam" if extra else "decide")
    if not extra:  # the decisions end with L-BFGS converged on the exact gradient
        assert [d["method"] for d in out["decisions"]][-2:] == ["lbfgs", "stop"]
        assert out["evaluations"] == out["loss_evaluations"] + out["grad_evaluations"]
    assert {
        "v0_final",
        "loss_final",
        "landing_x_final",
        "iterations",
        "evaluations",
        "history",
    } <= out.keys()
    assert abs(out["landing_x_final"] - 10.0) < 0.05
    assert out["iterations"] == len(out["history"]["v0"])


@pytest.mark.parametrize(
    "method",
    ["lbfgs", pytest.param("decide", marks=pytest.mark.slow)],  # decide: ~30 s
)
def test_optimize_methods_run_the_library_call(method):
    """``--method lbfgs`` and the default are ``diffsim.optimize`` with the registry's
    options: the same final v0, evaluations, steps and decisions."""
    out = _json(["optimize", "--v0", "12", "--method", method, "--json"])
    r = diffsim.optimize(
        pw.loss, jnp.asarray(12.0), key=jax.random.PRNGKey(0), steps=300,
        **diffsim.optimization.METHODS[method].options(None),
    )  # fmt: skip
    assert out["v0_final"] == pytest.approx(float(r.theta), abs=1e-6)
    assert out["evaluations"] == int(r.evaluations)
    assert out["iterations"] == int(r.steps_run) == len(out["history"]["v0"])
    assert [d["method"] for d in out["decisions"]] == [d.method for d in r.decisions]
    assert abs(out["landing_x_final"] - 10.0) < 0.05
    if method == "decide":
        res = runner.invoke(app, ["optimize", "--v0", "12"])
        assert res.exit_code == 0, res.output
        assert "lbfgs  (the exact gradient is trusted)" in res.output


def test_optimize_exact_stuck_and_text_output():
    out = _json(["optimize", "--v0", "8.0", "--estimator", "exact", "--steps", "20", "--json"])
    assert out["v0_final"] == 8.0 and out["landing_x_final"] == pytest.approx(6.0)
    assert out["evaluations"] == 20 and out["loss_final"] == pytest.approx(16.0)
    res = runner.invoke(app, ["optimize", "--v0", "8.0", "--estimator", "zeroth", "--steps", "5"])
    assert res.exit_code == 0, res.output
    # the line reports the library's run: wall_study.optimize_wall with the CLI's defaults
    r = wall_study.optimize_wall(
        8.0,
        ZerothOrder(num_samples=wall_study.RECIPE.samples),
        key=jax.random.PRNGKey(0),
        steps=5,
    )
    v = float(r.theta)
    x = float(pw.landing_x(v))
    m = re.search(
        r"v0 8\.000 → ([\d.]+) m/s, landing x ([\d.]+) m, loss ([\d.e+-]+), 5 iterations, "
        r"(\d+) evaluations \((within|NOT within) 5 cm",
        " ".join(res.output.split()),
    )
    assert m, res.output
    assert m[1] == f"{v:.4f}" and m[2] == f"{x:.4f}" and m[3] == f"{float(r.loss):.3g}"
    assert int(m[4]) == int(r.evaluations) == 5 * (wall_study.RECIPE.samples + 1)
    assert m[5] == ("within" if abs(x - 10.0) <= wall_study.RECIPE.tolerance_x else "NOT within")


@pytest.mark.parametrize(
    "args, word",
    [
        (["estimate", "--sigma", "0"], "sigma"),
        (["estimate", "--sigma", "-1"], "sigma"),
        (["estimate", "--samples", "1"], "samples"),
        (["estimate", "--estimator", "nope"], "estimator"),
        (["estimate", "--system", "moon"], "system"),
        (["estimate", "--v0", "nan"], "v0"),
        (["estimate", "--v0", "inf"], "v0"),
        (["optimize", "-m", "adam", "--sigma", "0"], "sigma"),
        (["optimize", "-m", "adam", "--samples", "1"], "samples"),
        (["optimize", "--estimator", "nope"], "estimator"),
        (["optimize", "--system", "moon"], "system"),
        (["optimize", "--v0", "nan"], "v0"),
        (["optimize", "--steps", "0"], "steps"),
        (["optimize", "-m", "adam", "--lr", "0"], "lr"),
    ],
)
def test_bad_input_exit_2(args, word):
    res = runner.invoke(app, args)
    assert res.exit_code == 2
    assert word in res.output
    assert len(res.output.strip().splitlines()) == 1


def test_table_title_does_not_wrap_inside_a_unit():
    # issue 24: the exact estimator's narrow table wrapped its title as "v0 = 8.000 \n m/s"
    res = runner.invoke(app, ["estimate", "--v0", "8", "-e", "exact"])
    assert res.exit_code == 0, res.output
    assert res.stdout.splitlines()[0].strip() == "d loss / d v0 at v0 = 8.000 m/s (exact)"
