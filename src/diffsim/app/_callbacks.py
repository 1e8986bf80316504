"""The page's callbacks: validate what the browser sent, call the model, format the result.

Each callback is a method of :class:`Callbacks` taking plain values (and, where it matters,
which input fired), so it can be tested without a browser; :func:`register_callbacks`
wires them to Dash.

Under a moving slider only the light callback runs: :meth:`Callbacks.on_v0` (one compiled
simulation: the four readouts and the flight path). The heavy panels — the loss figure with
the estimators' slopes, the gradient table and figure, the gradient doctor — follow
``v0-rest-store``, which a small clientside callback (:data:`REST_JS`, timing only, no
numbers) sets to v₀ once the slider has rested for :data:`REST_MS` ms; so no estimator or
doctor work is ever done for a value the user has already left, and none of it competes with
the readouts of the next move. No callback lets an exception escape: a bad value from the page (out
of range, NaN, text, a missing field) becomes a message on the page, and anything
unexpected is logged on the server and reported in one line — the server keeps serving.
"""

from __future__ import annotations

import functools
import logging
from collections.abc import Callable
from typing import Any

import dash
import numpy as np
from dash import Input, Output, Patch, State, ctx, html, no_update

from ..estimators import CHOICES, ESTIMATORS
from ._figures import (
    COLORS,
    LOSS_TRACE,
    flight_figure,
    gradient_figure,
    loss_figure,
    optimize_path,
    path_frame,
)
from ._layout import readouts
from ._model import (
    ESTIMATOR_LABELS,
    OPTIMIZE_LABELS,
    TARGET_TOLERANCE,
    DemoModel,
    InputError,
    parse_estimator,
    parse_sigma,
    parse_tau,
    parse_v0,
)

log = logging.getLogger("diffsim.app")

NUM_FRAMES = 40
"""Frames of the Optimize animation (one every 40 ms)."""

REST_MS = 150
"""The heavy panels follow v₀ once it has not moved for this long (ms)."""

REST_JS = """
function (v0Data, restData) {
    // Debounce, nothing else: v0-store -> v0-rest-store once v0 has rested REST_MS ms.
    const dc = window.dash_clientside;
    clearTimeout(window.__diffsimRestTimer);
    if (!v0Data || (restData && restData.v0 === v0Data.v0)) {
        return dc.no_update;  // the panels already show this v0
    }
    window.__diffsimRestTimer = setTimeout(function () {
        dc.set_props("v0-rest-store", {data: v0Data});
    }, REST_MS);
    return dc.no_update;
}
""".replace("REST_MS", str(REST_MS))
"""The clientside debounce from ``v0-store`` to ``v0-rest-store`` (no physics: it only
delays and drops superseded values)."""


def _internal_error(err: Exception) -> str:
    log.exception("demo callback failed")
    return f"Something went wrong on the server ({type(err).__name__}); try another value."


def _field(data: Any, name: str) -> Any:
    return data.get(name) if isinstance(data, dict) else None


def _run_from_store(data: Any) -> dict | None:
    """An Optimize run from the store, or None if it is absent or malformed."""
    if not isinstance(data, dict):
        return None
    theta, loss = data.get("theta"), data.get("loss")
    if not (isinstance(theta, list) and isinstance(loss, list) and len(theta) == len(loss)):
        return None
    try:
        return {"theta": [float(t) for t in theta], "loss": [float(v) for v in loss]}
    except (TypeError, ValueError):
        return None


class Callbacks:
    """The demo's callbacks over one :class:`DemoModel`."""

    def __init__(self, model: DemoModel) -> None:
        self.model = model

    # -- v₀: slider and number box, kept in sync ------------------------------------------

    @staticmethod
    def v0_source(
        slider_value: Any, input_value: Any, last: Any, triggered: list[str] | str | None
    ) -> str:
        """Which control the user moved: ``"v0-slider"`` or ``"v0-input"``.

        Dash merges triggers that arrive while a request is in flight, so both may be
        listed; the one that differs from the last value the page accepted (``last``, from
        ``v0-store``) is the one that moved. Ties go to the first one Dash lists.
        """
        fired = [triggered] if isinstance(triggered, str) or triggered is None else triggered
        fired = [f.split(".")[0] for f in fired if f]
        if len(fired) < 2:
            return fired[0] if fired else "v0-slider"
        try:
            last_v0 = float(_field(last, "v0"))
            if abs(float(slider_value) - round(last_v0, 2)) < 1e-9:
                return "v0-input"
            if abs(float(input_value) - last_v0) < 1e-12:
                return "v0-slider"
        except (TypeError, ValueError):
            pass
        return fired[0]

    def on_v0(
        self,
        slider_value: Any,
        input_value: Any,
        triggered: list[str] | str | None,
        last: Any = None,
    ) -> tuple:
        """The slider or the number box moved: readouts, flight path, the stored v₀.

        ``triggered``: the id(s) of what fired (see :meth:`v0_source`); ``last``: the
        ``v0-store`` data. Returns ``(slider, input, v0 readout, landing, loss, clears,
        flight figure, v0-store, message)``; on a bad value only the message changes.
        """
        source = self.v0_source(slider_value, input_value, last, triggered)
        raw = input_value if source == "v0-input" else slider_value
        keep = (no_update,) * 8
        try:
            v0 = parse_v0(raw)
            self.model.wait_until_compiled("point")
            point = self.model.point(v0)
        except InputError as err:
            return (*keep, str(err))
        except Exception as err:
            return (*keep, _internal_error(err))
        slider = no_update if source == "v0-slider" else round(v0, 2)
        box = no_update if source == "v0-input" else v0
        return (
            slider,
            box,
            *readouts(point),
            flight_figure(point),
            {"v0": v0},
            "",
        )

    # -- σ and τ ---------------------------------------------------------------------------

    def on_params(self, sigma: Any, tau: Any) -> tuple:
        """σ or τ changed: ``(params-store, message)``; a bad value keeps the last good one."""
        try:
            return {"sigma": parse_sigma(sigma), "tau": parse_tau(tau)}, ""
        except InputError as err:
            return no_update, str(err)

    # -- the loss and gradient figures -----------------------------------------------------

    def on_ready_poll(self, _n: Any) -> tuple:
        """Report which slow stages the background warm-up has compiled; stop polling once
        all are. Returns ``(ready-store, ready-poll.disabled, optimize status)``."""
        ready = {
            stage: self.model.wait_until_compiled(stage, timeout=0)
            for stage in ("gradients", "doctor", "optimize")
        }
        status = "ready" if ready["optimize"] else "compiling (once per start-up)…"
        return ready, all(ready.values()), status

    def on_doctor(self, v0_data: Any, params: Any, ready: Any) -> tuple:
        """The gradient doctor at the resting v₀ (``v0-rest-store``) and σ: ``(verdict,
        flags, recommendation)`` as page elements. Until the doctor is compiled it says so;
        it never raises."""
        if not (isinstance(ready, dict) and ready.get("doctor")):
            return "compiling (once per start-up)…", "", ""
        try:
            v0 = parse_v0(_field(v0_data, "v0"))
            sigma = parse_sigma(_field(params, "sigma"))
            d = self.model.doctor(v0, sigma)
        except InputError as err:
            return no_update, no_update, str(err)
        except Exception as err:
            return no_update, no_update, _internal_error(err)
        colour = {"trusted": "#1a7f37", "inconclusive": "#9a6700"}.get(d.verdict, "#b42318")
        verdict = html.Span(
            [
                html.B(d.verdict, style={"color": colour}),
                f" at v₀ = {v0:.2f} m/s, σ = {sigma:.2f} m/s — use ",
                html.B(d.choice, id="doctor-choice"),
                " (the auto row's choice: the same samples)",
            ]
        )
        items = [
            html.Li(
                [html.B(f.name), ": ", f.message, " (", _evidence(f.evidence), ")"],
                id=f"doctor-flag-{f.name}",
            )
            for f in d.flags
        ]
        items += [
            html.Li(
                [html.B(f"{f.name}?"), " undecided: ", f.message, " (", _evidence(f.evidence), ")"],
                id=f"doctor-undecided-{f.name}",
            )
            for f in d.undecided
        ]
        flags = html.Ul(items) if items else html.P("no flags: the exact gradient is trustworthy")
        rec = f"{d.recommendation}. Cost: {d.cost}."
        return verdict, flags, rec

    def draw(
        self,
        v0_data: Any,
        params: Any,
        run_data: Any,
        ready: Any,
        n_intervals: Any,
        triggered: str | None,
        drawn: Any = None,
    ) -> tuple:
        """Redraw the loss figure (and the gradients at the resting v₀, ``v0_data`` from
        ``v0-rest-store``), or advance the Optimize animation by one frame.

        When only v₀ moved and the figure in the page was drawn with the current σ and τ
        (``drawn``, from ``drawn-store``), only the current point and the slopes are sent
        (a Plotly patch, not the 1001-point curves again). Returns ``(loss figure,
        gradient figure, gradient table, optimize-interval.disabled, message,
        drawn-store)``.
        """
        try:
            return self._draw(v0_data, params, run_data, ready, n_intervals, triggered, drawn)
        except InputError as err:
            return no_update, no_update, no_update, True, str(err), no_update
        except Exception as err:
            return no_update, no_update, no_update, True, _internal_error(err), no_update

    def _draw(self, v0_data, params, run_data, ready, n_intervals, triggered, drawn) -> tuple:
        run = _run_from_store(run_data)
        frame = n_intervals if isinstance(n_intervals, int) and n_intervals >= 0 else 0
        done = run is None or frame >= NUM_FRAMES - 1
        path = path_frame(run, frame, NUM_FRAMES) if run else ([], [])
        if triggered == "optimize-interval":
            patch = Patch()
            patch["data"][LOSS_TRACE["path"]]["x"] = path[0]
            patch["data"][LOSS_TRACE["path"]]["y"] = path[1]
            patch["data"][LOSS_TRACE["path-head"]]["x"] = path[0][-1:]
            patch["data"][LOSS_TRACE["path-head"]]["y"] = path[1][-1:]
            return patch, no_update, no_update, done, no_update, no_update
        v0 = parse_v0(_field(v0_data, "v0"))
        sigma = parse_sigma(_field(params, "sigma"))
        tau = parse_tau(_field(params, "tau"))
        m = self.model
        m.wait_until_compiled("point")
        point = m.point(v0)
        m.wait_until_compiled("curves")
        gaussian, temperature = m.curves(sigma, tau)
        grads = None
        if m.wait_until_compiled("gradients", timeout=0):
            grads = m.gradients(v0, sigma, tau)
        fig = loss_figure(
            m.curve_v0,
            m.curve_loss,
            gaussian,
            temperature,
            point,
            grads,
            sigma,
            tau,
            m.plateau,
            m.optimal_v0,
            path,
        )
        now = {"sigma": sigma, "tau": tau, "gradients": grads is not None}
        if triggered == "v0-rest-store" and drawn == now:
            patch = Patch()
            for i in range(LOSS_TRACE["point"], LOSS_TRACE["path"]):
                patch["data"][i] = fig["data"][i]
            fig = patch
        if grads is None:
            note = html.P("Compiling the estimators… (once per start-up)", id="gradient-note")
            return fig, no_update, note, done, "", now
        return fig, gradient_figure(grads), self._gradient_table(grads), done, "", now

    @staticmethod
    def _gradient_table(grads) -> html.Table:
        cell = {"padding": "2px 10px", "textAlign": "right", "fontVariantNumeric": "tabular-nums"}
        head = html.Tr(
            [
                html.Th(h, style={**cell, "textAlign": t})
                for h, t in [
                    ("estimator", "left"),
                    ("d loss/d v₀", "right"),
                    ("± 2 SE", "right"),
                    ("simulations", "right"),
                ]
            ]
        )
        rows = [head]
        for i, name in enumerate(grads.names):
            label = ESTIMATOR_LABELS[name]
            if name in ESTIMATORS and "choice" in ESTIMATORS[name].reports:
                code = int(grads.choice[i])
                label += f" → {CHOICES[code]}" if 0 <= code < len(CHOICES) else ""
                if np.isfinite(grads.alpha[i]) and CHOICES[code] == "mixed":
                    label += f" (α = {grads.alpha[i]:.2f})"
            elif name in ESTIMATORS and "alpha" in ESTIMATORS[name].reports:
                label += f" (α = {grads.alpha[i]:.2f})"
            rows.append(
                html.Tr(
                    [
                        html.Td(
                            label,
                            style={**cell, "textAlign": "left", "color": COLORS[name]},
                        ),
                        html.Td(f"{grads.estimate[i]:.3f}", id=f"grad-{name}", style=cell),
                        html.Td(f"{2 * grads.std_error[i]:.3f}", style=cell),
                        html.Td(f"{int(grads.evaluations[i])}", style=cell),
                    ]
                )
            )
        rows.append(
            html.Tr(
                [
                    html.Td("slope of E L(v₀ + σw)", style={**cell, "textAlign": "left"}),
                    html.Td(f"{grads.smoothed_slope:.3f}", id="grad-reference", style=cell),
                    html.Td("quadrature", style=cell),
                    html.Td("", style=cell),
                ]
            )
        )
        return html.Table(rows, style={"borderCollapse": "collapse", "fontSize": "14px"})

    # -- Optimize --------------------------------------------------------------------------

    def on_optimize(self, n_clicks: Any, estimator: Any, v0_data: Any, params: Any) -> tuple:
        """Run gradient descent from the current v₀. Returns ``(optimize-store, result,
        message, optimize-interval.disabled, optimize-interval.n_intervals)``."""
        if not n_clicks:
            return no_update, no_update, "", no_update, no_update
        try:
            name = parse_estimator(estimator)
            v0 = parse_v0(_field(v0_data, "v0"))
            sigma = parse_sigma(_field(params, "sigma"))
            tau = parse_tau(_field(params, "tau"))
            self.model.wait_until_compiled("optimize")
            run = self.model.optimize(v0, name, sigma, tau)
        except InputError as err:
            return no_update, no_update, str(err), no_update, no_update
        except Exception as err:
            return no_update, no_update, _internal_error(err), no_update, no_update
        f = run.final
        miss = abs(f.landing_x - 10.0)
        verdict = "on target" if miss <= TARGET_TOLERANCE else "missed"
        result = html.Div(
            [
                html.Div(
                    f"{OPTIMIZE_LABELS[name]} from v₀ = {v0:.2f} m/s: "
                    f"{len(run.theta) - 1} steps, {run.evaluations} simulations."
                ),
                *_decisions(run.decisions),
                html.Div(
                    [
                        "final v₀ = ",
                        html.B(f"{f.v0:.3f}", id="optimize-v0"),
                        " m/s, landing x ",
                        html.B(f"{f.landing_x:.3f} m", id="optimize-landing"),
                        ", loss ",
                        html.B(f"{f.loss:.4f}", id="optimize-loss"),
                        ", clears wall ",
                        html.B("yes" if f.clears_wall else "no", id="optimize-clears"),
                        f" — {verdict} (|x − 10| = {100 * miss:.1f} cm).",
                    ]
                ),
            ]
        )
        return optimize_path(run), result, "", False, 0


def _decisions(decisions: tuple) -> list:
    """The default method's decisions as a list (nothing for an estimator's run)."""
    if not decisions:
        return []
    items = [
        html.Li(f"step {d.step}, {d.evaluations} simulations: {d.method} — {d.reason}")
        for d in decisions
    ]
    return [html.Ul(items, id="optimize-decisions", style={"margin": "4px 0"})]


def _evidence(evidence: dict) -> str:
    return ", ".join(
        f"{k} = {v:.3g}" if isinstance(v, float) else f"{k} = {v}" for k, v in evidence.items()
    )


def _safe(fn: Callable[..., tuple], n_out: int) -> Callable[..., tuple]:
    """Last line of defence: a callback never raises (Dash would answer 500)."""

    @functools.wraps(fn)
    def wrapper(*args: Any) -> tuple:
        try:
            return fn(*args)
        except Exception:
            log.exception("demo callback failed")
            return (no_update,) * n_out

    return wrapper


def register_callbacks(app: dash.Dash, model: DemoModel) -> Callbacks:
    """Wire :class:`Callbacks` over ``model`` to ``app``'s components; returns them."""
    cb = Callbacks(model)

    @app.callback(
        Output("v0-slider", "value"),
        Output("v0-input", "value"),
        Output("v0-readout", "children"),
        Output("landing-readout", "children"),
        Output("loss-readout", "children"),
        Output("clears-readout", "children"),
        Output("flight-figure", "figure"),
        Output("v0-store", "data"),
        Output("v0-message", "children"),
        Input("v0-slider", "value"),
        Input("v0-input", "value"),
        State("v0-store", "data"),
    )
    @functools.partial(_safe, n_out=9)
    def _on_v0(slider_value, input_value, last):
        return cb.on_v0(slider_value, input_value, list(ctx.triggered_prop_ids), last)

    app.clientside_callback(
        REST_JS,
        Output("v0-rest-store", "data"),
        Input("v0-store", "data"),
        State("v0-rest-store", "data"),
    )

    @app.callback(
        Output("params-store", "data"),
        Output("params-message", "children"),
        Input("sigma-input", "value"),
        Input("tau-input", "value"),
    )
    @functools.partial(_safe, n_out=2)
    def _on_params(sigma, tau):
        return cb.on_params(sigma, tau)

    @app.callback(
        Output("ready-store", "data"),
        Output("ready-poll", "disabled"),
        Output("optimize-status", "children"),
        Input("ready-poll", "n_intervals"),
    )
    @functools.partial(_safe, n_out=3)
    def _on_ready_poll(n):
        return cb.on_ready_poll(n)

    @app.callback(
        Output("loss-figure", "figure"),
        Output("gradient-figure", "figure"),
        Output("gradient-table", "children"),
        Output("optimize-interval", "disabled"),
        Output("figure-message", "children"),
        Output("drawn-store", "data"),
        Input("v0-rest-store", "data"),
        Input("params-store", "data"),
        Input("optimize-store", "data"),
        Input("ready-store", "data"),
        Input("optimize-interval", "n_intervals"),
        State("drawn-store", "data"),
    )
    @functools.partial(_safe, n_out=6)
    def _draw(v0_data, params, run_data, ready, n_intervals, drawn):
        fired = list(ctx.triggered_prop_ids)
        # several inputs at once (merged triggers): draw everything
        triggered = fired[0].split(".")[0] if len(fired) == 1 else None
        return cb.draw(v0_data, params, run_data, ready, n_intervals, triggered, drawn)

    @app.callback(
        Output("doctor-verdict", "children"),
        Output("doctor-flags", "children"),
        Output("doctor-recommendation", "children"),
        Input("v0-rest-store", "data"),
        Input("params-store", "data"),
        Input("ready-store", "data"),
    )
    @functools.partial(_safe, n_out=3)
    def _on_doctor(v0_data, params, ready):
        return cb.on_doctor(v0_data, params, ready)

    @app.callback(
        Output("optimize-store", "data"),
        Output("optimize-result", "children"),
        Output("optimize-message", "children"),
        Output("optimize-interval", "disabled", allow_duplicate=True),
        Output("optimize-interval", "n_intervals"),
        Input("optimize-button", "n_clicks"),
        State("estimator-select", "value"),
        State("v0-store", "data"),
        State("params-store", "data"),
        prevent_initial_call=True,
    )
    @functools.partial(_safe, n_out=5)
    def _on_optimize(n_clicks, estimator, v0_data, params):
        return cb.on_optimize(n_clicks, estimator, v0_data, params)

    return cb
