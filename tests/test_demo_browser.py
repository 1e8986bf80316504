"""The demo page in real headless Chromium (Debian's ``chromium`` driven by Playwright).

The server is the real command, ``python -m diffsim demo --no-browser``, on a free port.
Skipped where Playwright or ``/usr/bin/chromium`` is missing.
"""

from __future__ import annotations

import os
import re
import shutil
import socket
import subprocess
import sys
import time
import urllib.request
from pathlib import Path

import pytest

sync_api = pytest.importorskip("playwright.sync_api")

from diffsim.app import CHROMIUM, CHROMIUM_ARGS  # noqa: E402
from diffsim.app._model import OPTIMIZE_LABELS  # noqa: E402
from diffsim.systems import projectile_wall as pw  # noqa: E402

ROOT = Path(__file__).resolve().parents[1]
ARTIFACTS = ROOT / "test-artifacts"

# scripts/test installs Chromium and sets DIFFSIM_REQUIRE_BROWSER=1: there a missing browser
# is a failure, not a skip
# one server and one browser for the module: scripts/test-slow runs with --dist loadgroup,
# so every test here goes to one worker (two workers would each start the server and each
# compile the page's programs, about a minute of a 2-core machine)
pytestmark = [
    pytest.mark.skipif(
        shutil.which(CHROMIUM) is None and os.environ.get("DIFFSIM_REQUIRE_BROWSER") != "1",
        reason=f"no Chromium at {CHROMIUM} (apt-get install chromium)",
    ),
    pytest.mark.xdist_group("browser"),
]


def library_readouts(v0: float) -> dict[str, str]:
    """The four readouts computed here from the library, formatted as the page shows them."""
    return {
        "#v0-readout": f"v₀ = {v0:.2f} m/s",
        "#landing-readout": f"{float(pw.landing_x(v0)):.2f} m",
        "#loss-readout": f"{float(pw.loss(v0)):.2f}",
        "#clears-readout": "yes" if bool(pw.clears_wall(v0)) else "no",
    }


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


@pytest.fixture(scope="module")
def server():
    port = _free_port()
    proc = subprocess.Popen(
        [sys.executable, "-m", "diffsim", "demo", "--no-browser", "--port", str(port)],
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        text=True,
    )
    url = f"http://127.0.0.1:{port}/"
    deadline = time.monotonic() + 120
    while True:
        try:
            with urllib.request.urlopen(url, timeout=5) as r:
                if r.status == 200:
                    break
        except OSError:
            if proc.poll() is not None or time.monotonic() > deadline:
                out = proc.stdout.read() if proc.stdout else ""
                proc.kill()
                pytest.fail(f"diffsim demo did not start:\n{out}")
            time.sleep(0.2)
    yield url
    proc.terminate()
    try:
        out, _ = proc.communicate(timeout=10)
    except subprocess.TimeoutExpired:
        proc.kill()
        out, _ = proc.communicate()
    assert "Traceback" not in (out or ""), out


@pytest.fixture(scope="module")
def browser():
    with sync_api.sync_playwright() as p:
        b = p.chromium.launch(executable_path=CHROMIUM, headless=True, args=list(CHROMIUM_ARGS))
        yield b
        b.close()


@pytest.fixture(scope="module")
def page_errors():
    return []


@pytest.fixture(scope="module")
def page(server, browser, page_errors):
    pg = browser.new_page(viewport={"width": 1280, "height": 1500})
    pg.on(
        "console",
        lambda m: page_errors.append(f"console: {m.text}") if m.type == "error" else None,
    )
    pg.on("pageerror", lambda e: page_errors.append(f"pageerror: {e}"))
    pg.goto(server)
    pg.wait_for_function(
        "/^v₀ = \\d/.test(document.getElementById('v0-readout')?.textContent ?? '')",
        timeout=60_000,
    )
    # the server compiles its panels once, in the background (about 40 s alone on 2 cores,
    # minutes with the other test worker's server compiling too): the tests time the page,
    # so they start once its last panel before Optimize, the doctor, has answered
    pg.wait_for_function(
        "() => / at v₀ = /.test(document.getElementById('doctor-verdict')?.textContent ?? '')",
        timeout=600_000,
    )
    yield pg
    pg.close()


def _texts(page) -> dict[str, str]:
    return {sel: page.inner_text(sel) for sel in library_readouts(8.0)}


def _enter(page, selector: str, text: str) -> None:
    """Type into a number box and press Enter (the boxes update on Enter or blur)."""
    page.fill(selector, text)
    page.press(selector, "Enter")


def _set_v0(page, v0: float) -> None:
    _enter(page, "#v0-input", repr(v0))
    expected = f"v₀ = {v0:.2f} m/s"
    page.wait_for_function(
        "t => document.getElementById('v0-readout').textContent === t", arg=expected
    )
    # the readouts arrive together in one response; wait until the landing one settled too
    page.wait_for_function(
        "t => document.getElementById('landing-readout').textContent === t",
        arg=library_readouts(v0)["#landing-readout"],
    )


def test_readouts_at_load_are_the_articles(page):
    page.wait_for_function("() => document.getElementById('clears-readout').textContent !== '…'")
    assert _texts(page) == {
        "#v0-readout": "v₀ = 8.00 m/s",
        "#landing-readout": "6.00 m",
        "#loss-readout": "16.00",
        "#clears-readout": "no",
    }


@pytest.mark.parametrize("v0", [9.2, 9.905, 11.0])
def test_setting_v0_shows_the_librarys_values(page, v0):
    _set_v0(page, v0)
    assert _texts(page) == library_readouts(v0)
    assert page.get_attribute("#v0-slider [role=slider]", "aria-valuenow") == str(
        round(v0, 2)
    ).rstrip("0").rstrip(".")


def test_slider_updates_while_dragging(page):
    _set_v0(page, 8.0)
    thumb = page.locator("#v0-slider [role=slider]")
    box = thumb.bounding_box()
    track = page.locator("#v0-slider .dash-slider-track").bounding_box()
    x0, y = box["x"] + box["width"] / 2, box["y"] + box["height"] / 2
    page.mouse.move(x0, y)
    page.mouse.down()
    x1 = track["x"] + 0.66 * track["width"]  # about 10.6 m/s
    page.mouse.move(x1, y, steps=12)
    # still holding the button: the readouts already follow the drag
    page.wait_for_function(
        "() => parseFloat(document.getElementById('v0-readout').textContent.slice(4)) > 10"
    )
    page.mouse.up()
    v0 = float(page.get_attribute("#v0-slider [role=slider]", "aria-valuenow"))
    page.wait_for_function(
        "t => document.getElementById('v0-readout').textContent === t", arg=f"v₀ = {v0:.2f} m/s"
    )
    page.wait_for_function(
        "t => document.getElementById('landing-readout').textContent === t",
        arg=library_readouts(v0)["#landing-readout"],
    )
    assert _texts(page) == library_readouts(v0)


def test_keyboard_arrows_step_the_slider(page):
    _set_v0(page, 8.0)
    page.focus("#v0-slider [role=slider]")
    for _ in range(3):
        page.keyboard.press("ArrowRight")
    page.wait_for_function(
        "() => document.getElementById('v0-readout').textContent === 'v₀ = 8.03 m/s'"
    )
    page.wait_for_function("() => document.getElementById('v0-input').value === '8.03'")


def test_quick_moves_update_readouts_and_panels_only_at_rest(page):
    # 30 arrow presses back to back: the readouts follow every move; the heavy panels (the
    # gradients, the doctor) skip the values the slider only passed through and show the
    # one where it rests
    _set_v0(page, 8.0)
    page.wait_for_function(
        "() => document.querySelector('#gradient-figure .gtitle')?.textContent"
        ".includes('v₀ = 8.00')",
        timeout=120_000,
    )
    # the doctor's first verdict compiles its checks: wait for it too, so that the moves
    # below time the page, not a compile on a loaded machine
    page.wait_for_function(
        "() => document.getElementById('doctor-verdict').textContent.includes('v₀ = 8.00')",
        timeout=120_000,
    )
    page.evaluate(
        """() => {
        window.__titles = [];
        const fig = document.getElementById('gradient-figure');
        new MutationObserver(() => {
            const t = fig.querySelector('.gtitle')?.textContent;
            if (t && t !== window.__titles[window.__titles.length - 1]) window.__titles.push(t);
        }).observe(fig, {childList: true, characterData: true, subtree: true});
    }"""
    )
    page.focus("#v0-slider [role=slider]")
    for _ in range(30):
        page.keyboard.press("ArrowRight", delay=10)
    page.wait_for_function(
        "() => document.getElementById('v0-readout').textContent === 'v₀ = 8.30 m/s'"
    )
    page.wait_for_function(
        "() => document.querySelector('#gradient-figure .gtitle')?.textContent"
        ".includes('v₀ = 8.30')"
    )
    page.wait_for_function(
        "() => document.getElementById('doctor-verdict').textContent.includes('v₀ = 8.30')",
        timeout=120_000,
    )
    assert _texts(page) == library_readouts(8.3)
    titles = page.evaluate("window.__titles")
    assert titles[-1].startswith("gradients at v₀ = 8.30")
    # not one per move: the page skips what the slider passed through (a loaded machine
    # may rest a few times on the way, as a slow hand does)
    assert len(titles) <= 10, titles


@pytest.mark.parametrize(
    "selector,value,message",
    [
        ("#v0-input", "20", "v₀ must be a number in [4, 14] m/s"),
        ("#v0-input", "-3", "v₀ must be a number in [4, 14] m/s"),
        ("#v0-input", "", "v₀ must be a number in [4, 14] m/s"),
        ("#v0-input", "abc", "v₀ must be a number in [4, 14] m/s"),
        ("#v0-input", "nan", "v₀ must be a number in [4, 14] m/s"),
        ("#sigma-input", "0", "σ must be a number"),
        ("#sigma-input", "-1", "σ must be a number"),
        ("#tau-input", "0", "τ must be a number"),
    ],
)
def test_bad_values_show_a_message(page, selector, value, message):
    _set_v0(page, 9.2)
    _enter(page, selector, value)
    page.wait_for_function(
        "m => document.getElementById('message').textContent.includes(m)", arg=message
    )
    assert _texts(page) == library_readouts(9.2)  # the last good values stay
    _enter(page, selector, {"#v0-input": "9.2", "#sigma-input": "1", "#tau-input": "0.3"}[selector])
    page.wait_for_function("() => document.getElementById('message').textContent === ''")


def test_gradients_listed_for_every_estimator(page):
    _set_v0(page, 8.0)
    page.wait_for_selector("#grad-alpha", timeout=120_000)
    page.wait_for_function(
        "() => document.querySelector('#gradient-figure .gtitle')?.textContent.includes('8.00')"
    )
    assert page.inner_text("#grad-exact") == "0.000"  # the plateau
    for name in ("zeroth", "first", "alpha", "smoothed"):
        assert re.fullmatch(r"-?\d+\.\d{3}", page.inner_text(f"#grad-{name}"))


def test_gradient_doctor_panel_follows_v0(page):
    # the library's verdicts at σ = 1 (the page's default): plateau at 8, trusted at 11
    _set_v0(page, 8.0)
    # wait for the panel of v₀ = 8 itself (the previous v₀'s panel may show plateau too)
    page.wait_for_function(
        "() => document.getElementById('doctor-verdict').textContent.startsWith("
        "'untrusted at v₀ = 8.00')",
        timeout=120_000,
    )
    assert page.locator("#doctor-flag-plateau").count() == 1
    assert "zeroth-order or alpha-order" in page.inner_text("#doctor-recommendation")
    _set_v0(page, 11.0)
    page.wait_for_function(
        "() => document.getElementById('doctor-verdict').textContent.startsWith("
        "'trusted at v₀ = 11.00')"
    )
    assert page.locator("#doctor-flags li").count() == 0


def _optimize_from_8(page, choice: str) -> None:
    """Run Optimize with ``choice`` from v₀ = 8 and wait for *this* run's result (an earlier
    run's result stays on the page until the new one replaces it). ``innerText``, not
    ``textContent``: the result is rendered (dcc.Loading keeps new children hidden until its
    loading state clears, and a hidden element's inner text, which the tests read, is '')."""
    _set_v0(page, 8.0)
    page.check(f"#estimator-select input[value={choice}]")
    page.click("#optimize-button")
    header = f"{OPTIMIZE_LABELS[choice]} from v₀ = 8.00 m/s:"
    page.wait_for_function(
        "([header]) => { const r = document.getElementById('optimize-result');"
        " const x = document.getElementById('optimize-landing');"
        " return r !== null && x !== null && r.innerText.startsWith(header)"
        " && x.innerText.endsWith(' m'); }",
        arg=[header],
        timeout=180_000,
    )


def test_optimize_default_lists_its_decisions_and_lands(page):
    _optimize_from_8(page, "decide")
    items = page.locator("#optimize-decisions li").all_inner_texts()
    assert "lbfgs" in items[-2] and "stop" in items[-1], items
    landing = float(page.inner_text("#optimize-landing").removesuffix(" m"))
    assert abs(landing - pw.TARGET) < 0.05


def test_optimize_alpha_order_from_8_reaches_the_target(page):
    _optimize_from_8(page, "alpha")
    landing = float(page.inner_text("#optimize-landing").removesuffix(" m"))
    assert abs(landing - pw.TARGET) < 0.05
    final_v0 = float(page.inner_text("#optimize-v0"))
    assert abs(float(pw.landing_x(final_v0)) - landing) < 0.01  # the library's landing x
    assert page.inner_text("#optimize-clears") == "yes"
    # the animation ends with the whole path drawn on the loss curve
    page.wait_for_function(
        "() => document.getElementById('loss-figure').querySelectorAll('.scatterlayer .trace')"
        ".length > 0"
    )
    time.sleep(2.0)  # 40 frames at 40 ms
    ARTIFACTS.mkdir(exist_ok=True)
    page.screenshot(path=str(ARTIFACTS / "demo.png"), full_page=True)
    assert (ARTIFACTS / "demo.png").stat().st_size > 10_000


def test_no_console_errors(page, page_errors):
    page.reload()
    page.wait_for_function(
        "() => document.getElementById('v0-readout')?.textContent === 'v₀ = 8.00 m/s'"
    )
    assert page_errors == []
