"""The CI times in README.md and docs/development.md are the recorded run's
(scripts/ci_numbers.py, docs/records/ci.json; issue 24: the docs' times were typed and
stale)."""

from __future__ import annotations

import importlib.util
import json
import pathlib

import pytest

ROOT = pathlib.Path(__file__).resolve().parents[1]


def _ci_numbers():
    spec = importlib.util.spec_from_file_location("ci_numbers", ROOT / "scripts/ci_numbers.py")
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


cn = _ci_numbers()


@pytest.mark.parametrize(
    "line,expected",
    [
        (
            "===== 1,179 passed, 2 skipped, 27 warnings in 521.80s (0:08:41) =====",
            {"passed": 1179, "skipped": 2, "failed": 0, "pytest_seconds": 521.8},
        ),
        (
            "=========== 1 failed, 162 passed, 27 warnings in 1966.24s (0:32:46) ============",
            {"passed": 162, "skipped": 0, "failed": 1, "pytest_seconds": 1966.24},
        ),
        (
            "==== 1104 passed, 80 deselected in 59.1s ====",
            {"passed": 1104, "skipped": 0, "failed": 0, "pytest_seconds": 59.1},
        ),
    ],
)
def test_pytest_summary_is_parsed(line, expected):
    log = f"collected\n===== 3 passed in 1.00s =====\n{line}\n"  # the last summary counts
    assert cn.parse_pytest(log) == expected
    assert cn.parse_pytest("no tests here") is None


def test_durations():
    assert [cn.duration(s) for s in (37, 60, 521.8, 3599, 3620)] == [
        "37 s", "1 min 0 s", "8 min 42 s", "59 min 59 s", "1 h 00 min"
    ]  # fmt: skip


def test_a_record_from_logs_renders_into_the_tables(tmp_path):
    (tmp_path / "times").write_text(
        "test 600\ntest-slow 2000\ntest-minimum 700\ndocs 230\npackage 90\n"
    )
    (tmp_path / "test.log").write_text("== 1,179 passed, 2 skipped in 521.80s (0:08:41) ==\n")
    (tmp_path / "test-slow.log").write_text("== 163 passed in 1966.24s (0:32:46) ==\n")
    record = cn.make_record(tmp_path)
    assert record["total_seconds"] == 3620 and record["steps"]["test"]["passed"] == 1179
    assert "passed" not in record["steps"]["docs"]  # no pytest in that step
    page = (
        "| command | what it runs | time |\n|---|---|---|\n"
        "| `bash scripts/test` | tests | old |\n"
        "| `bash scripts/docs [serve]` | the site | old |\n"
        "| `bash scripts/docs serve` | serve it | |\n"
        "| `bash scripts/other` | not a CI step | keep |\n\n"
        "All: <!-- ci-total -->old<!-- /ci-total -->.\n"
    )
    out = cn.render(page, record)
    assert (
        "| `bash scripts/test` | tests | 10 min 0 s (1,179 passed, 2 skipped; pytest 8 min 42 s) |"
        in out
    )
    assert "| `bash scripts/docs [serve]` | the site | 3 min 50 s |" in out
    assert "| `bash scripts/docs serve` | serve it | |" in out
    assert "| `bash scripts/other` | not a CI step | keep |" in out
    assert out.splitlines()[0] == f"| command | what it runs | {cn.header_cell(record)} |"
    assert record["date"] in cn.header_cell(record)
    assert "<!-- ci-total -->1 h 00 min on " in out
    assert cn.render(out, record) == out  # idempotent
    noted = cn.render(page, dict(record, conditions="other jobs on the cores"))
    assert ", other jobs on the cores (`DIFFSIM_CI_RECORD=" in noted
    (tmp_path / "times").write_text("test 600\n")
    with pytest.raises(SystemExit, match="test-slow"):
        cn.make_record(tmp_path)


def test_the_pages_agree_with_the_committed_record():
    record = json.loads((ROOT / "docs/records/ci.json").read_text())
    assert set(record["steps"]) == set(cn.STEPS)
    for step in ("test", "test-slow", "test-minimum"):
        assert record["steps"][step]["passed"] > 0 and record["steps"][step]["failed"] == 0
    for page in cn.PAGES:
        text = (ROOT / page).read_text()
        assert "<!-- ci-total -->" in text, page
        assert cn.render(text, record, page=page) == text, (
            f"{page} disagrees with docs/records/ci.json: run python scripts/ci_numbers.py --write"
        )


def test_ci_runs_the_recorded_steps_in_order():
    run = (ROOT / ".ci/run").read_text()
    steps = [line.split()[1] for line in run.splitlines() if line.startswith("step ")]
    assert tuple(steps) == cn.STEPS
    assert "scripts/ci_numbers.py --record" in run
