"""The CI times in the docs, generated from a recorded run instead of typed.

``DIFFSIM_CI_RECORD=docs/records/ci.json bash .ci/run`` calls

    python scripts/ci_numbers.py --record docs/records/ci.json --logs DIR

which reads each step's output and time (DIR: ``NAME.log`` and ``times``, written by
``.ci/run``) and writes the record: the machine, the date, and per step its seconds
(set-up included) and, for the test steps, pytest's counts and seconds. Then

    python scripts/ci_numbers.py --write [--record docs/records/ci.json]

puts the record into the time column of every ``bash scripts/NAME`` row of the tables in
README.md and docs/development.md, into their headers, and into the sentence between
``<!-- ci-total -->`` and ``<!-- /ci-total -->`` (with ``--conditions TEXT``, noted in the
record first: how the run was made). ``tests/test_ci_numbers.py`` fails when a table and
the record disagree.
"""

from __future__ import annotations

import argparse
import datetime
import json
import os
import platform
import re
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
RECORD = ROOT / "docs" / "records" / "ci.json"
PAGES = ("README.md", "docs/development.md")
STEPS = ("test", "test-slow", "test-minimum", "docs", "package")

_SUMMARY = re.compile(r"=+ (?P<counts>[^=]*?) in (?P<seconds>[\d.]+)s(?: \([\d:]+\))? =+")
_TOTAL = re.compile(r"<!-- ci-total -->.*?<!-- /ci-total -->", re.S)


def _cpu() -> str:
    try:
        for line in Path("/proc/cpuinfo").read_text().splitlines():
            if line.startswith("model name"):
                return line.split(":", 1)[1].strip()
    except OSError:
        pass
    return platform.processor() or platform.machine()


def parse_pytest(log: str) -> dict | None:
    """The last pytest summary line in ``log``: passed, skipped, failed counts and seconds."""
    found = list(_SUMMARY.finditer(log))
    if not found:
        return None
    last = found[-1]
    counts = {
        word: int(n.replace(",", ""))
        for n, word in re.findall(
            r"([\d,]+) (passed|skipped|failed|errors?|deselected)", last["counts"]
        )
    }
    return {
        "passed": counts.get("passed", 0),
        "skipped": counts.get("skipped", 0),
        "failed": counts.get("failed", 0),
        "pytest_seconds": float(last["seconds"]),
    }


def make_record(logs: Path) -> dict:
    times = dict(line.split() for line in (logs / "times").read_text().splitlines())
    steps = {}
    for name in STEPS:
        if name not in times:
            raise SystemExit(f"error: --logs {logs} has no time for the step {name!r}")
        step: dict = {"seconds": int(times[name])}
        log = logs / f"{name}.log"
        tests = parse_pytest(log.read_text(errors="replace")) if log.is_file() else None
        if tests is not None:
            step.update(tests)
        steps[name] = step
    return {
        "command": "DIFFSIM_CI_RECORD=docs/records/ci.json bash .ci/run",
        "date": datetime.date.today().isoformat(),
        "machine": f"{os.cpu_count()} cores, {_cpu()}",
        "python": platform.python_version(),
        "steps": steps,
        "total_seconds": sum(s["seconds"] for s in steps.values()),
    }


def duration(seconds: float) -> str:
    """``8 min 41 s``, ``1 h 02 min``, ``37 s``."""
    s = round(seconds)
    if s >= 3600:
        return f"{s // 3600} h {s % 3600 // 60:02d} min"
    if s >= 60:
        return f"{s // 60} min {s % 60} s"
    return f"{s} s"


def time_cell(step: dict) -> str:
    text = duration(step["seconds"])
    if "passed" in step:
        tests = f"{step['passed']:,} passed"
        if step["skipped"]:
            tests += f", {step['skipped']} skipped"
        text += f" ({tests}; pytest {duration(step['pytest_seconds'])})"
    return text


def header_cell(record: dict) -> str:
    cores = record["machine"].split(",", 1)[0]
    return f"time with set-up ({cores}, {record['date']})"


def total_text(record: dict) -> str:
    conditions = f", {record['conditions']}" if record.get("conditions") else ""
    return (
        f"<!-- ci-total -->{duration(record['total_seconds'])} on {record['machine']}, "
        f"{record['date']}{conditions} (`{record['command']}`; record: "
        f"[docs/records/ci.json](docs/records/ci.json))<!-- /ci-total -->"
    )


def _row_step(line: str) -> str | None:
    # `bash scripts/docs [serve]` is the build's row; `bash scripts/docs serve` alone is not
    m = re.match(r"\| `bash scripts/([\w-]+)( [^`]*)?` \|", line)
    return m[1] if m and m[1] in STEPS and m[2] != " serve" else None


def render(text: str, record: dict, *, page: str = "README.md") -> str:
    """``text`` with its CI rows, their table headers and the total sentence from ``record``."""
    lines = text.split("\n")
    for i, line in enumerate(lines):
        name = _row_step(line)
        if name is None:
            continue
        cells = line.rstrip().rstrip("|").split(" | ")
        lines[i] = " | ".join([*cells[:-1], time_cell(record["steps"][name])]) + " |"
        for j in range(i - 1, -1, -1):  # the table's header row
            if lines[j].startswith("| command |"):
                head = lines[j].rstrip().rstrip("|").split(" | ")
                lines[j] = " | ".join([*head[:-1], header_cell(record)]) + " |"
                break
    out = "\n".join(lines)
    total = total_text(record)
    if page != "README.md":
        total = total.replace("](docs/records/", "](records/")
    return _TOTAL.sub(lambda _: total, out)


def main(argv: list[str]) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--record", type=Path, default=RECORD)
    parser.add_argument("--logs", type=Path, help="write the record from .ci/run's logs")
    parser.add_argument("--write", action="store_true", help="put the record into the pages")
    parser.add_argument(
        "--conditions", help="note how the run was made (e.g. other jobs on the cores)"
    )
    args = parser.parse_args(argv)
    if args.logs is not None:
        record = make_record(args.logs)
        args.record.parent.mkdir(parents=True, exist_ok=True)
        args.record.write_text(json.dumps(record, indent=2) + "\n")
        print(f"ci_numbers: recorded {args.record}: total {duration(record['total_seconds'])}")
    if args.conditions is not None:
        record = json.loads(args.record.read_text())
        record["conditions"] = args.conditions
        args.record.write_text(json.dumps(record, indent=2) + "\n")
    if args.write:
        record = json.loads(args.record.read_text())
        for page in PAGES:
            path = ROOT / page
            path.write_text(render(path.read_text(), record, page=page))
            print(f"ci_numbers: wrote the CI times into {page}")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
