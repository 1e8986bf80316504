"""``diffsim wall`` / ``bounce`` / ``plot`` through Typer's runner."""

from __future__ import annotations

import json

import pytest

from conftest import cli_runner
from diffsim.cli import app

runner = cli_runner()


def _json(args):
    res = runner.invoke(app, [*args, "--json"])
    assert res.exit_code == 0, res.output
    return json.loads(res.stdout)


def test_wall_article_readouts():
    res = runner.invoke(app, ["wall", "--v0", "8"])
    assert res.exit_code == 0, res.output
    assert "landing x        6.00" in res.stdout
    assert "16.00" in res.stdout
    assert "clears wall      no" in res.stdout


def test_wall_json_keys_and_values():
    out = _json(["wall", "--v0", "8"])
    assert {"v0", "landing_x", "loss", "clears_wall", "grad", "closed_form_landing_x"} <= set(out)
    assert out["landing_x"] == 6.0 and out["loss"] == 16.0
    assert out["clears_wall"] is False and out["grad"] == 0.0
    basin = _json(["wall", "--v0", "11"])
    assert basin["clears_wall"] is True
    assert basin["landing_x"] == pytest.approx(basin["closed_form_landing_x"], rel=0.01)
    assert basin["grad"] == pytest.approx(2 * (basin["landing_x"] - 10) * 2 * 11 / 9.81, rel=0.01)
    smooth = _json(["wall", "--v0", "8", "--smoothing", "0.5"])
    assert smooth["grad"] < 0


def test_bounce_json_toi_vs_naive():
    args = ["bounce", "--y0", "1", "--vy0", "-1", "--g", "0", "--e", "0.8", "--h", "0.001"]
    toi = _json([*args, "--steps", "2000", "--toi"])
    naive = _json([*args, "--steps", "2000", "--no-toi"])
    assert {"y_final", "vy_final", "dy_final_dy0", "dy_final_dvy0"} <= set(toi)
    assert toi["y_final"] == pytest.approx(0.8, abs=1e-5)
    assert toi["dy_final_dy0"] == pytest.approx(-0.8, abs=1e-5)
    assert toi["dy_final_dvy0"] == pytest.approx(-1.6, abs=1e-4)
    assert naive["dy_final_dy0"] == 0.0


@pytest.mark.parametrize(
    "args, word",
    [
        (["wall", "--h", "-0.01"], "h"),
        (["wall", "--v0", "nan"], "v0"),
        (["wall", "--v0", "-3"], "v0"),
        (["wall", "--smoothing", "0"], "smoothing"),
        (["bounce", "--e", "1.5"], "e must"),
        (["bounce", "--e", "-0.1"], "e must"),
        (["bounce", "--h", "0"], "h"),
        (["bounce", "--g", "inf"], "g"),
        (["bounce", "--steps", "0"], "steps"),
    ],
)
def test_bad_values_exit_2(args, word):
    res = runner.invoke(app, args)
    assert res.exit_code == 2
    assert word in res.output
    assert "Traceback" not in res.output


def test_plot_writes_png(tmp_path):
    path = tmp_path / "wall.png"
    res = runner.invoke(app, ["plot", "wall", "--out", str(path)])
    assert res.exit_code == 0, res.output
    assert path.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"


def test_plot_unknown_figure():
    res = runner.invoke(app, ["plot", "nope"])
    assert res.exit_code == 2


@pytest.mark.parametrize(
    "command,shown", [("wall", "1/240 ≈ 0.004167"), ("jacobian", "1/60 ≈ 0.01667")]
)
def test_help_shows_the_default_time_step_as_a_fraction(command, shown):
    # issue 24: the default printed as 0.004166666666666667
    res = runner.invoke(app, [command, "--help"], env={"COLUMNS": "200"})
    assert res.exit_code == 0
    assert shown in res.stdout and "0.0041666666" not in res.stdout
    assert "0.0166666666" not in res.stdout


def test_plot_json_names_the_file_it_wrote(tmp_path):
    # issue 24: "every command takes --json" was not true of plot
    out = tmp_path / "wall.png"
    res = runner.invoke(app, ["plot", "wall", "--out", str(out), "--json"])
    assert res.exit_code == 0, res.output
    data = json.loads(res.stdout)
    assert data["figure"] == "wall" and data["path"] == str(out.resolve())
    assert data["bytes"] == out.stat().st_size > 1000
    assert out.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
