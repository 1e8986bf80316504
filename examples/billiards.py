"""DiffTaichi's billiards on diffsim: the loss over the cue's angle (DiffTaichi's ``scan``)
and DiffTaichi's recipe, with and without the time-of-impact correction.

Run: ``python examples/billiards.py [--angles N]`` (writes ``docs/figures/billiards.png``
and prints the recipe's losses; about two minutes on 2 CPU cores with the default 400
angles). Each landscape is one ``vmap`` over the angles of a ``lax.scan`` over the
1,023 steps; each recipe is one ``lax.scan`` of 200 gradient-descent steps.
"""

from __future__ import annotations

import argparse
import pathlib

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt
import numpy as np

from diffsim.systems import billiards

OUT = pathlib.Path(__file__).resolve().parents[1] / "docs" / "figures" / "billiards.png"
ZOOMS = (1.0, 0.1)
"""DiffTaichi's ``scan(zoom)``: the angles span π·zoom about the +x axis."""


def main(num_angles: int = 400, out: pathlib.Path = OUT) -> dict:
    """Draw the landscapes and the recipe's loss curves; return the recipe's losses."""
    fig, axes = plt.subplots(1, len(ZOOMS) + 1, figsize=(13, 3.4))
    for ax, zoom in zip(axes, ZOOMS):
        angles = billiards.scan_angles(num_angles, zoom=zoom)
        for toi, style in ((True, "-"), (False, "--")):
            losses = np.asarray(billiards.landscape(angles, toi))
            label = "with TOI" if toi else "without TOI (DiffTaichi's step minus x_inc)"
            ax.plot(np.degrees(np.asarray(angles)), losses, style, lw=1, label=label)
        ax.set(xlabel="angle of the cue's velocity (°)", ylabel="loss",
               title=f"billiards objective, zoom {zoom}")  # fmt: skip
    axes[0].legend(fontsize=8)
    finals = {}
    for toi in (True, False):
        result = billiards.train(toi)
        curve = np.asarray(result.history.loss)
        finals["toi" if toi else "no_toi"] = (float(curve[0]), float(result.loss))
        axes[-1].semilogy(curve, "-" if toi else "--", label="with TOI" if toi else "without TOI")
    axes[-1].set(xlabel="gradient-descent iteration (lr 0.01)", ylabel="loss",
                 title="DiffTaichi's recipe")  # fmt: skip
    axes[-1].legend(fontsize=8)
    fig.tight_layout()
    out.parent.mkdir(parents=True, exist_ok=True)
    fig.savefig(out, dpi=110)
    return finals


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description="DiffTaichi's billiards on diffsim")
    parser.add_argument("--angles", type=int, default=400, help="angles per landscape")
    args = parser.parse_args()
    for name, (start, end) in main(args.angles).items():
        print(f"{name}: loss {start:.5f} -> {end:.5f} after {billiards.ITERATIONS} iterations")
    print(f"figure: {OUT}")
