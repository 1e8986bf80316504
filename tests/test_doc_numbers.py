"""The benchmark summary in docs/benchmarks.md is the recorded run's
(docs/benchmarks.json, written by ``python -m benchmarks ... --json``; issue 24: numbers
in the docs come from a record and a test fails when they disagree)."""

from __future__ import annotations

import json
import math
import pathlib
import re

import pytest

ROOT = pathlib.Path(__file__).resolve().parents[1]
ROWS = {  # the table's row label -> the record's row
    "**diffsim**, reverse": "diffsim",
    "**diffsim**, forward": "diffsim-fwd",
    "plain JAX": "jax",
    "NVIDIA Warp": "warp",
    "Taichi": "taichi",
    "PyTorch": "torch",
    "compiled C reference": "compiled-C",
}
UNITS = {"µs": 1e-6, "ms": 1e-3, "s": 1.0}
_CELL = re.compile(r"^([\d.]+) (µs|ms|s)(?: \(([\d.]+)×\))?$")


def _two_figures(x: float) -> float:
    return float(f"{x:.2g}")


def test_benchmark_summary_table_is_the_record():
    record = json.loads((ROOT / "docs/benchmarks.json").read_text())
    cases = {c["n"]: c["rows"] for c in record["cases"]}
    text = (ROOT / "docs/benchmarks.md").read_text()
    header = "| framework | N = 1 | N = 4,096 | N = 65,536 |"
    lines = text.split(header, 1)[1].splitlines()[2:]
    sizes = [1, 4096, 65536]
    checked = 0
    for line in lines:
        if not line.startswith("|"):
            break
        cells = [c.strip().replace("**", "") for c in line.strip("|").split("|")]
        key = next(
            v for k, v in ROWS.items() if cells[0].replace("**", "").startswith(k.replace("**", ""))
        )
        for n, cell in zip(sizes, cells[1:]):
            m = _CELL.match(cell)
            assert m, (cells[0], cell)
            rows = cases[n]
            t = rows[key]["gradient_s"]
            shown = float(m[1]) * UNITS[m[2]]
            assert math.isclose(shown, _two_figures(t / UNITS[m[2]]) * UNITS[m[2]], rel_tol=1e-9), (
                f"{cells[0]} at N = {n}: the table shows {cell}, the record {t:.3g} s"
            )
            if m[3] is not None:  # ÷ the fastest diffsim row, ratio of medians
                best = min(rows["diffsim"]["gradient_s"], rows["diffsim-fwd"]["gradient_s"])
                assert abs(float(m[3]) - t / best) <= 0.03 * t / best + 0.05, (cells[0], n, cell)
            checked += 1
    assert checked == len(ROWS) * len(sizes)


def _battery_rows(text: str, first_name: str) -> list[list[str]]:
    """The rows of the validation table that starts with the case ``first_name``."""
    start = text.index(f"| {first_name} |")
    rows = []
    for line in text[start:].splitlines():
        if not line.startswith("|"):
            break
        rows.append([c.strip() for c in line.strip("|").split("|")])
    return rows


def test_battery_counts_and_tables_are_the_battery():
    """The doctor's case counts in the README and the docs, and the validation tables' cases
    and expected flags, are ``diffsim.systems.battery.cases()`` and ``held_out_cases()`` (issue 24:
    the README said 34 cases where ``--battery`` ran 22)."""
    from diffsim.systems.battery import cases, held_out_cases

    calibration, held = cases(), held_out_cases()
    n, c, h = len(calibration) + len(held), len(calibration), len(held)
    readme = (ROOT / "README.md").read_text()
    assert f"{n} cases whose answer the\n  physics knows ({c} calibration, {h} held out" in readme
    assert f"({n} cases, {h} of them held out)" in (ROOT / "docs/concepts/doctor.md").read_text()
    validation = (ROOT / "docs/validation.md").read_text()
    assert f"\n{c} cases: 0 false alarms, 0 misses, 0 wrong verdicts" in validation
    assert f"The {h} cases below" in validation
    for battery in (calibration, held):
        rows = _battery_rows(validation, battery[0].name)
        assert [r[0] for r in rows] == [case.name for case in battery]
        for r, case in zip(rows, battery):
            expected = ", ".join(sorted(case.expected)) or "—"
            assert r[1] == expected, (case.name, r[1], expected)


IDENTIFY_METHODS = ("diffsim.identify", "SciPy", "mujoco.sysid", "CMA-ES")


def test_identify_guide_tables_are_the_recorded_run():
    """Every benchmark row in the identification guide is a row of the recorded run
    (docs/records/identify-benchmark.txt, the output of ``python -m benchmarks.identify``),
    character for character, and every task of the record is in the guide."""
    record = (ROOT / "docs/records/identify-benchmark.txt").read_text()
    guide = (ROOT / "docs/guides/identify.md").read_text()
    section = guide.split("## How it compares", 1)[1]
    rows = [
        line
        for line in section.splitlines()
        if line.startswith("| ") and line[2:].startswith(IDENTIFY_METHODS)
    ]
    recorded = set(record.splitlines())
    assert len(rows) >= 12, rows
    missing = [r for r in rows if r not in recorded]
    assert not missing, missing
    tasks = re.findall(r"^## (.+)$", record, flags=re.M)
    assert tasks and all(t in section for t in tasks), tasks


def _control_blocks(record: list[str]) -> list[list[str]]:
    """The record's tables: a title line ("task: ..."), the header, the estimators' rows,
    the evolution strategies' note and rows."""
    starts = [i for i, line in enumerate(record) if re.match(r"^[a-z-]+: the start costs", line)]
    return [record[a:b] for a, b in zip(starts, [*starts[1:], len(record)], strict=True)]


def _check_control_record(
    name: str, tasks: list[str], labels: tuple[str, ...] = ("FoBG", "ZoBG", "AoBG", "auto",
                                                            "OpenAI-ES", "sep-CMA-ES")
) -> None:  # fmt: skip
    record = (ROOT / "docs/records" / name).read_text().splitlines()
    assert record[0].startswith("# python -m benchmarks.control --task " + tasks[0])
    guide = (ROOT / "docs/guides/control.md").read_text()
    blocks = _control_blocks(record)
    assert [b[0].split(":")[0] for b in blocks] == tasks
    for block in blocks:
        rows = [r for r in block[2:] if not r.startswith("evosax")]
        assert [r.split()[0].rstrip(",") for r in rows] == list(labels)
        assert "```text\n" + "\n".join(block[1:]) + "\n```" in guide


def test_control_guide_table_is_the_recorded_run():
    """The tennis table in the control guide is the record's rows verbatim (the record holds
    the command that produced it), the evolution strategies' rows included."""
    _check_control_record("control-tennis.txt", ["tennis"])


def test_control_guide_mujoco_tables_are_the_recorded_run():
    """The two MuJoCo tasks' tables in the control guide are the record's rows verbatim,
    under the command that produced them."""
    _check_control_record("control-mujoco.txt", ["pendulum", "reacher-open"])


def test_control_guide_trajopt_tables_are_the_recorded_run():
    """The three trajectory-optimisation tables in the control guide are the record's rows
    verbatim, one per task, under the command that produced them."""
    _check_control_record("control-trajopt.txt", ["push-soft", "push-stiff", "friction"])


def test_control_guide_auto_every_tables_are_the_recorded_run():
    """The tables of auto deciding once in K steps, beside FoBG, are the record's rows
    verbatim, under the command that made them."""
    tasks = ["tennis", "push-soft", "push-stiff", "friction", "pendulum"]
    _check_control_record("control-auto-every.txt", tasks, ("FoBG", "auto"))


def _numbers(row: str) -> tuple[str, str]:
    """A control table row's label and its loss, score and evaluation columns (the times and
    an evolution strategy's population note left out)."""
    label = re.split(r"\s{2,}", row.strip())[0]
    body = row.split("  population")[0].rsplit(maxsplit=2)[0]
    return label, " ".join(body[len(label) :].split())


def test_control_curves_record_reproduces_the_tables_and_is_in_the_guide():
    """The learning-curve run (docs/records/control-curves.txt, every estimator and both
    evolution strategies on four tasks, 5 seeds, with the figure) reproduces the 5-seed
    trajectory-optimisation tables row for row (same keys: loss, score and evaluations
    equal; only times differ), and its tennis table and figure are in the control guide."""
    record = (ROOT / "docs/records/control-curves.txt").read_text().splitlines()
    assert record[0].startswith(
        "# python -m benchmarks.control --task push-soft push-stiff friction tennis --seeds 5"
    )
    blocks = {b[0].split(":")[0]: b for b in _control_blocks(record)}
    assert list(blocks) == ["push-soft", "push-stiff", "friction", "tennis"]
    trajopt = (ROOT / "docs/records/control-trajopt.txt").read_text().splitlines()
    for old in _control_blocks(trajopt):
        new = dict(_numbers(r) for r in blocks[old[0].split(":")[0]][2:] if "evosax" not in r)
        rows = [_numbers(r) for r in old[2:] if not r.startswith("evosax")]
        assert len(rows) == 6 and len(new) == 8, (rows, new)
        for label, numbers in rows:
            assert new[label] == numbers, (old[0], label, new[label], numbers)
    guide = (ROOT / "docs/guides/control.md").read_text()
    assert "```text\n" + "\n".join(blocks["tennis"][1:]) + "\n```" in guide
    assert "](../figures/control_curves.png)" in guide


@pytest.mark.parametrize(
    ("name", "task"), [("control-apg.txt", "pendulum"), ("control-apg-tennis.txt", "tennis")]
)
def test_control_guide_apg_rows_are_the_recorded_run(name, task):
    """The Brax APG rows in the control guide are the record's verbatim, under the command
    that produced them."""
    record = (ROOT / "docs/records" / name).read_text().splitlines()
    assert record[0].startswith(f"# python -m benchmarks.control --task {task}")
    rows = [r for r in record if r.startswith("Brax APG ") and "Brax loop" in r]
    labels = ["Brax APG", "Brax APG (linear)"] + (["Brax APG (H=200)"] if task == "tennis" else [])
    assert [r.split("  ")[0].strip() for r in rows] == labels
    guide = (ROOT / "docs/guides/control.md").read_text()
    assert "```text\n" + "\n".join([record[2], *rows]) + "\n```" in guide


def test_mujoco_guide_gradient_cost_table_is_the_recorded_run():
    """The MuJoCo guide's gradient-cost table (half_cheetah) holds the recorded run's numbers
    (docs/records/mujoco-benchmark.txt, the output of ``python -m benchmarks.mujoco``), and
    the ratios its text states follow from them."""
    record = (ROOT / "docs/records/mujoco-benchmark.txt").read_text().splitlines()
    assert record[0].startswith("# .venv/bin/python -m benchmarks.mujoco --models half_cheetah")
    row = dict(kv.split("=", 1) for kv in record[1].split())
    v = {k: float(x) for k, x in row.items() if k not in ("model",)}
    guide = (ROOT / "docs/guides/mujoco-brax.md").read_text()
    table = guide.split("### Gradient cost on the zoo", 1)[1].split("## Sharp bits", 1)[0]
    ms = lambda s: f"{1000 * v[s]:.1f} ms"  # noqa: E731
    for cell in (
        f"| {v['forward_compile_s']:.1f} s | {ms('forward_run_s')} |",
        f"| {v['grad_compile_s']:.1f} s | {ms('grad_run_s')} |",
        f"| {v['grad_64_worlds_compile_s']:.1f} s | {v['grad_64_worlds_run_s']:.2f} s "
        f"({1000 * v['grad_64_worlds_run_s'] / 64:.1f} ms per world) |",
        f"| {v['mjx_it1_compile_s']:.1f} s | {1000 * v['mjx_it1_run_s']:.0f} ms | 0.16 |",
        f"| — | {ms('c_transition_fd_s')} | 6.5·10⁻⁷ |",
        f"| — | {v['c_transition_fd_64_worlds_s']:.2f} s "
        f"({1000 * v['c_transition_fd_64_worlds_s'] / 64:.1f} ms per world) |",
        f"| — | {1000 * v['c_fd_s']:.0f} ms | (the reference) |",
    ):
        assert cell in table, cell
    assert f"at {v['grad_run_s'] / v['forward_run_s']:.1f} forward rollouts" in table
    assert f"{v['grad_run_s'] / v['mjx_it1_run_s']:.2f}× the cost" in table
    assert f"{v['grad_run_s'] / v['c_transition_fd_s']:.1f}× faster for one world" in table
    per_world = v["grad_64_worlds_run_s"] / v["c_transition_fd_64_worlds_s"]
    assert f"{per_world:.1f}× faster per world at 64 worlds" in table
    assert f"{v['mjx_it1_rel_error']:.2f}" == "0.16" and f"{v['grad_rel_error']:.1e}" == "6.1e-07"


def _three_figures(x: float) -> str:
    return f"{x:.0f}" if x >= 100 else f"{x:.1f}" if x >= 10 else f"{x:.2f}"


def test_mujoco_guide_zoo_table_is_the_recorded_run():
    """The MuJoCo guide's whole-zoo table (one world) holds the recorded run's compile and
    run times and the gradient/forward ratios that follow from them
    (docs/records/mujoco-benchmark-zoo.txt, the output of ``python -m benchmarks.mujoco``)."""
    record = (ROOT / "docs/records/mujoco-benchmark-zoo.txt").read_text().splitlines()
    assert record[0].startswith("# .venv/bin/python -m benchmarks.mujoco --models half_cheetah,")
    guide = (ROOT / "docs/guides/mujoco-brax.md").read_text()
    table = guide.split("The whole zoo, idle machine", 1)[1].split("Against the goals", 1)[0]
    rows = [dict(re.findall(r"(\w+)=(\S+)", line)) for line in record[1:6]]
    assert [r["model"] for r in rows] == ["half_cheetah", "hopper", "walker2d", "ant", "humanoid"]
    for r in rows:
        v = {k: float(x) for k, x in r.items() if k.endswith("_s")}
        line = next(ln for ln in table.splitlines() if ln.startswith(f"| {r['model']} ("))
        for stage in ("forward", "grad"):
            cell = (f"{_three_figures(v[f'{stage}_compile_s'])} s / "
                    f"{_three_figures(1000 * v[f'{stage}_run_s'])} ms")  # fmt: skip
            assert cell in line, (cell, line)
        assert f"| {v['grad_run_s'] / v['forward_run_s']:.1f}× |" in line, line
        assert f"| {1000 * v['c_fd_s']:.0f} ms |" in line or f"| {v['c_fd_s']:.2f} s |" in line


def test_legged_identification_prose_is_the_recorded_run():
    """The numbers the guide's and README's prose quote for the half_cheetah task are the
    record's: diffsim's rollout-equivalents and warm wall time, mujoco.sysid's rollouts and
    time, CMA-ES's ratio."""
    record = (ROOT / "docs/records/identify-benchmark.txt").read_text()
    record = record.split("## half_cheetah")[-1].split("\n# ")[0]  # the last run's
    cells = {
        line.split(" | ")[0][2:]: line.split(" | ")
        for line in record.splitlines()
        if line.startswith("| ") and not line.startswith("| method")
    }

    def median(method: str, col: int) -> float:
        return float(cells[method][col].split()[0])

    ours = "diffsim.identify (exact Jacobian, LM; trust='off')"
    sysid = [m for m in cells if m.startswith("mujoco.sysid")]
    rollouts = sorted(int(median(m, 3)) for m in sysid)
    seconds = sorted(median(m, 4) for m in sysid)
    span = f"{seconds[0]:.2f}–{seconds[-1]:.2f} s"
    cma = next(m for m in cells if m.startswith("CMA-ES"))
    guide = (ROOT / "docs/guides/identify.md").read_text()
    readme = (ROOT / "README.md").read_text()
    ours_n, ours_s = int(median(ours, 3)), median(ours, 4)
    for text in (guide, " ".join(readme.split())):
        assert f"{ours_n} rollout-equivalents" in text
        assert f"{rollouts[0]}–{rollouts[-1]}" in text
    assert f"({ours_s:.1f} s)" in guide and f"({span};" in guide
    assert f"{ours_s:.1f} s warm against" in " ".join(readme.split())
    assert f"rollouts and {span}." in " ".join(readme.split())
    assert f"CMA-ES\nneeds {median(cma, 3) / ours_n:.0f}× the rollouts" in guide


def test_identify_guide_push_sweep_is_the_recorded_run():
    """The identification guide's table of the push task's landscape is
    docs/records/identify-push-sweep.txt (``python -m benchmarks.identify --push-sweep``),
    each cell to its two shown figures, and the prose's hop count is the record's."""
    record = (ROOT / "docs/records/identify-push-sweep.txt").read_text()
    guide = (ROOT / "docs/guides/identify.md").read_text()
    hops = re.search(r"fewer than 4 corners on (\d+) of (\d+) steps", record)
    assert hops and f"on {hops[1]} of the {hops[2]}" in guide.replace("\n", " ")
    rows = {}
    for line in record.splitlines():
        parts = line.split()
        if parts and parts[0].endswith(":box"):
            rows[parts[0].split(":")[0]] = [float(c) for c in parts[1:]]
    assert len(rows) == 3
    names = {"mass": "body_mass", "friction": "geom_friction", "solref": "geom_solref"}
    table = guide.split("| parameter × |", 1)[1].splitlines()[2:5]
    for line in table:
        cells = [c.strip() for c in line.strip("|").split("|")]
        want = rows[names[cells[0]]]
        assert len(cells[1:]) == len(want), cells
        for shown, value in zip(cells[1:], want):
            assert float(shown) == _two_figures(value), (cells[0], shown, value)


def test_identify_guide_thrown_box_lift_is_the_recorded_run():
    """The guide's thrown-box lifts are the push-sweep record's."""
    record = (ROOT / "docs/records/identify-push-sweep.txt").read_text()
    guide = (ROOT / "docs/guides/identify.md").read_text().replace("\n", " ")
    lifts = dict(re.findall(r"thrown at ([\d.]+) m/s \(no finger\): lifts ([\d.]+) mm", record))
    assert set(lifts) == {"0.3", "1"}
    assert f"lifts {lifts['0.3']} mm at 0.3 m/s and {lifts['1']} mm at 1 m/s" in guide


def test_control_guide_budget_tables_are_the_recorded_run():
    """The control guide's equal-budget tables (tennis, pendulum) are
    docs/records/control-auto-budget.txt's rows verbatim, and the prose's scores and
    evaluations of the budgeted rows are the record's."""
    record = (ROOT / "docs/records/control-auto-budget.txt").read_text().splitlines()
    assert record[0].startswith("# python -m benchmarks.control --task tennis")
    guide = (ROOT / "docs/guides/control.md").read_text()
    blocks = {b[0].split(":")[0]: b for b in _control_blocks(record)}
    assert list(blocks) == ["tennis", "push-soft", "push-stiff", "friction", "pendulum"]
    for task in ("tennis", "pendulum"):
        assert "```text\n" + "\n".join(blocks[task][1:]) + "\n```" in guide
    prose = guide.replace("\n", " ")
    budgeted = {t: next(r for r in b if "'s " in r and r.startswith("auto")) for t, b in
                blocks.items()}  # fmt: skip
    for task in ("tennis", "pendulum"):
        score = re.search(r"(\d+)% \[(\d+)%, (\d+)%\]", budgeted[task])
        assert score and f"{score[1]} % [{score[2]} %, {score[3]} %]" in prose, task
    spent = {t: int(r.split()[-3]) for t, r in budgeted.items()}
    assert f"({spent['tennis']:,}:" in prose and f"({spent['pendulum']:,} spent" in prose
    trajopt = ", ".join(f"{spent[t]:,}" for t in ("push-soft", "push-stiff", "friction"))
    assert trajopt.replace(", 632", " and 632") in prose


def test_identify_guide_slide_prose_is_the_recorded_run():
    """The shoved-box prose quotes the record's last slide table: the default fit's best
    and worst errors, the probe's cost drop on seed 0, MuJoCo's toolbox's best seed and
    CMA-ES's rollout ratio."""
    record = (ROOT / "docs/records/identify-benchmark.txt").read_text()
    block = record.split("## shoved box")[-1].split("\n# ")[0].split("\n## ")[0]
    cells = {
        line.split(" | ")[0][2:]: line.split(" | ")
        for line in block.splitlines()
        if line.startswith("| ") and not line.startswith("| method")
    }

    def spread(method: str) -> tuple[float, float, float]:
        med, rng = cells[method][1].split(" ", 1)
        low, high = rng.strip("()").split("–")
        return float(med), float(low), float(high)

    guide = " ".join((ROOT / "docs/guides/identify.md").read_text().split())
    _, best, worst = spread(
        "diffsim.identify (default trust='act': the doctor's checks and remedy)"
    )
    med = spread("diffsim.identify (default trust='act': the doctor's checks and remedy)")[0]
    assert f"largest error {100 * best:.2f} %" in guide and f"({100 * best:.2f} %)" in guide
    assert f"({100 * med:.1f} % and {100 * worst:.1f} % off" in guide
    drop = re.search(r"lowers the cost by ([\d.]+)%", block)
    assert drop and f"lowers the cost by {float(drop[1]):.0f} %" in guide
    sysid = spread("mujoco.sysid (default optimizer)")[1]
    assert f"within 1 % on one seed ({100 * sysid:.2f} %)" in guide and sysid < 0.01
    cma = next(m for m in cells if m.startswith("CMA-ES"))
    assert f"at {float(cells[cma][3].split('×')[1].rstrip(')')):.0f}× them" in guide


def test_control_guide_verdict_gap_prose_is_the_recorded_run():
    """The friction paragraph on why ``auto`` follows FoBG quotes docs/records/verdict-gap.txt
    (``python -m benchmarks.verdict_gap``) at iterate 20: the loss, the cosine of the exact
    and smoothed gradients, the norm gap against its tolerance and z, auto's per-coordinate
    z at its three sample sizes and the norm test's z at N = 10 and 512."""
    record = (ROOT / "docs/records/verdict-gap.txt").read_text()
    block = record.split("iterate 20:")[1].split("\niterate ")[0]
    guide = " ".join((ROOT / "docs/guides/control.md").read_text().split())
    loss = re.search(r"L = ([\d.]+);", block)
    autos = re.findall(r"N=(\d+): exact z=([-\d.]+)", block)
    cos = re.search(r"cos\(∇L, ḡ⁰\) = ([-\d.]+)", block)
    gap = re.search(r"− ΣSE² = (\S+) ± \S+, \(η‖ḡ⁰‖\)² = (\S+), z = ([-\d.]+);", block)
    norm = dict(re.findall(r"N=(\d+): z=([-\d.]+)", block.split("auto's sizes")[1]))
    assert loss and cos and gap and len(autos) == 3 and {"10", "512"} <= norm.keys()
    assert f"(loss {loss[1]}," in guide and f"cos(∇L, ḡ⁰) = {cos[1]}" in guide
    assert f"noise {gap[1]} against (η‖ḡ⁰‖)² = {gap[2]}, z = {gap[3]})" in guide
    (n1, z1), (n2, z2), (n3, z3) = autos
    assert f"z = {z1} (N = {n1}), {z2} (N = {n2}) and {z3} (N = {n3})" in guide
    assert f"at N ≈ 512 (z = {norm['512']})" in guide and f"N = 10 (z = {norm['10']})" in guide
    # the finding itself: a gap far beyond tolerance in norm that auto's statistic misses
    assert float(gap[3]) > 5 and all(float(z) < 2 for _, z in autos)
