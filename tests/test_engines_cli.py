"""``diffsim diagnose --mjcf``: your own MuJoCo model through the gradient doctor.

Bad input is one line on stderr and exit code 2; on the free-flight scene the loss and its
gradient have a closed form (semi-implicit Euler) and the doctor trusts the gradient.
MuJoCo is a test requirement (scripts/_setup.sh installs the ``mjx`` extra); only the
minimum-versions job leaves this file out (scripts/test-minimum).
"""

from __future__ import annotations

import json

import pytest

from conftest import cli_runner
from diffsim.cli import app
from diffsim.engines import scenes


def _fails(args, match):
    r = cli_runner().invoke(app, ["diagnose", *args])
    assert r.exit_code == 2, r.output
    lines = [line for line in r.stderr.splitlines() if line.strip()]
    assert len(lines) == 1, r.stderr
    assert match in lines[0], lines[0]


def test_mjcf_bad_input_is_one_line_and_exit_code_2(tmp_path):
    _fails(["--mjcf", str(tmp_path / "missing.xml")], "not found")
    bad = tmp_path / "broken.xml"
    bad.write_text("<mujoco><worldbody><body><geom type='sphere'/></body></mujoco>")
    _fails(["--mjcf", str(bad)], "broken.xml")
    _fails(["--mjcf", str(bad)], "XML")  # MuJoCo's parse error
    _fails(["--mjcf", scenes.path("free_flight"), "--body", "hand"], "no body named 'hand'")
    _fails(["--mjcf", scenes.path("free_flight"), "--steps", "0"], "steps must be an integer >= 1")
    _fails(["--mjcf", scenes.path("free_flight"), "--steps", "-3"], "steps must be an integer >= 1")
    _fails(["--mjcf", scenes.path("free_flight"), "--target", "1,2"], "X,Y,Z")
    _fails(["--mjcf", scenes.path("cartpole")], "no body with a free joint")
    _fails(["--mjcf", scenes.path("free_flight"), "--wrt", "ctrl"], "no actuators")


@pytest.mark.slow
def test_mjcf_free_flight_json_matches_the_closed_form():
    """Loss ‖p_T − p_0‖² of the ball dropped from rest, with respect to qvel0: semi-implicit
    Euler gives Δz = −g h² T(T+1)/2 and ∂Δz/∂v_z = T h, so the gradient is
    (0, 0, 2 Δz T h, 0, 0, 0)."""
    T, h, g = 40, 0.01, 9.81
    r = cli_runner().invoke(
        app,
        ["diagnose", "--mjcf", scenes.path("free_flight"), "--steps", str(T), "--json",
         "--samples", "32"],
    )  # fmt: skip
    assert r.exit_code == 0, r.output
    out = json.loads(r.stdout)
    assert set(out) == {
        "verdict",
        "flags",
        "recommendation",
        "evaluations",
        "loss",
        "grad",
        "devices",
    }
    assert out["devices"] == 1
    dz = -g * h * h * T * (T + 1) / 2
    assert out["loss"] == pytest.approx(dz**2, rel=1e-9)
    assert out["grad"] == pytest.approx([0, 0, 2 * dz * T * h, 0, 0, 0], abs=1e-9)
    assert out["verdict"] == "trusted", out
    assert out["flags"] == []
