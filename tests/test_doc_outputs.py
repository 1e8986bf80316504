"""The sample outputs in the docs are the commands' output today (issue 24: docs/cli.md
showed a diagnose run whose numbers the command no longer printed).

Every ```` ```console ```` block of the pages below is a list of ``$ diffsim ...`` lines,
each followed by the output it prints (a command with no output lines under it is only
an example and is not run). Each is run as a user would, ``python -m diffsim`` at 100
columns, and must print exactly what the page shows (trailing spaces aside).
``python tests/test_doc_outputs.py --write`` regenerates the blocks.
"""

from __future__ import annotations

import os
import pathlib
import re
import subprocess
import sys

import pytest

ROOT = pathlib.Path(__file__).resolve().parents[1]
PAGES = ("docs/cli.md", "docs/concepts/jacobians.md", "docs/getting-started.md", "README.md")
_BLOCK = re.compile(r"^```console\n(.*?)^```", re.S | re.M)


def samples(text: str) -> list[tuple[str, str]]:
    """(command, shown output) for each command with output in the console blocks."""
    found = []
    for block in _BLOCK.findall(text):
        for part in re.split(r"^\$ ", block, flags=re.M)[1:]:
            command, _, output = part.partition("\n")
            if output.strip():
                found.append((command.split("#", 1)[0].strip(), output))
        # a block of commands only (each with a comment) is an example list: not run
    return found


def run(command: str) -> str:
    argv = command.split()
    assert argv[0] == "diffsim", command
    env = {**os.environ, "COLUMNS": "100", "NO_COLOR": "1", "TERM": "dumb"}
    res = subprocess.run(
        [sys.executable, "-m", "diffsim", *argv[1:]],
        capture_output=True, text=True, env=env, timeout=600, cwd=ROOT,
    )  # fmt: skip
    assert res.returncode == 0, res.stderr
    return res.stdout


def _normal(text: str) -> str:
    return "\n".join(line.rstrip() for line in text.strip("\n").splitlines())


CASES = [(page, cmd, out) for page in PAGES for cmd, out in samples((ROOT / page).read_text())]


def test_the_docs_show_sample_outputs():
    assert {page for page, _, _ in CASES} >= {"docs/cli.md", "docs/concepts/jacobians.md"}
    shown = samples("```console\n$ diffsim a   # c\nline\n$ diffsim b\n```\n")
    assert shown == [("diffsim a", "line\n")]


@pytest.mark.parametrize(("page", "command", "shown"), CASES, ids=[f"{p}:{c}" for p, c, _ in CASES])
def test_sample_output_is_what_the_command_prints(page, command, shown):
    assert _normal(run(command)) == _normal(shown), (
        f"{page}: `{command}` prints something else now; python tests/test_doc_outputs.py --write"
    )


def write() -> None:
    for page in PAGES:
        path = ROOT / page
        text = path.read_text()

        def fresh(block: re.Match) -> str:
            lines = []
            for part in re.split(r"^\$ ", block[1], flags=re.M)[1:]:
                command, _, output = part.partition("\n")
                if output.strip():
                    output = run(command.split("#", 1)[0].strip())
                lines.append(f"$ {command}\n{output}")
            return "```console\n" + "".join(lines) + "```"

        path.write_text(_BLOCK.sub(fresh, text))


if __name__ == "__main__":
    if sys.argv[1:] == ["--write"]:
        write()
