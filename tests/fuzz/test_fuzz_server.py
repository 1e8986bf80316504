"""Fuzz the page's server (issue 12, item 4): arbitrary bodies and headers against the real
app through Flask's test client. Every answer is a 2xx or a 4xx, never a 5xx, and the app
answers the page and a real request afterwards.

Profiles: ``tests/fuzz/conftest.py`` (``DIFFSIM_FUZZ=long`` for many more cases).
"""

from __future__ import annotations

import json
import math
from typing import Any

import pytest

pytest.importorskip("dash")

from _tally import Tally
from hypothesis import given
from hypothesis import strategies as st

from diffsim.app import DemoModel, create_app
from diffsim.app._guard import MAX_DEPTH, UPDATE_PATH

_APP = create_app(DemoModel())
_CLIENT = _APP.server.test_client()
# each server-side callback as the page calls it: (output key, inputs, state, outputs, multi)
_CALLBACKS = [
    (
        key,
        [(s["id"], s["property"]) for s in spec["inputs"]],
        [(s["id"], s["property"]) for s in spec["state"]],
        [
            (o.component_id, o.component_property)
            for o in (spec["output"] if isinstance(spec["output"], list) else [spec["output"]])
        ],
        isinstance(spec["output"], list),
    )
    for key, spec in _APP.callback_map.items()
    if "callback" in spec
]
_LIGHT = [c for c in _CALLBACKS if "v0-readout.children" in c[0] or "params-store" in c[0]]
"""The callbacks whose values are fuzzed through to the model (one compiled simulation
each); the heavy ones (estimators, doctor, Optimize) get fuzzed shapes, not values."""

json_scalars = st.one_of(
    st.none(),
    st.booleans(),
    st.integers(min_value=-(2**70), max_value=2**70),
    st.floats(allow_nan=True, allow_infinity=True),
    st.text(max_size=20),
)
json_values = st.recursive(
    json_scalars,
    lambda inner: st.one_of(
        st.lists(inner, max_size=5), st.dictionaries(st.text(max_size=10), inner, max_size=5)
    ),
    max_leaves=25,
)
_HOSTS = ["localhost", "127.0.0.1:8050", "[::1]:8050", "evil.example", "", "[::1", "a:b:c"]
_MALFORMED_HOSTS = [  # issue 26, D17: a loopback name with a malformed rest
    "127.0.0.1:abc", "127.0.0.1:99999999", "127.0.0.1:65536", "127.0.0.1:18457, evil.com",
    "localhost:1:2", "[::1]:x", "[::1]evil", "127.0.0.1 evil", "localhost:-1", "localhost:+80",
]  # fmt: skip
header_values = st.text(st.characters(min_codepoint=32, max_codepoint=126), max_size=40)
headers = st.dictionaries(
    st.sampled_from(
        ["Host", "Content-Type", "Accept", "Cookie", "Origin", "Referer", "X-CSRFToken"]
        + ["X-Forwarded-For", "X-Forwarded-Host", "Accept-Encoding", "X-Dash-Thing"]
    ),
    st.one_of(st.sampled_from(_HOSTS + ["application/json", "text/plain"]), header_values),
    max_size=4,
)


def _request_for(callback, values: list[Any]) -> dict:
    key, inputs, state, outputs, multi = callback
    items = iter(values)
    out = [{"id": i, "property": p} for i, p in outputs]
    return {
        "output": key,
        "outputs": out if multi else out[0],
        "inputs": [{"id": i, "property": p, "value": next(items, None)} for i, p in inputs],
        "changedPropIds": [f"{inputs[0][0]}.{inputs[0][1]}"],
        "state": [{"id": i, "property": p, "value": next(items, None)} for i, p in state],
    }


@st.composite
def near_valid(draw) -> dict:
    """A request the page could send, with fuzzed values, keys dropped or retyped."""
    light = draw(st.booleans())
    callback = draw(st.sampled_from(_LIGHT if light else _CALLBACKS))
    values = draw(st.lists(json_values, max_size=6)) if light else []
    body: dict[str, Any] = _request_for(callback, values)
    for key in draw(st.lists(st.sampled_from(sorted(body)), max_size=2, unique=True)):
        if draw(st.booleans()):
            del body[key]
        else:
            body[key] = draw(json_values)
    return body


def _deep(depth: int, kind: str) -> str:
    return ("[" * depth + "]" * depth) if kind == "list" else ('{"a":' * depth + "1" + "}" * depth)


bodies = st.one_of(
    json_values.map(lambda v: json.dumps(v)),  # arbitrary JSON, mostly not an object
    near_valid().map(lambda v: json.dumps(v)),
    st.builds(_deep, st.integers(MAX_DEPTH - 2, 20_000), st.sampled_from(["list", "dict"])),
    st.binary(max_size=200),
    st.text(max_size=200),
)


def _still_serving() -> None:
    assert _CLIENT.get("/").status_code == 200
    r = _CLIENT.post(UPDATE_PATH, json=_request_for(_LIGHT[0], [9.2, 8.0, None]))
    assert r.status_code == 200, r.get_data(as_text=True)[:300]
    readout = r.get_json()["response"]["v0-readout"]["children"]
    assert readout == "v₀ = 9.20 m/s"


TALLY = Tally("server fuzz")


@pytest.fixture(scope="module", autouse=True)
def _report(request):
    yield
    TALLY.report(request)


def _tally(ok: bool, rejected: bool) -> None:
    TALLY.add("defects" if not ok else "clean rejections" if rejected else "results")


def test_the_light_callback_is_the_v0_one():
    assert _LIGHT[0][0].startswith("..v0-slider.value") and len(_LIGHT) == 2


@given(body=bodies, hdrs=headers)
def test_any_body_and_headers_get_a_2xx_or_4xx(body, hdrs):
    from conftest import request_with_host

    hdrs = {"Content-Type": "application/json", **hdrs}
    data = body if isinstance(body, bytes) else body.encode("utf-8", "surrogatepass")
    # the Host header goes in raw: older Werkzeug's test client refuses "[::1" itself
    code, answer, response_headers = request_with_host(
        _CLIENT.application, hdrs.pop("Host", None), UPDATE_PATH, method="POST", data=data,
        headers=hdrs,
    )  # fmt: skip
    is_json = response_headers.get("Content-Type", "").startswith("application/json")
    ok = 200 <= code < 500 and (code < 400 or bool(is_json and json.loads(answer)["error"]))
    _tally(ok, rejected=code >= 400)
    assert ok, (code, answer[:300])
    _still_serving()


@given(body=near_valid())
def test_requests_the_page_could_send_get_a_2xx_or_4xx(body):
    r = _CLIENT.post(UPDATE_PATH, data=json.dumps(body), content_type="application/json")
    ok = 200 <= r.status_code < 500
    if r.status_code == 200:  # a well-formed request: answered, with finite numbers
        payload = r.get_json()["response"]
        store = payload.get("v0-store", {}).get("data")
        if isinstance(store, dict) and "v0" in store:
            ok = math.isfinite(float(store["v0"]))
    _tally(ok, rejected=r.status_code >= 400)
    assert ok, (r.status_code, r.get_data(as_text=True)[:300])
    _still_serving()


@given(path=st.text(st.characters(min_codepoint=33, max_codepoint=126), max_size=40))
def test_any_get_path_gets_a_2xx_or_4xx(path):
    r = _CLIENT.get("/" + path.lstrip("/"))
    _tally(r.status_code < 500, rejected=r.status_code >= 400)
    assert r.status_code < 500, r.status_code


# --- issue 26 ----------------------------------------------------------------------------


@given(
    host=st.one_of(
        st.sampled_from(_MALFORMED_HOSTS),
        st.builds(
            lambda name, sep, rest: f"{name}{sep}{rest}",
            st.sampled_from(["127.0.0.1", "localhost", "[::1]"]),
            st.sampled_from([":", ", ", " ", ":8050,", "::"]),
            header_values,
        ),
    )
)
def test_malformed_host_headers_get_400(host):
    # a header whose port is not 0..65535 digits, or that has anything after the port, is
    # not this machine's name, whatever its first part says (D17: these got 200)
    from conftest import get_with_host
    from diffsim.app._guard import _host_name

    name = _host_name(host)
    code, body = get_with_host(_CLIENT.application, host)
    if name:  # well formed after all (e.g. a drawn "127.0.0.1:" + "80"): answered
        ok = code == 200 and name in ("127.0.0.1", "localhost", "::1")
        _tally(ok, rejected=False)
    else:
        ok = code == 400 and json.loads(body)["status"] == 400
        _tally(ok, rejected=True)
    assert ok, (host, name, code)


@given(
    path=st.one_of(
        st.builds(
            lambda lib, rest: f"/_dash-component-suites/{lib}/{rest}",
            st.sampled_from(["dash", "nope", "..", ".", "dash/dcc", "%2e%2e", ""]),
            st.text(st.characters(min_codepoint=33, max_codepoint=126), max_size=40),
        ),
        st.sampled_from(
            ["/_dash-component-suites/../../etc/passwd", "/_dash-component-suites/dash/x.js"]
        ),
    )
)
def test_asset_paths_dash_does_not_serve_get_a_4xx(path):
    # D16: Dash's DependencyException for these was a 500
    r = _CLIENT.get(path, headers={"Host": "127.0.0.1"})
    ok = r.status_code < 500 and (r.status_code < 400 or r.is_json)
    _tally(ok, rejected=r.status_code >= 400)
    assert ok, (path, r.status_code, r.get_data(as_text=True)[:200])
