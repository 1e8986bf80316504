"""A separate virtualenv for MuJoCo 4.0's system-identification toolbox (``mujoco.sysid``).

The main environment pins ``mujoco==3.17.0`` for MJX, so ``mujoco[sysid]==4.0.0`` lives in
its own venv, ``<repo>/.venv-sysid``, made here on first use. The benchmark talks to it
through :func:`run`: a JSON spec in, a JSON list of result rows out, computed by
``_sysid_peer.py`` running inside that venv. Standard library only.

    python benchmarks/_sysid_env.py      # create / check the venv, print its python
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import tempfile
from pathlib import Path

REQUIREMENT = "mujoco[sysid]==4.0.0"
ROOT = Path(__file__).resolve().parent.parent
VENV = ROOT / ".venv-sysid"
PEER = Path(__file__).resolve().parent / "_sysid_peer.py"
_STAMP = VENV / ".sysid-installed"
_CHECK = (
    "import mujoco, mujoco.sysid, sys; sys.exit(0 if mujoco.__version__.startswith('4.0') else 1)"
)


def _python() -> Path:
    return VENV / ("Scripts/python.exe" if os.name == "nt" else "bin/python")


def _usable(py: Path) -> bool:
    if not py.exists():
        return False
    r = subprocess.run([str(py), "-c", _CHECK], capture_output=True)
    return r.returncode == 0


def ensure() -> str:
    """The sysid venv's python, creating the venv and installing the toolbox if needed."""
    py = _python()
    if py.exists() and _STAMP.exists() and _STAMP.read_text().strip() == REQUIREMENT:
        return str(py)
    if not _usable(py):
        print(
            f"[sysid] installing {REQUIREMENT!r} into {VENV} (separate from the main venv, "
            "which pins mujoco 3.17 for MJX)",
            file=sys.stderr,
            flush=True,
        )
        if not py.exists():
            subprocess.run([sys.executable, "-m", "venv", str(VENV)], check=True)
        subprocess.run(
            [
                str(py),
                "-m",
                "pip",
                "install",
                "--quiet",
                "--disable-pip-version-check",
                REQUIREMENT,
            ],
            check=True,
        )
        if not _usable(py):
            raise RuntimeError(f"{VENV}: mujoco.sysid 4.0 is not importable after installing")
    _STAMP.write_text(REQUIREMENT + "\n")
    return str(py)


def run(spec: dict, timeout: float | None = None) -> list[dict]:
    """Run the mujoco.sysid peer on ``spec`` (see ``_sysid_peer.py``); its result rows."""
    py = ensure()
    with tempfile.TemporaryDirectory(prefix="sysid-") as tmp:
        spec_path = Path(tmp) / "spec.json"
        out_path = Path(tmp) / "out.json"
        spec_path.write_text(json.dumps(spec))
        try:
            r = subprocess.run(
                [py, str(PEER), str(spec_path), str(out_path)],
                capture_output=True,
                text=True,
                timeout=timeout,
            )
        except subprocess.TimeoutExpired as e:
            tail = (e.stderr or b"")[-4000:]
            tail = tail.decode(errors="replace") if isinstance(tail, bytes) else tail
            raise RuntimeError(f"mujoco.sysid peer timed out after {timeout} s:\n{tail}") from e
        if r.returncode != 0 or not out_path.exists():
            raise RuntimeError(
                f"mujoco.sysid peer failed (exit {r.returncode}):\n{r.stderr[-4000:]}"
            )
        return json.loads(out_path.read_text())


if __name__ == "__main__":
    print(ensure())
