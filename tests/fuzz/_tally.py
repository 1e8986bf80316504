"""The fuzz suite's tally: cases, clean rejections, results and defects, per test and per module.

Each fuzz test is one class of inputs (an entry point, or one of issue 26's classes: integer
bounds, constructor field types, θ/state mismatches, options a mode ignores, …), so the
per-test counts are the per-class counts. A module prints its totals when it ends; with
``DIFFSIM_FUZZ_TALLY=FILE`` every test's counts are appended to FILE as one JSON line
(``{"test": ..., "cases": ..., ...}``; safe under pytest-xdist, each line is one write), and
``python tests/fuzz/_tally.py FILE`` prints them as a table.
"""

from __future__ import annotations

import collections
import json
import os
import sys

OUTCOMES = ("cases", "clean rejections", "results", "defects")


def _current_test() -> str:
    # pytest sets this to "path::name[param] (call)" while a test runs
    return os.environ.get("PYTEST_CURRENT_TEST", "?").rsplit(" (", 1)[0]


class Tally:
    """Counts per outcome, for the module (``tally[outcome]``) and for each test."""

    def __init__(self, name: str) -> None:
        self.name = name
        self.total: collections.Counter[str] = collections.Counter()
        self.by_test: dict[str, collections.Counter[str]] = collections.defaultdict(
            collections.Counter
        )
        self.defect_messages: list[str] = []

    def __getitem__(self, outcome: str) -> int:
        return self.total[outcome]

    def add(self, outcome: str) -> None:
        """Count one case with ``outcome`` (one of ``OUTCOMES[1:]``)."""
        if outcome not in OUTCOMES[1:]:
            raise ValueError(f"outcome must be one of {OUTCOMES[1:]}, got {outcome!r}")
        test = _current_test()
        for counter in (self.total, self.by_test[test]):
            counter["cases"] += 1
            counter[outcome] += 1

    def defect(self, message: str) -> None:
        self.add("defects")
        self.defect_messages.append(message)

    def line(self) -> str:
        return f"{self.name}: " + ", ".join(f"{self.total[k]} {k}" for k in OUTCOMES)

    def report(self, request) -> None:
        """Print the module's totals (past pytest's capture) and append the per-test lines."""
        lines = [self.line(), *(f"  defect: {d}" for d in self.defect_messages[:20])]
        capture = request.config.pluginmanager.getplugin("capturemanager")
        if capture is not None:
            with capture.global_and_fixture_disabled():
                print("\n" + "\n".join(lines))
        path = os.environ.get("DIFFSIM_FUZZ_TALLY")
        if path:
            with open(path, "a") as f:
                for test, counts in sorted(self.by_test.items()):
                    f.write(json.dumps({"test": test, **{k: counts[k] for k in OUTCOMES}}) + "\n")


def table(path: str) -> str:
    """The per-test lines in ``path`` as a Markdown table, with a total row."""
    rows: dict[str, collections.Counter[str]] = collections.defaultdict(collections.Counter)
    with open(path) as f:
        for line in f:
            record = json.loads(line)
            test = record.pop("test")
            rows[test].update(record)  # a test run twice (two runs into one file) adds up
    total: collections.Counter[str] = collections.Counter()
    out = ["| class (fuzz test) | " + " | ".join(OUTCOMES) + " |", "|---" * 5 + "|"]
    for test, counts in sorted(rows.items()):
        total.update(counts)
        name = test.split("tests/fuzz/", 1)[-1]
        out.append(f"| `{name}` | " + " | ".join(f"{counts[k]:,}" for k in OUTCOMES) + " |")
    out.append("| **all** | " + " | ".join(f"**{total[k]:,}**" for k in OUTCOMES) + " |")
    return "\n".join(out)


if __name__ == "__main__":
    print(table(sys.argv[1]))
