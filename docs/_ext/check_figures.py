"""Check the built site: every executed tutorial shows its figures.

A tutorial in ``docs/tutorials/*.py`` (jupytext percent format) is executed by
mkdocs-jupyter into ``site/tutorials/<name>/index.html``. Each ``plt.show()`` in its code
must come out as an embedded image there: under a non-interactive backend (``MPLBACKEND=
Agg``) ``plt.show()`` draws nothing and the page silently loses its figures.

    python docs/_ext/check_figures.py [docs/tutorials] [site/tutorials]

prints one line per tutorial and exits 1 when a page has fewer images than ``plt.show()``
calls (or is missing).
"""

from __future__ import annotations

import re
import sys
from pathlib import Path

_SHOW = re.compile(r"^\s*plt\.show\(\s*\)", re.MULTILINE)
_IMAGE = re.compile(r"<img\b[^>]*\bsrc=\"data:image/(?:png|jpeg|svg\+xml)", re.IGNORECASE)


def shows_in(source: str) -> int:
    """Number of ``plt.show()`` calls in a percent-format script's code (a markdown cell's
    text and comments do not count)."""
    code, in_markdown = [], False
    for line in source.splitlines():
        if line.startswith("# %%"):
            in_markdown = "[markdown]" in line
            continue
        if not in_markdown and not line.lstrip().startswith("#"):
            code.append(line)
    return len(_SHOW.findall("\n".join(code)))


def images_in(html: str) -> int:
    """Number of images embedded in a built page (the executed cells' outputs)."""
    return len(_IMAGE.findall(html))


def check(tutorials: Path, site: Path) -> list[str]:
    """One message per tutorial page with fewer images than ``plt.show()`` calls."""
    problems = []
    for script in sorted(tutorials.glob("*.py")):
        wanted = shows_in(script.read_text())
        page = site / script.stem / "index.html"
        if not page.is_file():
            problems.append(f"{page}: missing (the tutorial {script} was not built)")
            continue
        found = images_in(page.read_text())
        print(f"{script.name}: {wanted} plt.show(), {found} images in {page}")
        if found < wanted:
            problems.append(
                f"{page}: {found} images for {wanted} plt.show() calls in {script} "
                "(a non-interactive matplotlib backend in the docs build?)"
            )
    return problems


def main(argv: list[str]) -> int:
    tutorials = Path(argv[0]) if argv else Path("docs/tutorials")
    site = Path(argv[1]) if len(argv) > 1 else Path("site/tutorials")
    problems = check(tutorials, site)
    for p in problems:
        print(f"error: {p}", file=sys.stderr)
    return 1 if problems else 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
