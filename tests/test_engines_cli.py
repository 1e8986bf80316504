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
    _fails(["--no-compare"], "--compare/--no-compare does not apply to the built-in systems")


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
        "mujoco_gap",
    }
    assert out["devices"] == 1
    # MJX's step against mj_step along C's first 100 steps (the ball in free fall: the same
    # model, to rounding)
    gap = out["mujoco_gap"]
    assert gap["steps"] == 100 and gap["differs"] is False
    assert gap["qvel"] < 1e-12 and gap["qvel_change"] == pytest.approx(g * h, rel=1e-9)
    dz = -g * h * h * T * (T + 1) / 2
    assert out["loss"] == pytest.approx(dz**2, rel=1e-9)
    assert out["grad"] == pytest.approx([0, 0, 2 * dz * T * h, 0, 0, 0], abs=1e-9)
    assert out["verdict"] == "trusted", out
    assert out["flags"] == []


def test_reach_loss_refuses_bad_input_naming_it():
    """The loss ``--mjcf`` examines is the library's ``MjxStep.reach_loss`` (the CLI builds
    none): each bad argument is a ValueError naming it."""
    from diffsim.engines import mjx

    ball, cartpole = mjx.load(scenes.path("free_flight")), mjx.load(scenes.path("cartpole"))
    for call, match in (
        (lambda: ball.reach_loss(5, "qacc"), "wrt must be 'qvel0', 'qpos0' or 'ctrl'"),
        (lambda: ball.reach_loss(0), "num_steps must be an integer >= 1"),
        (lambda: ball.reach_loss(10**20), "num_steps must be at most 1073741823"),
        (lambda: ball.reach_loss(5, body="hand"), "no body named 'hand'"),
        (lambda: ball.reach_loss(5, target=[1.0, 2.0]), "target must be three finite numbers"),
        (lambda: ball.reach_loss(5, target=[1.0, 2.0, float("nan")]), "target must be three"),
        (lambda: ball.reach_loss(5, "ctrl"), "no actuators"),
        (lambda: cartpole.reach_loss(5), "no body with a free joint"),
    ):
        with pytest.raises(ValueError, match=match):
            call()


@pytest.mark.slow
def test_reach_loss_is_the_closed_form():
    """Semi-implicit Euler from rest: Δz = −g h² T(T+1)/2, ∂Δz/∂v_z = T h; the half-step
    loss is the same flight at h/2 over 2T steps (Δz = −g (h/2)² 2T(2T+1)/2)."""
    import jax

    from diffsim.engines import mjx

    T, h, g = 10, 0.01, 9.81
    r = mjx.load(scenes.path("free_flight")).reach_loss(T)
    assert (r.body, r.wrt, r.x0.shape) == ("ball", "qvel0", (6,))
    value, grad = jax.value_and_grad(r.loss)(r.x0)
    dz = -g * h * h * T * (T + 1) / 2
    assert float(value) == pytest.approx(dz**2, rel=1e-9)
    assert [float(v) for v in grad] == pytest.approx([0, 0, 2 * dz * T * h, 0, 0, 0], abs=1e-9)
    dz_half = -g * (h / 2) ** 2 * (2 * T) * (2 * T + 1) / 2
    assert float(r.half_step_loss(r.x0)) == pytest.approx(dz_half**2, rel=1e-9)
