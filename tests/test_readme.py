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
