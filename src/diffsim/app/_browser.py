"""How the page is driven headless (browser tests and the latency benchmark share this).

Debian's ``chromium`` (``apt-get install chromium``), started by Playwright with the flags
a machine without outside network needs (no background
connections, no component updates); ``DIFFSIM_CHROMIUM`` points at another binary.
"""

from __future__ import annotations

import os

CHROMIUM = os.environ.get("DIFFSIM_CHROMIUM", "/usr/bin/chromium")
CHROMIUM_ARGS: tuple[str, ...] = (
    "--no-sandbox",
    "--disable-gpu",
    "--disable-background-networking",
    "--disable-component-update",
    "--disable-sync",
    "--disable-quic",
    "--no-first-run",
)
