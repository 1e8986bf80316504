"""``diffsim estimate`` / ``diffsim optimize``."""

from __future__ import annotations

import json

import pytest
from typer.testing import CliRunner

from diffsim.cli import app

runner = CliRunner()


def _json(args):
    res = runner.invoke(app, args)
    assert res.exit_code == 0, res.output
    return json.loads(res.stdout.strip().splitlines()[-1])


@pytest.mark.parametrize("name", ["exact", "fd", "zeroth", "first", "alpha"])
def test_estimate_json(name):
    out = _json(["estimate", "--system", "wall", "--v0", "9.0", "--estimator", name, "--json"])
    assert {"estimate", "std_error", "evaluations"} <= out.keys()
    if name == "alpha":
        assert {"alpha", "epsilon", "bias_gap"} <= out.keys()
        assert 0.0 <= out["alpha"] <= 1.0
    if name == "exact":
        assert out["estimate"] == 0.0 and out["evaluations"] == 1


def test_estimate_table():
    res = runner.invoke(app, ["estimate", "--v0", "8", "--estimator", "zeroth", "--samples", "8"])
    assert res.exit_code == 0 and "estimate" in res.output


@pytest.mark.parametrize("v0", [7.7, 8.0, 8.7, 9.38])
def test_optimize_defaults_from_plateau(v0):
    out = _json(["optimize", "--system", "wall", "--v0", str(v0), "--json"])
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


def test_optimize_exact_stuck_and_text_output():
    out = _json(["optimize", "--v0", "8.0", "--estimator", "exact", "--steps", "20", "--json"])
    assert out["v0_final"] == 8.0 and out["landing_x_final"] == pytest.approx(6.0)
    res = runner.invoke(app, ["optimize", "--v0", "8.0", "--estimator", "zeroth", "--steps", "5"])
    assert res.exit_code == 0 and "evaluations" in res.output


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
        (["optimize", "--sigma", "0"], "sigma"),
        (["optimize", "--samples", "1"], "samples"),
        (["optimize", "--estimator", "nope"], "estimator"),
        (["optimize", "--system", "moon"], "system"),
        (["optimize", "--v0", "nan"], "v0"),
        (["optimize", "--steps", "0"], "steps"),
        (["optimize", "--lr", "0"], "lr"),
    ],
)
def test_bad_input_exit_2(args, word):
    res = runner.invoke(app, args)
    assert res.exit_code == 2
    assert word in res.output
    assert len(res.output.strip().splitlines()) == 1
