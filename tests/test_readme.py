"""The README's Python examples run as written."""

from __future__ import annotations

import pathlib
import re

README = pathlib.Path(__file__).resolve().parents[1] / "README.md"


def test_readme_python_blocks_run():
    blocks = re.findall(r"```python\n(.*?)```", README.read_text(), flags=re.S)
    assert blocks, "README has no python example"
    for block in blocks:
        exec(compile(block, str(README), "exec"), {})


def test_readme_opens_with_the_two_commands():
    lines = README.read_text().splitlines()
    assert lines[0] == "# diffsim"
    assert lines[2] == "```bash"
    assert lines[3].startswith("bash scripts/demo")
    assert lines[4].startswith("bash scripts/test")
    assert lines[5] == "```"
    # and they are what CI runs
    ci = (README.parent / ".ci" / "run").read_text()
    assert "bash scripts/test" in ci
    demo = (README.parent / "scripts" / "demo").read_text()
    assert "diffsim demo" in demo
