"""Latency of the demo page, measured from a real browser (not a test).

    python -m benchmarks.demo_latency [--moves 100] [--cold]

1. Start-up: time from launching ``python -m diffsim demo --no-browser`` to the page
   being usable, i.e. headless Chromium showing the readout "v₀ = 8.00 m/s" computed by
   the server (and, for information, until the estimators are listed too). Chromium is
   launched before the command, so its own start is not counted. ``--cold`` starts with an
   empty JAX compilation cache (a first run on a fresh machine).
2. Slider to readout: the slider's handle is focused and moved one step with the arrow
   key, ``moves`` times. In the page, a keydown listener stamps ``performance.now()`` and
   a MutationObserver on the ``v0-readout`` element stamps the moment its text changes;
   the difference is the latency (median and 95th percentile), server round trip and
   rendering included. "Back to back" (the default): each move follows as soon as the
   previous readout has changed; ``--pause S`` waits S seconds between moves.
3. Rest to panels: after the last move, the time from the last readout change until the
   heavy panels (the gradient figure and the gradient doctor) show the final v₀.

Chromium: Debian's ``/usr/bin/chromium`` driven by Playwright (``DIFFSIM_CHROMIUM``
overrides the path).
"""

from __future__ import annotations

import argparse
import os
import socket
import statistics
import subprocess
import sys
import tempfile
import time
import urllib.request

from playwright.sync_api import sync_playwright

from diffsim.app import CHROMIUM
from diffsim.app import CHROMIUM_ARGS as ARGS

_PROBE = """
() => {
  window.__lat = [];
  window.__t0 = null;
  window.__lastReadout = null;
  const thumb = document.querySelector('#v0-slider [role=slider]');
  thumb.addEventListener('keydown', () => { window.__t0 = performance.now(); }, true);
  const target = document.getElementById('v0-readout');
  new MutationObserver(() => {
    if (window.__t0 !== null) {
      window.__lastReadout = performance.now();
      window.__lat.push(window.__lastReadout - window.__t0);
      window.__t0 = null;
    }
  }).observe(target, {childList: true, characterData: true, subtree: true});
}
"""


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def _percentile(xs: list[float], q: float) -> float:
    s = sorted(xs)
    k = (len(s) - 1) * q
    lo, hi = int(k), min(int(k) + 1, len(s) - 1)
    return s[lo] + (s[hi] - s[lo]) * (k - lo)


def main() -> None:
    """Run the benchmark and print the numbers."""
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--moves", type=int, default=100, help="slider moves to time")
    ap.add_argument("--cold", action="store_true", help="empty JAX compilation cache")
    ap.add_argument(
        "--pause", type=float, default=0.0, help="seconds between moves (0: back to back)"
    )
    a = ap.parse_args()

    env = dict(os.environ)
    tmp = None
    if a.cold:
        tmp = tempfile.TemporaryDirectory()
        env["DIFFSIM_JAX_CACHE"] = tmp.name
    port = _free_port()
    url = f"http://127.0.0.1:{port}/"

    with sync_playwright() as p:
        browser = p.chromium.launch(executable_path=CHROMIUM, headless=True, args=list(ARGS))
        page = browser.new_page(viewport={"width": 1280, "height": 1400})
        t_start = time.perf_counter()
        proc = subprocess.Popen(
            [sys.executable, "-m", "diffsim", "demo", "--no-browser", "--port", str(port)],
            stdout=subprocess.DEVNULL,
            stderr=subprocess.DEVNULL,
            env=env,
        )
        try:
            while True:
                try:
                    urllib.request.urlopen(url, timeout=5).close()
                    break
                except OSError:
                    if proc.poll() is not None:
                        raise SystemExit("diffsim demo exited") from None
                    time.sleep(0.05)
            t_http = time.perf_counter() - t_start
            page.goto(url)
            page.wait_for_function(
                "() => document.getElementById('v0-readout')?.textContent === 'v₀ = 8.00 m/s'",
                timeout=120_000,
                polling=20,
            )
            t_usable = time.perf_counter() - t_start
            page.wait_for_selector("#grad-alpha", timeout=300_000)
            t_estimators = time.perf_counter() - t_start

            # wait for the background warm-up to finish so it does not share the CPU
            page.wait_for_function(
                "() => document.getElementById('optimize-status')?.textContent === 'ready'",
                timeout=300_000,
            )
            t_ready = time.perf_counter() - t_start
            time.sleep(0.5)
            page.evaluate(_PROBE)
            page.focus("#v0-slider [role=slider]")
            lat: list[float] = []
            for i in range(a.moves):
                # blocks of 20: right, right, left, ... (ends away from the start value)
                key = "ArrowLeft" if (i // 20) % 3 == 2 else "ArrowRight"
                before = page.evaluate("window.__lat.length")
                page.keyboard.press(key)
                page.wait_for_function(f"() => window.__lat.length > {before}", polling=5)
                lat.append(page.evaluate("window.__lat[window.__lat.length - 1]"))
                if a.pause:
                    time.sleep(a.pause)
            final = page.inner_text("#v0-readout").removeprefix("v₀ = ").removesuffix(" m/s")
            page.wait_for_function(
                """v => document.querySelector('#gradient-figure .gtitle')?.textContent
                        .includes('v₀ = ' + v) &&
                      document.getElementById('doctor-verdict')?.textContent
                        .includes('v₀ = ' + v)""",
                arg=final,
                polling=5,
                timeout=60_000,
            )
            settle = page.evaluate("performance.now() - window.__lastReadout")
        finally:
            proc.terminate()
            proc.wait(timeout=10)
            browser.close()
            if tmp is not None:
                tmp.cleanup()

    cache = "cold (empty JAX compilation cache)" if a.cold else "warm JAX compilation cache"
    print(f"diffsim demo latency, {os.cpu_count()} CPUs, {cache}")
    print(f"  start-up: HTTP up {t_http:.2f} s, page usable (readouts) {t_usable:.2f} s, ")
    print(f"            estimators listed {t_estimators:.2f} s, Optimize ready {t_ready:.2f} s")
    print(
        f"  slider -> readout over {len(lat)} moves: median {statistics.median(lat):.1f} ms, "
        f"p95 {_percentile(lat, 0.95):.1f} ms, max {max(lat):.1f} ms"
        + (f" ({a.pause:g} s between moves)" if a.pause else " (back to back)")
    )
    print(f"  last move -> gradients and doctor at the final v0: {settle:.0f} ms")


if __name__ == "__main__":
    main()
