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
    assert lines[2].startswith("bash scripts/demo")
    assert lines[3].startswith("bash scripts/test")
