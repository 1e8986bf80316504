"""The `diffsim` command: --help, --version, jacobian (human and JSON), bad input."""

from __future__ import annotations

import json
import pathlib
import re
import subprocess
import sys

import numpy as np
import pytest

import diffsim
from conftest import cli_runner
from diffsim.cli import app

runner = cli_runner()


def test_help_and_version():
    out = runner.invoke(app, ["--help"])
    assert out.exit_code == 0 and "jacobian" in out.output
    # the help points to the documentation a pip user has (`diffsim docs`), at pages that
    # exist, and to the site for those with a clone
    text = " ".join(out.output.split())
    assert "bash scripts/docs serve" in text and "http://127.0.0.1:8000/" in text
    root = pathlib.Path(__file__).resolve().parent.parent
    pages = re.findall(r"diffsim docs ([\w/-]+)", text)
    assert len(pages) >= 2, text
    for page in pages:
        assert (root / "docs" / f"{page}.md").is_file(), page
    out = runner.invoke(app, ["--version"])
    assert out.exit_code == 0 and diffsim.__version__ in out.output


@pytest.mark.parametrize(
    "argv,message",
    [
        (["--version", "true"], "No such command 'true'"),
        (["--version", "wall"], "--version takes no command, got 'wall'"),
        (["--float32"], "missing command"),
    ],
)
def test_version_with_a_command_and_no_command_are_refused(argv, message):
    # issue 24: the eager --version exited 0 whatever followed it
    out = runner.invoke(app, argv)
    assert out.exit_code == 2 and out.stdout == ""
    lines = out.stderr.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("error: ") and message in lines[0], lines


@pytest.mark.parametrize(("T", "h"), [(2, 1 / 60), (10, 0.05), (1, 0.3)])
def test_jacobian_json(T, h):
    out = runner.invoke(app, ["jacobian", "--steps", str(T), "--h", str(h), "--json"])
    assert out.exit_code == 0, out.output
    data = json.loads(out.stdout)
    assert set(data) == {"steps", "h", "dtype", "autodiff", "product", "analytic", "closed_form"}
    assert data["steps"] == T
    for key in ("autodiff", "product", "analytic", "closed_form"):
        np.testing.assert_allclose(data[key], [[1.0, T * h], [0.0, 1.0]], rtol=1e-6)


def test_jacobian_table_shows_the_article_number():
    out = runner.invoke(app, ["jacobian"])
    assert out.exit_code == 0
    assert out.output.count("0.0333") == 4


@pytest.mark.parametrize(
    ("args", "message"),
    [
        (["--h", "-1"], "h must be finite and > 0"),
        (["--h", "nan"], "h must be a finite number"),
        (["--steps", "0"], "steps must be an integer >= 1"),
    ],
)
def test_jacobian_bad_input_exits_2_without_traceback(args, message):
    proc = subprocess.run(
        [sys.executable, "-m", "diffsim", "jacobian", *args], capture_output=True, text=True
    )
    assert proc.returncode == 2
    assert message in proc.stderr
    assert "Traceback" not in proc.stderr + proc.stdout


def test_every_command_but_demo_takes_json_as_the_readme_says():
    import typer

    commands = typer.main.get_command(app).commands  # pyright: ignore[reportAttributeAccessIssue]
    without = sorted(
        name
        for name, command in commands.items()
        if not any("--json" in p.opts for p in command.params)
    )
    assert without == ["demo"]
    readme = (pathlib.Path(__file__).resolve().parents[1] / "README.md").read_text()
    assert "takes `--json` (strict JSON): all but `demo`" in readme


def test_help_shows_no_type_for_flags():
    # issue 24: every flag (--json, --help, --toi, ...) was listed as taking a `<bool>`
    import typer

    commands = typer.main.get_command(app).commands  # pyright: ignore[reportAttributeAccessIssue]
    for argv in [["--help"], *([name, "--help"] for name in commands)]:
        out = runner.invoke(app, argv, env={"COLUMNS": "200"})
        assert out.exit_code == 0, argv
        assert "<bool>" not in out.stdout and "--help" in out.stdout, argv
    wall = runner.invoke(app, ["wall", "--help"]).stdout
    assert "<float>" in wall or "FLOAT" in wall  # values keep their type (Typer's old label)
