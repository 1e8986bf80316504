"""The README's and the documentation pages' Python examples run as written.

A block fenced as ``python`` is an example that must run; a fragment that is not meant to
run on its own is fenced as ``py``. The tutorials (docs/tutorials/*.py) run in the site
build (scripts/docs), with their own assertions.
"""

from __future__ import annotations

import pathlib
import re

import pytest

ROOT = pathlib.Path(__file__).resolve().parents[1]
README = ROOT / "README.md"
PAGES = sorted((ROOT / "docs").rglob("*.md"))


def _python_blocks(path: pathlib.Path) -> list[str]:
    return re.findall(r"```python\n(.*?)```", path.read_text(), flags=re.S)


HEAVY_PAGES = {"estimators.md", "control.md", "devices.md", "identify.md"}
"""Pages whose examples take most of a minute on 2 cores: run in scripts/test-slow."""


def test_readme_python_blocks_run():
    blocks = _python_blocks(README)
    assert blocks, "README has no python example"
    for block in blocks:
        exec(compile(block, str(README), "exec"), {})


@pytest.mark.parametrize(
    "page",
    [
        pytest.param(p, marks=pytest.mark.slow) if p.name in HEAVY_PAGES else p
        for p in PAGES
        if _python_blocks(p)
    ],
    ids=lambda p: str(p.relative_to(ROOT)),
)
def test_docs_python_blocks_run(page):
    for block in _python_blocks(page):
        exec(compile(block, str(page), "exec"), {})


def test_docs_pages_have_examples():
    """The pages that carry the README's former examples still do (a guard against a
    refactor that fences them all as ``py`` and so stops running them)."""
    with_examples = {str(p.relative_to(ROOT / "docs")) for p in PAGES if _python_blocks(p)}
    expected = {
        "getting-started.md",
        "concepts/rollout.md",
        "concepts/doctor.md",
        "estimators.md",
        "guides/diagnose.md",
        "guides/optimize-contact.md",
        "guides/long-horizons.md",
    }
    assert expected <= with_examples, expected - with_examples


def test_readme_opens_with_the_two_commands():
    text = README.read_text()
    assert text.startswith("# diffsim\n")
    first_block = re.search(r"```bash\n(.*?)```", text, flags=re.S)
    assert first_block is not None and first_block.start() < 40, "no command block on top"
    commands = [line.split("#")[0].strip() for line in first_block.group(1).splitlines()]
    assert commands == ["bash scripts/demo", "bash scripts/test"]
    # and they are what CI runs
    ci = (README.parent / ".ci" / "run").read_text()
    assert "bash scripts/test" in ci
    demo = (README.parent / "scripts" / "demo").read_text()
    assert "diffsim demo" in demo
