"""The page's server (issue 12, item 4): malformed requests get a 4xx and the server goes
on; bodies over the limit are refused from their headers; the Host header is checked;
binding beyond localhost warns and prints the real URL; a taken port or an unresolvable
host exits 2 with one line; Ctrl+C during compilation exits 0.

The first part drives the real app through Flask's test client; the ``slow`` part starts
``python -m diffsim demo`` in a subprocess and talks to it over TCP.
"""

from __future__ import annotations

import http.client
import json
import os
import random
import selectors
import signal
import socket
import subprocess
import sys
import time
from collections import Counter

import pytest

pytest.importorskip("dash")

import flask

from diffsim.app import DemoModel, create_app
from diffsim.app._guard import MAX_BODY_BYTES, MAX_DEPTH, UPDATE_PATH, HostCheck, install

V0_KEY = (
    "..v0-slider.value...v0-input.value...v0-readout.children...landing-readout.children"
    "...loss-readout.children...clears-readout.children...flight-figure.figure"
    "...v0-store.data...v0-message.children.."
)
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
KEYS = ("output", "outputs", "inputs", "changedPropIds", "state")


def v0_body(v0: object = 8.0) -> dict:
    """A request as the page sends it when the slider moves to ``v0``."""
    return {
        "output": V0_KEY,
        "outputs": [{"id": i, "property": p} for i, p in _V0_OUTPUTS],
        "inputs": [
            {"id": "v0-slider", "property": "value", "value": v0},
            {"id": "v0-input", "property": "value", "value": 8.0},
        ],
        "changedPropIds": ["v0-slider.value"],
        "state": [{"id": "v0-store", "property": "data", "value": None}],
    }


def _without(key: str) -> dict:
    body = v0_body()
    del body[key]
    return body


def _with(key: str, value) -> dict:
    body = v0_body()
    body[key] = value
    return body


def _item(key: str, i: int, field: str | None, value) -> dict:
    body = v0_body()
    if field is None:
        body[key][i] = value
    else:
        body[key][i][field] = value
    return body


def _nested(depth: int) -> dict:
    value: object = 1.0
    for _ in range(depth):
        value = [value]
    return _item("inputs", 0, "value", value)


# every class of malformed request the issue names, and more; (body, expected status)
MALFORMED: dict[str, tuple[str | bytes, int]] = {
    "non-object: list": ("[1, 2]", 400),
    "non-object: number": ("8.0", 400),
    "non-object: string": ('"v0"', 400),
    "non-object: null": ("null", 400),
    "non-object: true": ("true", 400),
    "deep: 100 000 brackets": ("[" * 100_000 + "]" * 100_000, 400),
    "deep: object chain": ('{"a":' * 5000 + "1" + "}" * 5000, 400),
    "deep: 40 levels in a value": (json.dumps(_nested(MAX_DEPTH + 8)), 400),
    **{f"missing: {k}": (json.dumps(_without(k)), 400) for k in KEYS if k != "changedPropIds"},
    "missing: all": ("{}", 400),
    "wrong type: output number": (json.dumps(_with("output", 1)), 400),
    "wrong type: output list": (json.dumps(_with("output", ["v0-readout.children"])), 400),
    "wrong type: inputs object": (json.dumps(_with("inputs", {"a": 1})), 400),
    "wrong type: inputs string": (json.dumps(_with("inputs", "v0-slider")), 400),
    "wrong type: outputs null": (json.dumps(_with("outputs", None)), 400),
    "wrong type: state number": (json.dumps(_with("state", 3)), 400),
    "wrong type: changedPropIds string": (json.dumps(_with("changedPropIds", "v0")), 400),
    "wrong type: changedPropIds numbers": (json.dumps(_with("changedPropIds", [1])), 400),
    "wrong type: input item number": (json.dumps(_item("inputs", 0, None, 5)), 400),
    "wrong type: input id number": (json.dumps(_item("inputs", 1, "id", 5)), 400),
    "wrong type: output item list": (json.dumps(_item("outputs", 2, None, [])), 400),
    "wrong type: state property null": (json.dumps(_item("state", 0, "property", None)), 400),
    "wrong id: input": (json.dumps(_item("inputs", 0, "id", "sigma-input")), 400),
    "wrong id: changed prop": (json.dumps(_with("changedPropIds", ["nodot"])), 400),
    "arity: one input short": (json.dumps(_with("inputs", v0_body()["inputs"][:1])), 400),
    "arity: an output extra": (
        json.dumps(_with("outputs", [*v0_body()["outputs"], {"id": "x", "property": "y"}])),
        400,
    ),
    "unknown output": (json.dumps(_with("output", "nope.children")), 400),
    "clientside output": (json.dumps(_with("output", "v0-rest-store.data")), 400),
    "not JSON": ("{not json", 400),
    "empty body": ("", 400),
    "truncated": (json.dumps(v0_body())[:-3], 400),
    "not UTF-8": (b'{"output": "\xff\xfe"}', 400),
}


@pytest.fixture(scope="module")
def app():
    return create_app(DemoModel())


@pytest.fixture(scope="module")
def client(app):
    return app.server.test_client()


def _post(client, body, **kwargs):
    kwargs.setdefault("content_type", "application/json")
    data = body if isinstance(body, bytes) else body.encode()
    return client.post(UPDATE_PATH, data=data, **kwargs)


def _readout(response) -> str:
    return response.get_json()["response"]["v0-readout"]["children"]


def test_a_valid_request_is_answered(client):
    r = _post(client, json.dumps(v0_body(9.2)))
    assert r.status_code == 200
    assert _readout(r) == "v₀ = 9.20 m/s"


@pytest.mark.parametrize("case", list(MALFORMED))
def test_malformed_requests_get_a_4xx_that_says_why(client, case):
    body, status = MALFORMED[case]
    r = _post(client, body)
    assert r.status_code == status, r.get_data(as_text=True)[:300]
    assert r.get_json()["error"]  # a message, as JSON


def test_other_malformed_requests(client):
    body = json.dumps(v0_body())
    assert _post(client, body, content_type="text/plain").status_code == 415
    assert client.get("/no-such-page/_dash-nothing").status_code in (200, 404)


def test_300_malformed_requests_all_get_400_and_the_page_still_works(client):
    rnd = random.Random(12)
    junk = [1, -1.5, "x", True, None, {}, [], [1], {"a": 1}, [None], "..a.b...c.d..", 1e308]
    statuses: Counter[int] = Counter()
    for k in range(300):
        body = v0_body(rnd.uniform(4, 14))
        kind = k % 6
        if kind == 0:
            text = json.dumps(rnd.choice(junk))
        elif kind == 1:
            for key in rnd.sample(KEYS[:3], rnd.randint(1, 3)):
                del body[key]
            text = json.dumps(body)
        elif kind == 2:
            body[rnd.choice(KEYS)] = rnd.choice(junk[:6] + junk[7:])  # [] may be valid
            text = json.dumps(body)
        elif kind == 3:
            key = rnd.choice(["inputs", "outputs", "state"])
            i = rnd.randrange(len(body[key]))
            body[key][i][rnd.choice(["id", "property"])] = rnd.choice(junk)
            text = json.dumps(body)
        elif kind == 4:
            depth = rnd.choice([MAX_DEPTH + 1, 200, 1000, 50_000])
            text = "[" * depth + "]" * depth
        else:
            text = json.dumps(body)[: rnd.randrange(1, 40)]
        statuses[_post(client, text).status_code] += 1
    assert statuses == {400: 300}
    assert client.get("/").status_code == 200
    assert _readout(_post(client, json.dumps(v0_body(11.0)))) == "v₀ = 11.00 m/s"


def test_bad_values_in_a_well_formed_request_get_a_message_not_an_error(client):
    for bad in (float("nan"), "abc", -5, None, [1], {"x": 1}, 1e308):
        r = _post(client, json.dumps(v0_body(bad)))
        assert r.status_code == 200
        assert "v₀ must be a number" in r.get_json()["response"]["v0-message"]["children"]


def test_a_body_over_the_limit_is_refused(client):
    r = _post(client, b"[" + b" " * MAX_BODY_BYTES + b"]")
    assert r.status_code == 413
    assert client.get("/").status_code == 200


def test_an_error_escaping_a_handler_is_a_json_500_and_the_server_goes_on():
    server = flask.Flask("broken")

    @server.route("/broken")
    def broken():  # a bug of the server's own: the only case for a 500
        raise RuntimeError("a bug")

    @server.route("/")
    def index():
        return "ok"

    install(server, {}, HostCheck.for_bind("127.0.0.1"))
    client = server.test_client()
    r = client.get("/broken")
    assert r.status_code == 500 and "internal error" in r.get_json()["error"]
    assert client.get("/").status_code == 200
    assert client.post(UPDATE_PATH, json={"output": "x"}).status_code == 400


# -- the Host header ----------------------------------------------------------------------


@pytest.mark.parametrize(
    "host", ["localhost", "localhost:8050", "127.0.0.1:8050", "[::1]:8050", "LOCALHOST."]
)
def test_local_hosts_are_answered(client, host):
    assert client.get("/", headers={"Host": host}).status_code == 200
    assert _post(client, json.dumps(v0_body()), headers={"Host": host}).status_code == 200


@pytest.mark.parametrize(
    "host", ["evil.example", "evil.example:8050", "127.0.0.1.nip.io", "10.0.0.7", ""]
)
def test_other_hosts_are_refused(client, host):
    # DNS rebinding: a page at evil.example whose name now points at 127.0.0.1
    assert client.get("/", headers={"Host": host}).status_code == 400
    assert _post(client, json.dumps(v0_body()), headers={"Host": host}).status_code == 400
    assert client.get("/").status_code == 200


def test_host_check_for_the_bound_host():
    # a malformed IPv6 host (older werkzeug test clients cannot even build that request)
    assert not HostCheck.for_bind("127.0.0.1").allows("[::1")
    check = HostCheck.for_bind("192.168.7.9")
    assert check.allows("192.168.7.9:8050") and check.allows("localhost:8050")
    assert not check.allows("10.0.0.7:8050") and not check.allows("evil.example")
    every = HostCheck.for_bind("0.0.0.0")  # beyond localhost on purpose
    assert every.allows(f"{socket.gethostname()}:8050")
    assert every.allows("10.0.0.7:8050") and every.allows("[fd00::2]:8050")
    assert not every.allows("evil.example:8050")  # names could be rebound; addresses not


def test_an_app_bound_beyond_localhost_answers_its_host():
    client = create_app(DemoModel(), host="0.0.0.0").server.test_client()
    assert client.get("/", headers={"Host": f"{socket.gethostname()}:8050"}).status_code == 200
    assert client.get("/", headers={"Host": "10.0.0.7:8050"}).status_code == 200
    assert client.get("/", headers={"Host": "evil.example:8050"}).status_code == 400


# -- the real command ---------------------------------------------------------------------


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def _default_sigint() -> None:
    # a shell starts background jobs with SIGINT ignored, and children inherit that (as a
    # `nohup diffsim demo &` should): the tests press Ctrl+C, so the demo gets the default
    signal.signal(signal.SIGINT, signal.SIG_DFL)


def _demo(*args: str, env: dict | None = None, **kwargs) -> subprocess.Popen:
    return subprocess.Popen(
        [sys.executable, "-m", "diffsim", "demo", "--no-browser", *args],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        env={**os.environ, **(env or {})},
        preexec_fn=_default_sigint,
        **kwargs,
    )


def _read_until(proc: subprocess.Popen, stream: str, text: str, timeout: float) -> str:
    """What ``proc`` writes to ``stream`` until it holds ``text`` (or the timeout)."""
    fd = getattr(proc, stream).fileno()
    sel = selectors.DefaultSelector()
    sel.register(fd, selectors.EVENT_READ)
    out = b""
    deadline = time.monotonic() + timeout
    while text.encode() not in out and time.monotonic() < deadline:
        if sel.select(timeout=0.5):
            chunk = os.read(fd, 65536)  # unbuffered: select sees everything not yet read
            if not chunk:
                break
            out += chunk
    sel.close()
    return out.decode()


def _request(port, method, path, body=None, host=None, **headers):
    conn = http.client.HTTPConnection("127.0.0.1", port, timeout=60)
    conn.putrequest(method, path, skip_host=True)
    conn.putheader("Host", host or f"127.0.0.1:{port}")
    data = body.encode() if isinstance(body, str) else body
    headers = {k.replace("_", "-"): v for k, v in headers.items()}
    if data is not None:
        headers.setdefault("Content-Type", "application/json")
        headers.setdefault("Content-Length", str(len(data)))
    for k, v in headers.items():
        conn.putheader(k, v)
    conn.endheaders(data)
    r = conn.getresponse()
    payload = r.read()
    conn.close()
    return r.status, payload


def _wait_for_page(proc, port, timeout=180.0):
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        assert proc.poll() is None, proc.stderr.read().decode() if proc.stderr else ""
        try:
            if _request(port, "GET", "/")[0] == 200:
                return
        except OSError:
            time.sleep(0.2)
    raise AssertionError("the demo did not answer")


def _stop(proc: subprocess.Popen) -> tuple[int, str]:
    proc.send_signal(signal.SIGINT)
    try:
        _, err = proc.communicate(timeout=120)
    except subprocess.TimeoutExpired:
        # still running: ask it where it is (faulthandler on SIGUSR1), then kill it; the
        # stacks end up in the failure's message
        proc.send_signal(signal.SIGUSR1)
        time.sleep(2)
        proc.kill()
        _, err = proc.communicate()
    return proc.returncode, err.decode()


@pytest.fixture(scope="module")
def live():
    port = _free_port()
    proc = _demo("--port", str(port))
    try:
        _wait_for_page(proc, port)
        yield proc, port
    finally:
        _stop(proc)


@pytest.mark.slow
def test_live_server_answers_malformed_requests_with_4xx_and_keeps_serving(live):
    proc, port = live
    statuses = Counter(_request(port, "POST", UPDATE_PATH, b)[0] for b, _ in MALFORMED.values())
    assert set(statuses) == {400}, statuses
    assert _request(port, "POST", UPDATE_PATH, "[1]", Content_Type="text/plain")[0] == 415
    status, payload = _request(port, "POST", UPDATE_PATH, json.dumps(v0_body(9.25)))
    assert status == 200
    assert json.loads(payload)["response"]["v0-readout"]["children"] == "v₀ = 9.25 m/s"
    assert _request(port, "GET", "/")[0] == 200 and proc.poll() is None


@pytest.mark.slow
def test_live_server_refuses_a_200_mb_body_from_its_headers(live):
    proc, port = live
    sent = 0
    with socket.create_connection(("127.0.0.1", port), timeout=30) as s:
        s.sendall(
            (
                f"POST {UPDATE_PATH} HTTP/1.1\r\nHost: 127.0.0.1:{port}\r\n"
                "Content-Type: application/json\r\nContent-Length: 200000000\r\n\r\n"
            ).encode()
        )
        chunk = b" " * 65536
        start = time.monotonic()
        s.settimeout(0.05)
        reply = b""
        # keep sending until the answer comes: it must come long before 200 MB are sent
        while b"\r\n\r\n" not in reply and time.monotonic() - start < 30:
            try:
                s.sendall(chunk)
                sent += len(chunk)
            except OSError:  # the server closed its side: the answer is there to read
                s.settimeout(5)
            try:
                reply += s.recv(65536)
            except TimeoutError:
                pass
    assert reply.startswith(b"HTTP/1.1 413"), reply[:200]
    assert sent < 20_000_000
    assert _request(port, "GET", "/")[0] == 200 and proc.poll() is None


@pytest.mark.slow
def test_live_server_refuses_a_chunked_body_over_the_limit(live):
    proc, port = live
    conn = http.client.HTTPConnection("127.0.0.1", port, timeout=60)
    body = (b" " * 65536 for _ in range(2 * MAX_BODY_BYTES // 65536))
    conn.request(
        "POST",
        UPDATE_PATH,
        body=body,
        headers={"Content-Type": "application/json"},
        encode_chunked=True,
    )
    assert conn.getresponse().status == 413
    conn.close()
    assert _request(port, "GET", "/")[0] == 200 and proc.poll() is None


@pytest.mark.slow
def test_live_server_checks_the_host_header(live):
    _, port = live
    assert _request(port, "GET", "/", host="evil.example:8050")[0] == 400
    assert _request(port, "POST", UPDATE_PATH, json.dumps(v0_body()), host="evil.example")[0] == 400
    assert _request(port, "GET", "/", host=f"localhost:{port}")[0] == 200


@pytest.mark.slow
def test_a_taken_port_exits_2_with_one_line():
    with socket.socket() as taken:
        taken.bind(("127.0.0.1", 0))
        taken.listen()
        port = taken.getsockname()[1]
        r = subprocess.run(
            [sys.executable, "-m", "diffsim", "demo", "--no-browser", "--port", str(port)],
            capture_output=True,
            text=True,
            timeout=120,
        )
    assert r.returncode == 2, r.stderr
    assert len(r.stderr.splitlines()) == 1, r.stderr
    assert r.stderr.startswith("error: --port:") and f"port {port} is already in use" in r.stderr
    assert r.stdout == ""


@pytest.mark.slow
def test_an_unresolvable_host_exits_2_with_one_line():
    r = subprocess.run(
        [sys.executable, "-m", "diffsim", "demo", "--no-browser", "--host", "no-such.invalid"],
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert r.returncode == 2, r.stderr
    assert len(r.stderr.splitlines()) == 1, r.stderr
    assert r.stderr.startswith("error: --host:") and "'no-such.invalid'" in r.stderr


@pytest.mark.slow
def test_binding_every_interface_prints_the_real_url_and_a_warning():
    port = _free_port()
    proc = _demo("--host", "0.0.0.0", "--port", str(port))
    try:
        line = _read_until(proc, "stdout", "serving on", 120)
        warning = _read_until(proc, "stderr", "127.0.0.1 (the default)", 30)
        _wait_for_page(proc, port)
        hostname = socket.gethostname()
        assert _request(port, "GET", "/", host=f"{hostname}:{port}")[0] == 200
        assert _request(port, "GET", "/", host="evil.example")[0] == 400
    finally:
        code, stopped = _stop(proc)
    assert f"serving on http://0.0.0.0:{port}/" in line
    assert f"http://127.0.0.1:{port}/" in line and f"http://{hostname}:{port}/" in line
    assert "WARNING: --host 0.0.0.0 serves the page beyond this machine" in warning
    assert code == 0, stopped[-6000:]


@pytest.mark.slow
def test_ctrl_c_while_compiling_exits_cleanly(tmp_path):
    # an empty compilation cache: the warm-up thread is inside XLA when Ctrl+C comes right
    # after the URL (before the fix: SIGABRT, "terminate called after throwing an instance
    # of ...", in about half the tries; so three tries)
    for attempt in range(3):
        port = _free_port()
        proc = _demo("--port", str(port), env={"DIFFSIM_JAX_CACHE": str(tmp_path / str(attempt))})
        assert "serving on" in _read_until(proc, "stdout", "serving on", 120)
        code, err = _stop(proc)
        assert code == 0, err
        assert "terminate called" not in err


# -- issue 26 -----------------------------------------------------------------------------


@pytest.mark.parametrize(
    "path",
    [
        "/_dash-component-suites/dash/x.js",
        "/_dash-component-suites/../../etc/passwd",
        "/_dash-component-suites/nope/x.js",
        "/_dash-component-suites/dash/dcc/../../../x.js",
    ],
)
def test_an_asset_dash_does_not_serve_is_a_404(client, path):
    # D16: was 500 "internal error of the demo server" (Dash's DependencyException)
    r = client.get(path)
    assert r.status_code == 404
    assert r.get_json() == {"error": f"no such file: {path}", "status": 404}
    assert client.get("/_dash-component-suites/dash/dcc/dash_core_components.js").status_code == 200


@pytest.mark.parametrize(
    "host",
    [
        "127.0.0.1:abc",
        "127.0.0.1:99999999",
        "127.0.0.1:65536",
        "127.0.0.1:18457, evil.com",
        "127.0.0.1 evil.com",
        "localhost:8050:8050",
        "[::1]x",
        "[::1]:abc",
        "[127.0.0.1]:8050",
        "127.0.0.1:٣",
        "local host",
    ],
)
def test_malformed_host_headers_are_refused(client, host):
    # D17: the name part was loopback, so these were answered (200)
    assert not HostCheck.for_bind("127.0.0.1").allows(host)
    from conftest import get_with_host

    assert get_with_host(client.application, host)[0] == 400
    assert client.get("/").status_code == 200


@pytest.mark.parametrize("host", ["127.0.0.1:", "127.0.0.1:0", "127.0.0.1:65535", "[::1]", "::1"])
def test_well_formed_local_host_headers_are_still_answered(host):
    assert HostCheck.for_bind("127.0.0.1").allows(host)
