"""Plotly figures of the demo page, built from the numbers :mod:`._model` computed.

Nothing here simulates: each builder only places values it is given. Figures are plain
Plotly JSON dicts (building ``go.Figure`` objects validates every property and would cost
more than the simulation). The loss figure's traces have fixed positions (see
``LOSS_TRACE``) so the animation can patch the optimizer's path without resending the
curves.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from typing import Any

import numpy as np

from ..estimators import ESTIMATORS
from ..systems import projectile_wall as pw
from ._model import (
    ESTIMATOR_LABELS,
    SHORT_LABELS,
    SMOOTHED,
    V0_MAX,
    V0_MIN,
    Gradients,
    OptimizeRun,
    Point,
)

_PALETTE = ("#8c564b", "#e377c2", "#7f7f7f", "#bcbd22", "#17becf")
COLORS: dict[str, str] = {
    "exact": "#d62728",
    "zeroth": "#1f77b4",
    "first": "#ff7f0e",
    "alpha": "#2ca02c",
    SMOOTHED: "#9467bd",
}
"""One colour per estimator, shared by the slopes, the error bars and the table (a
newly registered estimator gets the next colour of a spare palette)."""
for _i, _name in enumerate(n for n in ESTIMATOR_LABELS if n not in COLORS):
    COLORS[_name] = _PALETTE[_i % len(_PALETTE)]

LOSS_TRACE = {
    "loss": 0,
    "gaussian": 1,
    "temperature": 2,
    "point": 3,
    **{f"slope-{name}": 4 + i for i, name in enumerate(ESTIMATOR_LABELS)},
    "path": 4 + len(ESTIMATOR_LABELS),
    "path-head": 5 + len(ESTIMATOR_LABELS),
}
"""Index of each trace in the loss figure."""

_FONT = {"family": "system-ui, -apple-system, Segoe UI, sans-serif", "size": 13}
_SLOPE_HALF_WIDTH = 0.45  # m/s either side of v₀
_SLOPE_MAX_RISE = 14.0  # loss units: steep slopes are drawn shorter, not off the chart


Figure = dict[str, Any]


def _base_layout(height: int, title: str) -> dict[str, Any]:
    return {
        "height": height,
        "margin": {"l": 55, "r": 15, "t": 34, "b": 45},
        "font": _FONT,
        "plot_bgcolor": "white",
        "paper_bgcolor": "white",
        "legend": {"orientation": "h", "y": -0.22, "x": 0, "font": {"size": 11}},
        "title": {"text": title, "x": 0.01, "font": {"size": 15}},
        "uirevision": "keep",
        "shapes": [],
        "annotations": [],
    }


def _list(a: Any) -> list[float]:
    return np.asarray(a, dtype=float).tolist()


def _line(x0: float, y0: float, x1: float, y1: float, **line: Any) -> dict[str, Any]:
    return {"type": "line", "x0": x0, "y0": y0, "x1": x1, "y1": y1, "line": line}


def empty_figure(height: int, text: str = "computing…") -> Figure:
    """A blank figure with a centred note (before the first numbers arrive)."""
    layout = _base_layout(height, "")
    layout["xaxis"] = {"visible": False}
    layout["yaxis"] = {"visible": False}
    layout["annotations"] = [
        {"text": text, "showarrow": False, "x": 0.5, "y": 0.5, "xref": "paper", "yref": "paper"}
    ]
    return {"data": [], "layout": layout}


def flight_figure(point: Point) -> Figure:
    """The flight path to scale (1 m on x = 1 m on y): launcher at the origin, the wall
    (2 m at x = 6), the target (x = 10), the path and where the ball ends."""
    blocked = not point.clears_wall and point.landing_x == pw.WALL_X
    c, s = math.cos(pw.ANGLE), math.sin(pw.ANGLE)
    data = [
        {
            "type": "scatter",
            "x": _list(point.path_x),
            "y": _list(point.path_y),
            "mode": "lines",
            "line": {"color": "#1f77b4", "width": 2.5},
            "name": "flight path",
            "hoverinfo": "skip",
        },
        {
            "type": "scatter",
            "x": [point.landing_x],
            "y": [float(point.path_y[-1])],
            "mode": "markers",
            "marker": {"size": 12, "color": "#d62728" if blocked else "#1f77b4"},
            "name": "stopped at the wall" if blocked else "landing",
            "hovertemplate": "x = %{x:.2f} m<extra></extra>",
        },
        {
            "type": "scatter",
            "x": [-0.35, 0.0, 0.7 * c],
            "y": [0.0, 0.0, 0.7 * s],
            "mode": "lines",
            "line": {"color": "#444", "width": 5},
            "name": "launcher (45°)",
            "hoverinfo": "skip",
        },
        {
            "type": "scatter",
            "x": [pw.TARGET],
            "y": [0.0],
            "mode": "markers+text",
            "marker": {"symbol": "x-thin", "size": 16, "line": {"width": 3, "color": "#2ca02c"}},
            "text": ["target"],
            "textposition": "top center",
            "name": "target (x = 10 m)",
            "hoverinfo": "skip",
        },
    ]
    layout = _base_layout(300, "flight path (to scale)")
    layout["showlegend"] = False
    layout["shapes"] = [
        _line(-1, 0, 21, 0, color="#888", width=1),
        {
            "type": "rect",
            "x0": pw.WALL_X - 0.06,
            "x1": pw.WALL_X + 0.06,
            "y0": 0,
            "y1": pw.WALL_HEIGHT,
            "fillcolor": "#555",
            "line": {"width": 0},
        },
    ]
    layout["annotations"] = [
        {"x": pw.WALL_X, "y": pw.WALL_HEIGHT, "text": "wall", "showarrow": False, "yshift": 10}
    ]
    layout["xaxis"] = {
        "range": [-0.6, 20.6],
        "title": {"text": "x (m)"},
        "gridcolor": "#eee",
        "zeroline": False,
    }
    layout["yaxis"] = {
        "range": [-0.3, 5.3],
        "title": {"text": "y (m)"},
        "gridcolor": "#eee",
        "zeroline": False,
        "scaleanchor": "x",
        "scaleratio": 1,
    }
    return {"data": data, "layout": layout}


def _slope_segment(v0: float, y: float, g: float) -> tuple[list[float], list[float]]:
    dv = _SLOPE_HALF_WIDTH
    if abs(g) * dv > _SLOPE_MAX_RISE:
        dv = _SLOPE_MAX_RISE / abs(g)
    return [v0 - dv, v0 + dv], [y - g * dv, y + g * dv]


def _curve(x: Any, y: Any, name: str, hover: str, **line: Any) -> dict[str, Any]:
    return {
        "type": "scatter",
        "x": _list(x),
        "y": _list(y),
        "mode": "lines",
        "line": line,
        "name": name,
        "hovertemplate": hover,
    }


def _loss_curves(
    curve_v0: np.ndarray,
    curve_loss: np.ndarray,
    gaussian: np.ndarray,
    temperature: np.ndarray,
    point: Point,
    sigma: float,
    tau: float,
) -> list[dict[str, Any]]:
    """The loss, F_σ and L_τ curves and the current point (traces 0 to 3 of ``LOSS_TRACE``)."""
    return [
        _curve(
            curve_v0,
            curve_loss,
            "loss (x − 10)²",
            "v₀ = %{x:.2f}<br>loss = %{y:.2f}<extra></extra>",
            color="#222",
            width=2,
        ),
        _curve(
            curve_v0,
            gaussian,
            f"E L(v₀ + σw), σ = {sigma:g} m/s",
            "F = %{y:.2f}<extra></extra>",
            color="#1f77b4",
            width=2,
            dash="dash",
        ),
        _curve(
            curve_v0,
            temperature,
            f"sigmoid wall, τ = {tau:g} m",
            "L_τ = %{y:.2f}<extra></extra>",
            color=COLORS["smoothed"],
            width=1.5,
            dash="dot",
        ),
        {
            "type": "scatter",
            "x": [point.v0],
            "y": [point.loss],
            "mode": "markers",
            "marker": {"size": 13, "color": "#d62728", "line": {"color": "white", "width": 2}},
            "name": "current v₀",
            "hovertemplate": "v₀ = %{x:.2f}<br>loss = %{y:.2f}<extra></extra>",
        },
    ]


def _slope_traces(point: Point, grads: Gradients | None) -> list[dict[str, Any]]:
    """Each estimator's slope through the current point (an empty trace where it has none
    yet: the traces keep their ``LOSS_TRACE`` positions)."""
    data: list[dict[str, Any]] = []
    for name in ESTIMATOR_LABELS:
        xs: list[float] = []
        ys: list[float] = []
        if grads is not None and name in grads.names:
            anchor = point.loss
            if name == SMOOTHED:
                anchor = grads.temperature_value
            elif ESTIMATORS[name].smoothing:
                anchor = grads.smoothed_value  # they estimate the slope of F_σ
            slope = float(grads.estimate[grads.index_of(name)])
            xs, ys = _slope_segment(point.v0, anchor, slope)
        data.append(
            {
                "type": "scatter",
                "x": xs,
                "y": ys,
                "mode": "lines",
                "line": {"color": COLORS[name], "width": 3},
                "name": f"slope: {ESTIMATOR_LABELS[name]}",
                "hoverinfo": "skip",
                "showlegend": False,
            }
        )
    return data


def _path_traces(path: tuple[Sequence[float], Sequence[float]]) -> list[dict[str, Any]]:
    """The optimizer's path (its v₀ and loss values) and a star at its head."""
    data: list[dict[str, Any]] = []
    px, py = list(path[0]), list(path[1])
    data.append(
        {
            "type": "scatter",
            "x": px,
            "y": py,
            "mode": "lines+markers",
            "line": {"color": "#e377c2", "width": 1.5},
            "marker": {"size": 5},
            "name": "gradient descent",
            "hovertemplate": "v₀ = %{x:.3f}<br>loss = %{y:.3f}<extra></extra>",
        }
    )
    data.append(
        {
            "type": "scatter",
            "x": px[-1:],
            "y": py[-1:],
            "mode": "markers",
            "marker": {"size": 15, "symbol": "star", "color": "#e377c2"},
            "showlegend": False,
            "hoverinfo": "skip",
        }
    )
    return data


def _loss_layout(plateau: tuple[float, float], optimal_v0: float) -> dict[str, Any]:
    """The loss figure's axes, with the plateau shaded and the cliff and basin marked."""
    v_short, v_clear = plateau
    layout = _base_layout(420, "loss against launch speed")
    layout["shapes"] = [
        {
            "type": "rect",
            "xref": "x",
            "yref": "paper",
            "x0": v_short,
            "x1": v_clear,
            "y0": 0,
            "y1": 1,
            "fillcolor": "#f2e6c9",
            "opacity": 0.5,
            "line": {"width": 0},
            "layer": "below",
        }
    ]
    layout["annotations"] = [
        {
            "x": (v_short + v_clear) / 2,
            "y": 1.0,
            "yref": "paper",
            "yanchor": "top",
            "text": "plateau<br>dL/dv₀ = 0",
            "showarrow": False,
        },
        {"x": v_clear, "y": 9, "text": "cliff", "showarrow": True, "ax": 30, "ay": 0},
        {"x": optimal_v0, "y": 0, "text": "basin", "showarrow": True, "ax": 0, "ay": 40},
    ]
    layout["xaxis"] = {
        "range": [V0_MIN, V0_MAX],
        "title": {"text": "v₀ (m/s)"},
        "gridcolor": "#eee",
    }
    layout["yaxis"] = {"range": [-3, 75], "title": {"text": "loss (x − 10)²"}, "gridcolor": "#eee"}
    return layout


def loss_figure(
    curve_v0: np.ndarray,
    curve_loss: np.ndarray,
    gaussian: np.ndarray,
    temperature: np.ndarray,
    point: Point,
    grads: Gradients | None,
    sigma: float,
    tau: float,
    plateau: tuple[float, float],
    optimal_v0: float,
    path: tuple[Sequence[float], Sequence[float]] = ((), ()),
) -> Figure:
    """The loss against v₀ with the plateau and the cliff marked, the Gaussian-smoothed
    loss F_σ and the sigmoid-wall loss L_τ overlaid, the current point, each estimator's
    slope through it, and the optimizer's path (``path``: its v₀ and loss values)."""
    data = [
        *_loss_curves(curve_v0, curve_loss, gaussian, temperature, point, sigma, tau),
        *_slope_traces(point, grads),
        *_path_traces(path),
    ]
    return {"data": data, "layout": _loss_layout(plateau, optimal_v0)}


def path_frame(run: dict, frame: int, num_frames: int) -> tuple[list[float], list[float]]:
    """The part of an Optimize run's path shown at animation ``frame`` of ``num_frames``."""
    theta, loss = run["theta"], run["loss"]
    n = len(theta)
    upto = n if frame >= num_frames - 1 else max(1, round((frame + 1) * n / num_frames))
    return theta[:upto], loss[:upto]


def gradient_figure(grads: Gradients) -> Figure:
    """Each estimator's d loss/d v₀ at the current v₀ with ±2 standard-error bars, and the
    slope of the Gaussian-smoothed loss (what the randomized estimators are unbiased for)."""
    labels = [SHORT_LABELS[n] for n in grads.names]
    data = [
        {
            "type": "scatter",
            "x": [labels[i]],
            "y": [float(grads.estimate[i])],
            "error_y": {"type": "data", "array": [2 * float(grads.std_error[i])], "width": 8},
            "mode": "markers",
            "marker": {"size": 12, "color": COLORS[name]},
            "name": labels[i],
            "hovertemplate": "%{y:.3f}<extra></extra>",
        }
        for i, name in enumerate(grads.names)
    ]
    layout = _base_layout(300, f"gradients at v₀ = {grads.v0:.2f} m/s (±2 SE)")
    layout["showlegend"] = False
    ref = grads.smoothed_slope
    layout["shapes"] = [
        _line(0, ref, 1, ref, color="#1f77b4", dash="dash", width=1.5),
        _line(0, 0, 1, 0, color="#999", width=1),
    ]
    for shape in layout["shapes"]:
        shape["xref"] = "paper"
    layout["annotations"] = [
        {
            "x": 0,
            "xref": "paper",
            "xanchor": "left",
            "y": ref,
            "yanchor": "bottom",
            "text": f"slope of E L(v₀ + σw): {ref:.2f}",
            "showarrow": False,
            "font": {"color": "#1f77b4", "size": 11},
        }
    ]
    layout["yaxis"] = {"title": {"text": "d loss / d v₀"}, "gridcolor": "#eee"}
    return {"data": data, "layout": layout}


def optimize_path(run: OptimizeRun) -> dict:
    """An Optimize run as JSON for the page's store."""
    return {"estimator": run.estimator, "theta": _list(run.theta), "loss": _list(run.loss)}
