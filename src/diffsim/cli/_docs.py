"""``diffsim docs``: the documentation's pages, bundled with the package.

The wheel carries the Markdown sources of the site (``diffsim/_docs``, from ``docs/``:
getting started, the concepts, the guides, the CLI, the results); in a clone they are read
from ``docs/`` itself. The API reference pages are left out: they are directives the site
expands from the docstrings, which ``help(diffsim.rollout)`` shows directly.
"""

from __future__ import annotations

from pathlib import Path

import typer

from ._common import CLIError, app, console, print_json

_HERE = Path(__file__).resolve()


def docs_root() -> Path | None:
    """The folder of the bundled pages (an installed wheel), else the clone's ``docs/``."""
    bundled = _HERE.parents[1] / "_docs"
    if (bundled / "cli.md").is_file():
        return bundled
    clone = _HERE.parents[3] / "docs"  # src/diffsim/cli/_docs.py in a clone
    if (clone / "cli.md").is_file():
        return clone
    return None


def pages(root: Path) -> dict[str, Path]:
    """Page name (its path below the docs folder, without ``.md``) -> file."""
    found = {
        p.relative_to(root).with_suffix("").as_posix(): p
        for p in sorted(root.rglob("*.md"))
        if p.relative_to(root).parts[0] not in ("reference", "_ext")
    }
    return dict(sorted(found.items()))


def _title(path: Path) -> str:
    for line in path.read_text(encoding="utf-8").splitlines():
        if line.startswith("# "):
            return line[2:].strip()
    return ""


@app.command()
def docs(
    page: str | None = typer.Argument(
        None,
        help="A page to print, e.g. getting-started, cli, guides/identify (default: list them).",
    ),
    json_out: bool = typer.Option(
        False, "--json", help="Print one JSON object: the pages, or the page's Markdown."
    ),
) -> None:
    """The documentation, offline: list the pages bundled with diffsim, or print one (its
    Markdown source; the site renders the same pages)."""
    root = docs_root()
    if root is None:  # a broken install: the wheel always carries the pages
        raise CLIError("the bundled documentation is missing from this install of diffsim")
    found = pages(root)
    if page is None:
        if json_out:
            print_json({"root": str(root), "pages": {k: _title(p) for k, p in found.items()}})
            return
        console.print(f"diffsim's documentation ({len(found)} pages in {root}):", highlight=False)
        width = max(len(k) for k in found)
        for name, path in found.items():
            console.print(f"  {name:<{width}}  {_title(path)}", highlight=False, markup=False)
        console.print(
            "diffsim docs PAGE prints one. In a clone, bash scripts/docs serve shows the site "
            "(http://127.0.0.1:8000/).",
            highlight=False,
        )
        return
    name = page.strip().removesuffix(".md").removeprefix("docs/")
    if name not in found:
        raise CLIError(
            f"PAGE must be one of the pages diffsim docs lists ({', '.join(found)}), got {page!r}"
        )
    text = found[name].read_text(encoding="utf-8")
    if json_out:
        print_json({"page": name, "path": str(found[name]), "markdown": text})
        return
    typer.echo(text)
