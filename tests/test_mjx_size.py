"""Issue 49 item 8: a model too large for MJX is refused before MJX builds it, with the
estimate; the estimate checked against the arrays MJX itself allocates."""

import os

import numpy as np
import pytest

mujoco = pytest.importorskip("mujoco")
pytest.importorskip("mujoco.mjx")

from mujoco import mjx as mj_mjx  # noqa: E402

from diffsim.engines import mjx  # noqa: E402
from diffsim.engines.mjx._size import estimate  # noqa: E402


def _spheres(n: int, attrs: str = "") -> str:
    bodies = "".join(
        f'<body pos="{0.3 * i} 0 1"><freejoint/><geom type="sphere" size="0.1" {attrs}/></body>'
        for i in range(n)
    )
    return f'<mujoco><worldbody><geom type="plane" size="10 10 .1"/>{bodies}</worldbody></mujoco>'


def _mjx_rows(m) -> int:
    d = mj_mjx.make_data(m)
    return int(np.shape(d._impl.efc_J if hasattr(d, "_impl") else d.efc_J)[0])


@pytest.mark.parametrize("attrs", ["", 'condim="1"', 'condim="6"'])
def test_estimate_is_mjx_own_row_count_for_spheres(attrs):
    """Spheres on a plane: one contact per pair in MJX, so the estimate's rows are exactly
    the rows MJX allocates: 5 bodies, 5 + 10 pairs; condim 3 → 4 rows, 1 → 1, 6 → 10 (a
    sphere–plane pair takes the larger condim: the plane's 3)."""
    m = mujoco.MjModel.from_xml_string(_spheres(5, attrs))
    est = estimate(m)
    assert est.pairs == 15
    assert est.rows == _mjx_rows(m)
    assert est.nbytes == est.rows * m.nv * 8


def test_estimate_is_a_lower_bound_on_a_shipped_model():
    """gymnasium's walker2d (joint limits and capsule pairs add rows the estimate leaves
    out): the estimate stays at or below MJX's count."""
    gym = pytest.importorskip("gymnasium")
    path = os.path.join(os.path.dirname(gym.__file__), "envs/mujoco/assets/walker2d_v5.xml")
    m = mujoco.MjModel.from_xml_path(path)
    assert 0 < estimate(m).rows <= _mjx_rows(m)


def test_load_refuses_a_model_over_max_bytes_before_building_it():
    """30 spheres: 435 + 30 pairs, 1,860 rows × nv 180 × 8 bytes = 2.68 MB; refused at a
    1 MB limit with the estimate in the message, loaded at the default limit."""
    xml = _spheres(30)
    with pytest.raises(ValueError, match=r"465 geom pairs .* 1,860 constraint rows × nv = 180"):
        mjx.load(xml, max_bytes=1_000_000)
    with pytest.raises(ValueError, match="max_bytes must be"):
        mjx.load(xml, max_bytes=0)
    assert mjx.load(xml).nv == 180


def test_diagnose_refuses_two_thousand_free_bodies(tmp_path):
    """The fuzzer's case: 2,000 free spheres spent 210 s in `diagnose --mjcf`, then 'out of
    memory … 715 GiB'. Now one line with the estimate (716 GiB: 2,001,000 pairs × 4 rows ×
    12,000 dofs × 8 bytes), exit 2, before MJX builds the model."""
    from typer.testing import CliRunner

    from diffsim.cli import app

    path = tmp_path / "big.xml"
    path.write_text(_spheres(2000))
    out = CliRunner().invoke(app, ["diagnose", "--mjcf", str(path)])
    assert out.exit_code == 2, out.output
    assert "2,001,000 geom pairs" in out.output and "716 GiB" in out.output
