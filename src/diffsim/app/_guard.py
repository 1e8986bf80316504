"""The page's server, guarded: bind or fail with one line, check the Host header, reject
malformed callback requests with a 4xx before Dash sees them.

The demo serves a page that makes the process compute on request, so its server:

- binds its socket before anything is compiled, and turns a taken port or an unresolvable
  host into a :class:`BindError` naming the option (``--port`` / ``--host``);
- answers only requests whose ``Host`` header names this machine as the user bound it
  (:class:`HostCheck`): a web page elsewhere cannot reach it through a DNS name that it
  re-points at 127.0.0.1 (DNS rebinding);
- reads no request body of :data:`MAX_BODY_BYTES` or more (413), and accepts a POST to
  ``/_dash-update-component`` only if it is JSON nested at most :data:`MAX_DEPTH` deep that
  names one of the app's server-side callbacks with the inputs, state and outputs that
  callback declares (400 otherwise, 415 for another content type);
- answers anything that still escapes as JSON with its status (500 only for a bug of the
  server's own), and keeps serving.
"""

from __future__ import annotations

import dataclasses
import errno
import ipaddress
import json
import logging
import re
import socket
from collections.abc import Mapping
from typing import Any

import flask
from werkzeug.exceptions import HTTPException

log = logging.getLogger(__name__)

UPDATE_PATH = "/_dash-update-component"
"""Dash's route for callback requests (the app keeps Dash's default URL prefix)."""
MAX_BODY_BYTES = 1 << 20
"""Request bodies this large (bytes) or larger are refused (413) without being read past
it; the page's own requests stay below 20 kB (an Optimize run of 301 iterates is the
largest)."""
MAX_DEPTH = 32
"""The deepest nesting of lists and objects a callback request may have; the page's own
requests are at most 5 deep."""
LOCAL_NAMES = frozenset({"localhost", "127.0.0.1", "::1"})
"""Host names every server accepts: this machine, by name and by loopback address."""
WILDCARD_HOSTS = frozenset({"0.0.0.0", "::", ""})
"""``--host`` values that bind every interface."""


class BindError(ValueError):
    """The server cannot listen where asked; ``option`` is the CLI option to change.

    Example:
        >>> from diffsim.app import BindError
        >>> err = BindError("--port", "port 80 needs root: use a port from 1024 to 65535")
        >>> err.option, isinstance(err, ValueError)
        ('--port', True)
    """

    def __init__(self, option: str, message: str) -> None:
        super().__init__(message)
        self.option = option


class RequestError(ValueError):
    """A request the server rejects; ``status`` is the HTTP status of the answer."""

    def __init__(self, message: str, status: int = 400) -> None:
        super().__init__(message)
        self.status = status


# -- binding ------------------------------------------------------------------------------


def _family(host: str) -> socket.AddressFamily:
    # as werkzeug chooses it, so the socket matches the server that adopts it
    return socket.AF_INET6 if ":" in host else socket.AF_INET


def bind_socket(host: str, port: int) -> socket.socket:
    """A listening TCP socket on ``host``:``port``, or :class:`BindError` saying why not.

    Raises:
        BindError: ``option="--host"`` if ``host`` does not resolve or is not an address of
            this machine; ``option="--port"`` if the port is taken or needs privileges.
    """
    family = _family(host)
    try:
        addresses = socket.getaddrinfo(
            host or None, port, family, socket.SOCK_STREAM, flags=socket.AI_PASSIVE
        )
    except (socket.gaierror, UnicodeError) as err:
        reason = err.strerror if isinstance(err, socket.gaierror) else "not a valid name"
        raise BindError(
            "--host",
            f"cannot resolve {host!r} ({reason}); give a name or address of this machine, "
            "e.g. --host 127.0.0.1",
        ) from None
    sockaddr = addresses[0][4]
    sock = socket.socket(family, socket.SOCK_STREAM)
    try:
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        sock.bind(sockaddr)
        sock.listen(128)
    except OSError as err:
        sock.close()
        if err.errno == errno.EADDRINUSE:
            raise BindError(
                "--port",
                f"port {port} is already in use on {host or '*'}; stop the program using it "
                f"or choose another, e.g. --port {port + 1 if port < 65535 else 8050}",
            ) from None
        if err.errno == errno.EACCES:
            raise BindError(
                "--port", f"port {port} needs privileges to listen on; use a port >= 1024"
            ) from None
        if err.errno == errno.EADDRNOTAVAIL:
            raise BindError(
                "--host",
                f"{host!r} is not an address of this machine; use one of its own "
                "addresses, e.g. --host 127.0.0.1",
            ) from None
        raise BindError(
            "--host", f"cannot listen on {host}:{port} ({err.strerror or err})"
        ) from None
    return sock


def is_local(host: str) -> bool:
    """Whether binding ``host`` keeps the server on this machine (loopback addresses only).

    An unresolvable name counts as local: binding it fails anyway.
    """
    if host in WILDCARD_HOSTS:
        return False
    try:
        infos = socket.getaddrinfo(host, None, _family(host), socket.SOCK_STREAM)
    except (socket.gaierror, UnicodeError):
        return True
    return all(ipaddress.ip_address(str(info[4][0]).split("%")[0]).is_loopback for info in infos)


def url_host(host: str) -> str:
    """``host`` as it goes in a URL (IPv6 addresses in brackets)."""
    return f"[{host}]" if ":" in host else host


def interface_urls(host: str, port: int) -> list[str]:
    """Where other machines reach a server bound to every interface: this machine's name
    and its address on the default route (found without sending anything)."""
    names = [socket.gethostname()]
    family = socket.AF_INET6 if host == "::" else socket.AF_INET
    probe = socket.socket(family, socket.SOCK_DGRAM)
    try:
        # connecting a UDP socket only picks the route; 192.0.2.1 / 2001:db8:: are the
        # documentation ranges, never contacted
        probe.connect(("2001:db8::1" if family == socket.AF_INET6 else "192.0.2.1", 9))
        names.append(str(probe.getsockname()[0]))
    except OSError:
        pass
    finally:
        probe.close()
    return [f"http://{url_host(name)}:{port}/" for name in dict.fromkeys(n for n in names if n)]


# -- the Host header ----------------------------------------------------------------------


_REG_NAME = re.compile(r"[a-z0-9_]([a-z0-9_-]*[a-z0-9_])?(\.[a-z0-9_]([a-z0-9_-]*[a-z0-9_])?)*\.?")
"""A host name (RFC 3986 ``reg-name`` as DNS uses it; IPv4 literals match it too)."""


def _valid_port(port: str) -> bool:
    """``port`` of a ``Host`` header: empty (no port) or 1-5 digits in 0..65535."""
    return port == "" or (
        port.isascii() and port.isdigit() and len(port) <= 5 and int(port) <= 65535
    )


def _host_name(header: str) -> str:
    """The name in a ``Host`` header value, without the port, lower case; ``""`` (refused)
    for anything that is not ``name[:port]`` or ``[v6]:[port]`` with a port in 0..65535:
    ``127.0.0.1:abc``, ``127.0.0.1:99999999`` and ``127.0.0.1:1, evil.com`` are malformed,
    not loopback."""
    header = header.strip().lower()
    if header.startswith("["):  # [v6]:port
        name, bracket, rest = header[1:].partition("]")
        if not bracket or (rest and not rest.startswith(":")) or not _valid_port(rest[1:]):
            return ""
        return name if _is_ip(name) and ":" in name else ""
    if header.count(":") > 1:  # an unbracketed IPv6 literal (no port possible)
        return header if _is_ip(header) else ""
    name, _, port = header.partition(":")
    if not _valid_port(port) or not _REG_NAME.fullmatch(name):
        return ""
    return name.rstrip(".")


def _is_ip(name: str) -> bool:
    try:
        ipaddress.ip_address(name)
    except ValueError:
        return False
    return True


@dataclasses.dataclass(frozen=True)
class HostCheck:
    """Which ``Host`` headers the server answers.

    ``names``: the accepted host names (lower case, without port). ``any_address``: also
    accept any IP address literal — for a server bound to every interface, reached by
    whatever address the network gives it. A literal address cannot be re-pointed by DNS,
    so accepting every one keeps the protection against DNS rebinding.
    """

    names: frozenset[str]
    any_address: bool = False

    @classmethod
    def for_bind(cls, host: str) -> HostCheck:
        """The check for a server bound to ``host``: this machine by its local names, and
        the host as bound (with what it resolves to); for every interface (``0.0.0.0``,
        ``::``), also the machine's own name and any literal address."""
        names = set(LOCAL_NAMES)
        host = _host_name(host) if host.startswith("[") else host.lower().rstrip(".")
        if host in WILDCARD_HOSTS:
            names |= {socket.gethostname().lower(), socket.getfqdn().lower()}
            return cls(frozenset(names), any_address=True)
        names.add(host)
        try:
            names |= {str(i[4][0]).lower() for i in socket.getaddrinfo(host, None)}
        except (socket.gaierror, UnicodeError):
            pass
        return cls(frozenset(names))

    def allows(self, header: str | None) -> bool:
        """Whether a request with ``Host: header`` is answered."""
        if not header:
            return False
        name = _host_name(header)
        return name in self.names or (self.any_address and _is_ip(name))


# -- callback requests --------------------------------------------------------------------


def _depth_exceeds(obj: Any, limit: int) -> bool:
    """Whether lists and objects in ``obj`` nest deeper than ``limit`` (iterative)."""
    stack: list[tuple[Any, int]] = [(obj, 1)]
    while stack:
        item, depth = stack.pop()
        if isinstance(item, (dict, list)):
            if depth > limit:
                return True
            children = item.values() if isinstance(item, dict) else item
            stack.extend((child, depth + 1) for child in children)
    return False


def _clean(prop: Any) -> Any:
    # Dash names a duplicate output "prop@hash"; the renderer sends "prop"
    return prop.split("@")[0] if isinstance(prop, str) else prop


def _check_item(where: str, item: Any, spec_id: Any, spec_prop: Any) -> None:
    items = item if isinstance(item, list) else [item]  # a list: a pattern-matching ALL
    if isinstance(item, list) and isinstance(spec_id, str):
        raise RequestError(f"{where} must be an object with 'id' and 'property'")
    for one in items:
        if not isinstance(one, dict):
            raise RequestError(f"{where} must be an object with 'id' and 'property'")
        if _clean(one.get("property")) != _clean(spec_prop):
            raise RequestError(f"{where}.property must be {_clean(spec_prop)!r}")
        got = one.get("id")
        if isinstance(spec_id, str) and got != spec_id:
            raise RequestError(f"{where}.id must be {spec_id!r}")
        if not isinstance(spec_id, str) and not isinstance(got, dict):
            raise RequestError(f"{where}.id must be an object (a pattern-matching id)")


def _check_list(body: Mapping, key: str, specs: list[tuple[Any, Any]], *, multi=True) -> None:
    if not multi:  # a single output: one object, not a list
        _check_item(key, body.get(key), *specs[0])
        return
    items = body.get(key, [] if key == "state" else None)
    if not isinstance(items, list):
        raise RequestError(f"{key!r} must be a list")
    if len(items) != len(specs):
        raise RequestError(f"{key!r} must have {len(specs)} entries, got {len(items)}")
    for i, (item, spec) in enumerate(zip(items, specs)):
        _check_item(f"{key}[{i}]", item, *spec)


def check_update(body: Any, callback_map: Mapping[str, Mapping[str, Any]]) -> None:
    """Check a parsed ``/_dash-update-component`` body against the app's callbacks.

    It must be an object whose ``output`` names a server-side callback, with ``inputs``,
    ``state`` (may be left out if the callback has none) and ``outputs`` matching that
    callback's declaration in number, ids and properties, and ``changedPropIds`` (if given)
    a list of the callback's inputs (``"id.property"``). The values are not checked here:
    the callbacks validate them.

    Raises:
        RequestError: (status 400) saying what is wrong.
    """
    if not isinstance(body, dict):
        raise RequestError(f"the request must be a JSON object, got {type(body).__name__}")
    output = body.get("output")
    if not isinstance(output, str):
        raise RequestError("'output' must be a string naming a callback's outputs")
    spec = callback_map.get(output)
    if spec is None or "callback" not in spec:  # clientside callbacks have none
        raise RequestError(f"no server callback has the outputs {output[:200]!r}")
    _check_list(body, "inputs", [(s["id"], s["property"]) for s in spec["inputs"]])
    _check_list(body, "state", [(s["id"], s["property"]) for s in spec["state"]])
    declared = spec["output"]
    multi = isinstance(declared, (list, tuple))
    outputs = declared if multi else [declared]
    _check_list(
        body,
        "outputs",
        [(o.component_id, o.component_property) for o in outputs],
        multi=multi,
    )
    changed = body.get("changedPropIds", [])
    if not isinstance(changed, list) or not all(isinstance(c, str) for c in changed):
        raise RequestError("'changedPropIds' must be a list of strings")
    if all(isinstance(s["id"], str) for s in spec["inputs"]):
        fired = {f"{s['id']}.{s['property']}" for s in spec["inputs"]}
        if not fired.issuperset(changed):
            raise RequestError("'changedPropIds' must name inputs of the callback")


def parse_update(data: bytes, callback_map: Mapping[str, Mapping[str, Any]]) -> Any:
    """Parse and check a ``/_dash-update-component`` body (:func:`check_update`).

    Raises:
        RequestError: (400) not UTF-8 JSON, nested deeper than :data:`MAX_DEPTH`, or not a
            request for one of the app's callbacks.
    """
    try:
        body = json.loads(data)
    except RecursionError:
        raise RequestError(f"the JSON is nested deeper than {MAX_DEPTH} levels") from None
    except ValueError as err:  # JSONDecodeError and UnicodeDecodeError
        raise RequestError(f"the body is not valid JSON ({str(err)[:120]})") from None
    if _depth_exceeds(body, MAX_DEPTH):
        raise RequestError(f"the JSON is nested deeper than {MAX_DEPTH} levels")
    check_update(body, callback_map)
    return body


# -- the Flask hooks ----------------------------------------------------------------------


def _is_missing_asset(err: Exception) -> bool:
    """Dash's answer to a component-suite path it does not serve (an unregistered library,
    ``..``, a file not in the package): ``DependencyException``, which Flask would make a 500;
    it is a 404."""
    try:
        from dash.exceptions import DependencyException, InvalidResourceError
    except ImportError:  # pragma: no cover - Dash is what serves these paths
        return False
    return isinstance(err, DependencyException | InvalidResourceError)


def _error(message: str, status: int) -> flask.Response:
    return flask.Response(
        json.dumps({"error": message, "status": status}),
        status=status,
        mimetype="application/json",
    )


def install(
    server: flask.Flask,
    callback_map: Mapping[str, Mapping[str, Any]],
    hosts: HostCheck,
    *,
    max_body: int = MAX_BODY_BYTES,
) -> None:
    """Guard ``server`` (the Flask app under Dash): the Host check, the body-size limit and
    the check of callback requests run before every request, and any exception that
    escapes becomes a JSON answer with its status (500 for anything not an HTTP error)."""
    server.config["MAX_CONTENT_LENGTH"] = max_body

    def guard() -> flask.Response | None:
        request = flask.request
        if not hosts.allows(request.headers.get("Host")):
            return _error(
                "this server answers only requests for the host it serves "
                "(see docs/demo.md, 'Serving safely')",
                400,
            )
        if request.path != UPDATE_PATH or request.method != "POST":
            return None
        too_large = _error(f"callback requests must be under {max_body} bytes", 413)
        length = request.content_length
        if length is not None and length >= max_body:
            return too_large  # answered from the headers: the body is never read
        if request.mimetype != "application/json":
            return _error("callback requests must be application/json", 415)
        data = request.get_data(cache=True)
        if len(data) >= max_body:
            # a chunked body: werkzeug stops reading at MAX_CONTENT_LENGTH
            return too_large
        try:
            parse_update(data, callback_map)
        except RequestError as err:
            return _error(str(err), err.status)
        return None

    # first of all hooks, so that nothing else looks at a request this one refuses
    server.before_request_funcs.setdefault(None, []).insert(0, guard)

    @server.errorhandler(Exception)
    def _on_error(err: Exception) -> flask.Response:
        if isinstance(err, HTTPException):
            return _error(err.description or err.name, err.code or 500)
        if _is_missing_asset(err):  # a request for a file Dash does not serve: not a bug
            return _error(f"no such file: {flask.request.path[:200]}", 404)
        log.exception("demo server: request failed")
        return _error("internal error of the demo server (logged on its console)", 500)
