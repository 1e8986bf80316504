"""The set-up the README's two commands run (scripts/_venv.sh): it says what it does, and
skips the install when nothing it depends on changed (issue 24)."""

from __future__ import annotations

import pathlib
import subprocess

ROOT = pathlib.Path(__file__).resolve().parents[1]


def _ensure(tmp_path: pathlib.Path, *spec: str, force: bool = False) -> tuple[str, list[str]]:
    env = {"PATH": "/usr/bin:/bin", "DIFFSIM_SETUP_FORCE": "1" if force else "0"}
    script = (
        f'set -euo pipefail; source "{ROOT}/scripts/_venv.sh"; ensure_venv venv {" ".join(spec)}'
    )
    res = subprocess.run(
        ["bash", "-c", script], cwd=tmp_path, env=env, capture_output=True, text=True, timeout=60
    )
    assert res.returncode == 0, res.stderr
    calls = (tmp_path / "calls.log").read_text().splitlines()
    (tmp_path / "calls.log").write_text("")
    return res.stderr, calls


def test_setup_announces_itself_and_skips_an_unchanged_install(tmp_path):
    # a stand-in virtualenv whose python logs what it is asked to run (no network, no pip)
    bin_dir = tmp_path / "venv" / "bin"
    bin_dir.mkdir(parents=True)
    python = bin_dir / "python"
    python.write_text(
        f'#!/bin/bash\nif [ "$1" = --version ]; then echo "Python 3.11.7"; exit 0; fi\n'
        f'echo "$*" >> "{tmp_path}/calls.log"\n'
    )
    python.chmod(0o755)
    (tmp_path / "calls.log").write_text("")
    (tmp_path / "pyproject.toml").write_text('[project]\nname = "x"\n')

    said, calls = _ensure(tmp_path, "-e", '".[test]"')
    assert "setup: pip install -e .[test] into venv" in said and "setup: done in" in said
    assert calls == ["-m pip install -q --upgrade pip", "-m pip install -q -e .[test]"]

    said, calls = _ensure(tmp_path, "-e", '".[test]"')  # nothing changed: no pip at all
    assert "up to date" in said and calls == []

    said, calls = _ensure(tmp_path, "-e", '".[docs]"')  # other extras: installed
    assert calls[-1] == "-m pip install -q -e .[docs]"

    (tmp_path / "pyproject.toml").write_text('[project]\nname = "x"\nversion = "2"\n')
    said, calls = _ensure(tmp_path, "-e", '".[test]"')  # pyproject.toml changed: reinstalled
    assert calls[-1] == "-m pip install -q -e .[test]"

    said, calls = _ensure(tmp_path, "-e", '".[test]"', force=True)
    assert calls[-1] == "-m pip install -q -e .[test]"

    (tmp_path / "reqs.txt").write_text("jax==1\n")
    _ensure(tmp_path, "-r", "reqs.txt")
    (tmp_path / "reqs.txt").write_text("jax==2\n")  # a requirement file changed
    said, calls = _ensure(tmp_path, "-r", "reqs.txt")
    assert calls[-1] == "-m pip install -q -r reqs.txt"


def test_the_readme_commands_use_the_shared_setup():
    for script in ("demo", "_setup.sh", "test-minimum"):
        text = (ROOT / "scripts" / script).read_text()
        assert "source scripts/_venv.sh" in text and "ensure_venv" in text, script
        assert "-m pip install" not in text, script  # every install goes through ensure_venv
