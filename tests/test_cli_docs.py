"""``diffsim docs``: the documentation a pip user has (issue 24: ``--help`` sent them to
``docs/`` in a repository they do not have)."""

from __future__ import annotations

import json
import pathlib
import re

import pytest

from conftest import cli_runner
from diffsim.cli import app

ROOT = pathlib.Path(__file__).resolve().parents[1]
runner = cli_runner()


def test_docs_lists_the_pages_with_their_titles():
    res = runner.invoke(app, ["docs", "--json"])
    assert res.exit_code == 0, res.output
    data = json.loads(res.stdout)
    expected = {
        p.relative_to(ROOT / "docs").with_suffix("").as_posix()
        for p in (ROOT / "docs").rglob("*.md")
        if p.relative_to(ROOT / "docs").parts[0] != "reference"
    }
    assert set(data["pages"]) == expected
    assert {"getting-started", "cli", "guides/identify", "concepts/doctor"} <= expected
    for name, title in data["pages"].items():
        first = (ROOT / "docs" / f"{name}.md").read_text().splitlines()[0]
        assert first == f"# {title}", name
    table = runner.invoke(app, ["docs"])
    assert table.exit_code == 0 and "guides/identify" in table.stdout


@pytest.mark.parametrize("page", ["cli", "cli.md", "docs/guides/identify.md"])
def test_docs_prints_a_page_as_it_is(page):
    res = runner.invoke(app, ["docs", page])
    assert res.exit_code == 0, res.output
    name = page.removeprefix("docs/").removesuffix(".md")
    assert res.stdout == (ROOT / "docs" / f"{name}.md").read_text() + "\n"
    js = json.loads(runner.invoke(app, ["docs", page, "--json"]).stdout)
    assert js["page"] == name and js["markdown"] == (ROOT / "docs" / f"{name}.md").read_text()


@pytest.mark.parametrize("page", ["nope", "reference/diffsim", "../README", ""])
def test_docs_refuses_a_page_it_does_not_have(page):
    res = runner.invoke(app, ["docs", page])
    assert res.exit_code == 2 and res.stdout == ""
    lines = res.stderr.strip().splitlines()
    assert len(lines) == 1 and "PAGE must be one of" in lines[0] and "getting-started" in lines[0]


def test_help_points_at_the_bundled_docs():
    res = runner.invoke(app, ["--help"], env={"COLUMNS": "200"})
    assert "diffsim docs" in res.stdout and "docs/ in the repository" not in res.stdout


def test_the_wheel_carries_every_page_docs_lists():
    text = (ROOT / "pyproject.toml").read_text()
    section = text.split("[tool.hatch.build.targets.wheel.force-include]\n", 1)[1].split("\n[", 1)[
        0
    ]
    included = dict(re.findall(r'^"([^"]+)" = "([^"]+)"$', section, re.M))
    assert len(included) >= 10
    for source, target in included.items():
        assert target == "diffsim/_docs/" + source.removeprefix("docs/"), source
    tops = {pathlib.Path(s).relative_to("docs").parts[0] for s in included}
    for page in (ROOT / "docs").rglob("*.md"):
        top = page.relative_to(ROOT / "docs").parts[0]
        if top != "reference":
            assert top in tops, f"{page} is not in the wheel (pyproject.toml force-include)"
