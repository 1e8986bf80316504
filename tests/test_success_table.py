"""``python -m benchmarks.success``: the success table's bookkeeping and one real run.

The table's numbers come from real optimisations; here the bookkeeping (success, first
iterate within tolerance, evaluations to it, the verdicts on auto's goals) is checked on
hand-made rows, and one small task runs end to end against its own outcome function.
"""

from __future__ import annotations

import json
import sys
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from benchmarks import success


def _row(task, est, k, n=24, ev=100.0):
    return {"task": task, "estimator": est, "successes": k, "starts": n, "rate": k / n,
            "median_evaluations_to_success": ev if k else None}  # fmt: skip


def test_verdicts_name_each_missed_goal():
    study = success.Study(lambda x: x, lambda *a, **k: None, lambda x: x, 0.0, 0.1)
    t = success.Task("t", "a task", study, lambda n: None, 0.1, 4, 1, 0.1)
    ok = [_row("t", e, 24) for e in success.ESTIMATOR_NAMES]
    assert success.verdicts(ok, [t]) == ["t: meets every goal"]
    worse = [_row("t", e, 24 if e != "auto" else 21, ev=300.0 if e == "auto" else 100.0)
             for e in success.ESTIMATOR_NAMES]  # fmt: skip
    (line,) = success.verdicts(worse, [t])
    assert "88% < 95 %" in line and "21 vs the best fixed estimator's 24" in line
    assert "300 evaluations to success vs ZoBG's 100" in line
    table = success.table(worse, [t])
    assert "| a task | **24/24 (100)** |" in table and "21/24 (300)" in table


@pytest.mark.slow
def test_a_small_run_end_to_end(capsys):
    assert success.main(["--starts", "2", "--tasks", "bounce", "--json"]) == 0
    out = json.loads(capsys.readouterr().out.strip().splitlines()[-1])
    rows = {r["estimator"]: r for r in out["rows"]}
    assert set(rows) == set(success.ESTIMATOR_NAMES)
    for r in rows.values():
        assert 0 <= r["successes"] <= 2 and r["evaluations_per_run"] > 0
    # exact: one gradient per step, no loss evaluations counted
    assert rows["exact"]["evaluations_per_run"] == 200


def test_usage_errors_exit_2():
    for args in (["--tasks", "nope"], ["--starts", "0"]):
        with pytest.raises(SystemExit) as e:
            success.main(args)
        assert e.value.code == 2
