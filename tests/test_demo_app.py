"""The demo page's callbacks and validation, without a browser; and the live server under
200 rapid, partly malformed updates."""

from __future__ import annotations

import json
import math
import threading
import urllib.error
import urllib.request
from concurrent.futures import ThreadPoolExecutor

import pytest

pytest.importorskip("dash")

from dash import no_update
from werkzeug.serving import make_server

from diffsim.app import Callbacks, DemoModel, InputError, create_app, readouts
from diffsim.app._model import parse_estimator, parse_sigma, parse_tau, parse_v0
from diffsim.systems import projectile_wall as pw


def library_readouts(v0: float) -> tuple[str, str, str, str]:
    """The readouts computed here from the library, formatted as the page does."""
    return (
        f"v₀ = {v0:.2f} m/s",
        f"{float(pw.landing_x(v0)):.2f} m",
        f"{float(pw.loss(v0)):.2f}",
        "yes" if bool(pw.clears_wall(v0)) else "no",
    )


@pytest.fixture(scope="module")
def model():
    m = DemoModel()
    m.warm_up(background=True)  # exercised as in `diffsim demo`; requests wait for it
    return m


@pytest.fixture(scope="module")
def callbacks(model):
    return Callbacks(model)


# -- validation -------------------------------------------------------------------------


@pytest.mark.parametrize("value", [4, 4.0, 8.0, "9.5", 14, 14.0])
def test_parse_v0_accepts_the_slider_range(value):
    assert parse_v0(value) == float(value)


@pytest.mark.parametrize(
    "value",
    [None, "abc", "", float("nan"), float("inf"), -float("inf"), 3.99, 14.01, -1, True, [8.0]],
)
def test_parse_v0_rejects_with_a_message(value):
    with pytest.raises(InputError, match=r"v₀ must be a number in \[4, 14\] m/s"):
        parse_v0(value)


@pytest.mark.parametrize("value", [0, -0.5, float("nan"), "x", None, 100.0])
def test_parse_sigma_and_tau_reject_bad_values(value):
    with pytest.raises(InputError, match="σ must be"):
        parse_sigma(value)
    with pytest.raises(InputError, match="τ must be"):
        parse_tau(value)


def test_parse_estimator():
    assert parse_estimator("alpha") == "alpha"
    with pytest.raises(InputError, match="estimator must be one of"):
        parse_estimator("adam")


# -- callbacks ---------------------------------------------------------------------------


def test_readouts_at_load_are_the_articles(callbacks):
    out = callbacks.on_v0(8.0, 8.0, None)
    assert out[2:6] == ("v₀ = 8.00 m/s", "6.00 m", "16.00", "no")
    assert out[7] == {"v0": 8.0}
    assert out[8] == ""


@pytest.mark.parametrize("v0", [9.2, 9.905, 11.0])
@pytest.mark.parametrize("source", ["v0-slider", "v0-input"])
def test_readouts_are_the_librarys(callbacks, v0, source):
    out = (
        callbacks.on_v0(v0, None, source)
        if source == "v0-slider"
        else callbacks.on_v0(8.0, v0, source)
    )
    assert out[2:6] == library_readouts(v0)
    # the other control follows (the slider snaps to its 0.01 grid)
    if source == "v0-slider":
        assert out[0] is no_update and out[1] == v0
    else:
        assert out[1] is no_update and out[0] == round(v0, 2)


def test_readouts_match_model_point_formatting(model):
    assert readouts(model.point(11.0)) == library_readouts(11.0)


def test_flight_path_stops_at_the_wall(callbacks):
    fig = callbacks.on_v0(8.5, None, "v0-slider")[6]
    x = fig["data"][0]["x"]
    assert max(x) == pytest.approx(pw.WALL_X)
    fig = callbacks.on_v0(11.0, None, "v0-slider")[6]
    assert max(fig["data"][0]["x"]) == pytest.approx(float(pw.landing_x(11.0)))


@pytest.mark.parametrize("bad", [3.0, 20, float("nan"), "text", None, {"v": 1}])
def test_bad_v0_gives_a_message_and_keeps_the_readouts(callbacks, bad):
    out = callbacks.on_v0(8.0, bad, "v0-input")
    assert all(o is no_update for o in out[:8])
    assert "v₀ must be a number in [4, 14] m/s" in out[8]


@pytest.mark.parametrize("sigma,tau", [(0, 0.3), (-1, 0.3), (1.0, 0), (float("nan"), 0.3)])
def test_bad_sigma_or_tau_gives_a_message(callbacks, sigma, tau):
    store, message = callbacks.on_params(sigma, tau)
    assert store is no_update
    assert "must be a number" in message


def test_draw_shows_curves_point_and_every_estimator(callbacks, model):
    assert model.wait_until_compiled("gradients", timeout=300)
    fig, gfig, _table, _, message, drawn = callbacks.draw(
        {"v0": 8.0}, {"sigma": 1.0, "tau": 0.3}, None, None, 0, None
    )
    assert message == ""
    assert drawn == {"sigma": 1.0, "tau": 0.3, "gradients": True}
    loss = fig["data"][0]
    assert len(loss["x"]) == 1001 and loss["x"][0] == 4.0 and loss["x"][-1] == 14.0
    # the plateau is flat at 16 and the curve is the library's loss
    i = loss["x"].index(8.5)
    assert loss["y"][i] == pytest.approx(float(pw.loss(8.5)))
    assert fig["data"][3]["x"] == [8.0] and fig["data"][3]["y"] == [16.0]
    assert len(gfig["data"]) == 5
    g = model.gradients(8.0, 1.0, 0.3)
    assert g.estimate[0] == 0.0  # exact gradient on the plateau
    # the randomized estimators see the cliff: they point toward it (d loss/d v0 < 0)
    assert g.estimate[1] + 2 * g.std_error[1] < 0
    assert g.smoothed_slope < 0


@pytest.mark.parametrize(
    "v0_data,params,run",
    [
        ({"v0": "nan"}, {"sigma": 1.0, "tau": 0.3}, None),
        (None, {"sigma": 1.0, "tau": 0.3}, None),
        ({"v0": 8.0}, {"sigma": -2}, None),
        ({"v0": 8.0}, "junk", None),
        ({"v0": 8.0}, {"sigma": 1.0, "tau": 0.3}, {"theta": [1, "x"], "loss": [1]}),
    ],
)
def test_draw_survives_malformed_stores(callbacks, v0_data, params, run):
    out = callbacks.draw(v0_data, params, run, None, 0, "v0-store")
    assert len(out) == 6  # no exception; a message or a figure


def test_moving_v0_patches_only_the_point_and_slopes(callbacks, model):
    assert model.wait_until_compiled("gradients", timeout=300)
    params = {"sigma": 1.0, "tau": 0.3}
    drawn = {"sigma": 1.0, "tau": 0.3, "gradients": True}
    patch = callbacks.draw({"v0": 9.2}, params, None, None, 0, "v0-store", drawn)[0]
    assert not isinstance(patch, dict)  # a dash.Patch
    full = callbacks.draw({"v0": 9.2}, {"sigma": 0.5, "tau": 0.3}, None, None, 0, "v0-store", drawn)
    assert isinstance(full[0], dict) and full[5]["sigma"] == 0.5


def test_doctor_panel_is_the_librarys_diagnosis(callbacks, model):
    from diffsim import diagnose

    assert callbacks.on_doctor({"v0": 8.0}, {"sigma": 1.0, "tau": 0.3}, {"doctor": False})[
        0
    ].startswith("compiling")
    model.wait_until_compiled("doctor")
    verdict, flags, rec = callbacks.on_doctor(
        {"v0": 8.0}, {"sigma": 1.0, "tau": 0.3}, {"doctor": True}
    )
    import jax

    ref = diagnose(pw.loss, 8.0, jax.random.PRNGKey(2), sigma=1.0, num_samples=256)
    assert ref.flag_names == ("plateau",)
    assert "untrusted" in str(verdict) and "doctor-flag-plateau" in str(flags)
    assert rec.startswith(ref.recommendation)
    # malformed stores: a message, never an exception
    out = callbacks.on_doctor({"v0": "abc"}, {"sigma": 1.0}, {"doctor": True})
    assert out[:2] == (no_update, no_update) and "v₀ must be a number" in out[2]


def test_optimize_rejects_bad_requests(callbacks):
    out = callbacks.on_optimize(1, "adam", {"v0": 8.0}, {"sigma": 1.0, "tau": 0.3})
    assert "estimator must be one of" in out[2]
    out = callbacks.on_optimize(1, "alpha", {"v0": 99}, {"sigma": 1.0, "tau": 0.3})
    assert "v₀ must be" in out[2]
    assert callbacks.on_optimize(0, "alpha", {"v0": 8.0}, None)[2] == ""


# -- the live server ----------------------------------------------------------------------


@pytest.fixture(scope="module")
def server(model):
    app = create_app(model)
    httpd = make_server("127.0.0.1", 0, app.server, threaded=True)
    thread = threading.Thread(target=httpd.serve_forever, daemon=True)
    thread.start()
    key = next(k for k in app.callback_map if "v0-readout.children" in k)
    yield f"http://127.0.0.1:{httpd.server_port}", key
    httpd.shutdown()


_V0_OUTPUTS = [
    ("v0-slider", "value"),
    ("v0-input", "value"),
    ("v0-readout", "children"),
    ("landing-readout", "children"),
    ("loss-readout", "children"),
    ("clears-readout", "children"),
    ("flight-figure", "figure"),
    ("v0-store", "data"),
    ("v0-message", "children"),
]


def _post(base: str, body: str | bytes) -> tuple[int, dict | None]:
    data = body.encode() if isinstance(body, str) else body
    req = urllib.request.Request(
        f"{base}/_dash-update-component",
        data=data,
        headers={"Content-Type": "application/json"},
        method="POST",
    )
    try:
        with urllib.request.urlopen(req, timeout=60) as r:
            text = r.read().decode()
            return r.status, json.loads(text) if text else None
    except urllib.error.HTTPError as e:
        return e.code, None


def _v0_body(key: str, value, source: str = "v0-slider") -> str:
    slider, box = (value, 8.0) if source == "v0-slider" else (8.0, value)
    return json.dumps(
        {
            "output": key,
            "outputs": [{"id": i, "property": p} for i, p in _V0_OUTPUTS],
            "inputs": [
                {"id": "v0-slider", "property": "value", "value": slider},
                {"id": "v0-input", "property": "value", "value": box},
            ],
            "changedPropIds": [f"{source}.value"],
            "state": [{"id": "v0-store", "property": "data", "value": None}],
        },
        allow_nan=True,
    )


def _readouts_of(response: dict) -> tuple:
    r = response["response"]
    return tuple(
        r[i]["children"]
        for i in ("v0-readout", "landing-readout", "loss-readout", "clears-readout")
    )


def test_server_survives_200_rapid_updates(server):
    base, key = server
    valid = [4.0 + 0.05 * i for i in range(201)]
    bad = [float("nan"), "abc", -5, 14.5, None, 1e308, float("inf"), [], {"x": 1}]
    bodies: list[tuple[str, object]] = []
    for i in range(200):
        if i % 5 == 4:
            value = bad[i % len(bad)]
            bodies.append((_v0_body(key, value, "v0-input"), value))
        else:
            bodies.append((_v0_body(key, valid[i]), valid[i]))
    bodies[17] = ("{not json", "malformed")
    bodies[33] = (json.dumps({"output": "nope.children", "inputs": []}), "unknown output")

    with ThreadPoolExecutor(max_workers=8) as pool:
        results = list(pool.map(lambda b: _post(base, b[0]), bodies))

    for (_body, value), (status, payload) in zip(bodies, results):
        if value in ("malformed", "unknown output"):
            assert status in (400, 500), value  # rejected by Dash; the server goes on
            continue
        assert status == 200, value
        if isinstance(value, float) and 4 <= value <= 14:
            assert _readouts_of(payload) == library_readouts(value)
        else:
            message = payload["response"]["v0-message"]["children"]
            assert "v₀ must be a number in [4, 14] m/s" in message
            assert "v0-readout" not in payload["response"]

    # healthy and correct afterwards
    with urllib.request.urlopen(base + "/", timeout=30) as r:
        assert r.status == 200
    for v0 in (8.0, 9.905):
        status, payload = _post(base, _v0_body(key, v0))
        assert status == 200 and _readouts_of(payload) == library_readouts(v0)
    assert math.isfinite(float(payload["response"]["v0-store"]["data"]["v0"]))
