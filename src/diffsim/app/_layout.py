"""The page's layout: controls, readouts, figures and the words around them.

Element ids are stable (the browser tests use them): ``v0-slider``, ``v0-input``,
``v0-readout``, ``landing-readout``, ``loss-readout``, ``clears-readout``, ``sigma-input``,
``tau-input``, ``estimator-select``, ``optimize-button``, ``optimize-result``, ``message``,
``flight-figure``, ``loss-figure``, ``gradient-figure``, ``gradient-table``.
"""

from __future__ import annotations

import os
from typing import Any

from dash import dcc, html

from ._figures import empty_figure
from ._model import (
    NUM_SAMPLES,
    OPT_LEARNING_RATE,
    OPT_SAMPLES,
    OPT_STEPS,
    OPTIMIZE_CHOICES,
    OPTIMIZE_DEFAULT,
    OPTIMIZE_LABELS,
    SIGMA_DEFAULT,
    SIGMA_END,
    SIGMA_MAX,
    SIGMA_MIN,
    TAU_DEFAULT,
    TAU_MAX,
    TAU_MIN,
    V0_DEFAULT,
    V0_MAX,
    V0_MIN,
    V0_STEP,
    DemoModel,
    Point,
)

DOCS_URL = os.environ.get("DIFFSIM_DOCS_URL", "http://127.0.0.1:8000/")
"""Where the page's concept links point: the documentation site as ``bash scripts/docs
serve`` serves it from a clone, offline (``DIFFSIM_DOCS_URL`` points them at another copy,
e.g. a ``file://`` URL of a built ``site/`` folder)."""

CONCEPT_LINKS: tuple[tuple[str, str, str], ...] = (
    ("The plateau, the cliff and the bounce: contact, and why it breaks gradients",
     "contact/", "docs/contact.md"),
    ("The smoothed loss and the estimators (ZoBG, FoBG, AoBG, auto)",
     "estimators/", "docs/estimators.md"),
    ("The gradient doctor: its flags and what to do about each",
     "concepts/doctor/", "docs/concepts/doctor.md"),
    ("Optimize through contact (the Optimize button's recipe)",
     "guides/optimize-contact/", "docs/guides/optimize-contact.md"),
    ("The article, step by step (this page's numbers, computed in a tutorial)",
     "tutorials/article/", "docs/tutorials/article.py"),
    ("The chain rule through a rollout, and what contact does to it",
     "concepts/jacobians/", "docs/concepts/jacobians.md"),
)  # fmt: skip
"""(title, path on the site, source file in the repository) of each concept the page
illustrates."""


def concept_links() -> html.Div:
    """The "Read more" list: each concept the page shows, linked into the documentation
    site (:data:`DOCS_URL`), with its source page in the repository beside it."""
    items = [
        html.Li(
            [
                html.A(title, href=DOCS_URL + path, target="_blank", rel="noopener"),
                html.Span(f"  ({source})", style={"color": "#888", "fontSize": "12px"}),
            ]
        )
        for title, path, source in CONCEPT_LINKS
    ]
    return html.Div(
        [
            html.H3("Read more", style={"margin": "14px 0 4px"}),
            html.P(
                [
                    "The concepts on this page, in the documentation site (",
                    html.Code("bash scripts/docs serve"),
                    f" in a clone serves it offline at {DOCS_URL}; the sources are the files "
                    "in brackets):",
                ],
                style={"margin": "2px 0", "color": "#444"},
            ),
            html.Ul(items, style={"marginTop": "2px"}),
        ],
        id="concept-links",
    )


def readouts(point: Point) -> tuple[str, str, str, str]:
    """The article's four readouts: ``("v₀ = 8.00 m/s", "6.00 m", "16.00", "no")``."""
    return (
        f"v₀ = {point.v0:.2f} m/s",
        f"{point.landing_x:.2f} m",
        f"{point.loss:.2f}",
        "yes" if point.clears_wall else "no",
    )


_CSS = {
    "page": {
        "maxWidth": "1180px",
        "margin": "0 auto",
        "padding": "16px 22px 40px",
        "fontFamily": "system-ui, -apple-system, Segoe UI, sans-serif",
        "color": "#222",
        "lineHeight": "1.45",
    },
    "card": {
        "border": "1px solid #ddd",
        "borderRadius": "8px",
        "padding": "10px 14px",
        "background": "#fafafa",
        "minWidth": "130px",
    },
    "label": {"fontSize": "12px", "color": "#666", "textTransform": "lowercase"},
    "value": {"fontSize": "22px", "fontWeight": "600", "fontVariantNumeric": "tabular-nums"},
    "row": {"display": "flex", "gap": "14px", "flexWrap": "wrap", "alignItems": "stretch"},
    "two": {"display": "grid", "gridTemplateColumns": "1fr 1fr", "gap": "14px"},
    "message": {"color": "#b00020", "minHeight": "1.4em", "fontWeight": "500"},
    "input": {"width": "90px", "fontSize": "15px", "padding": "3px 6px"},
}


# Dash >= 4 draws its own number box next to a slider; the page has one already (v0-input)
_NO_DIRECT_INPUT: dict[str, Any] = (
    {"allow_direct_input": False} if "allow_direct_input" in dcc.Slider()._prop_names else {}
)


# The number boxes are text boxes read on Enter or blur: the server parses and validates
# what was typed (a message for text, NaN or out-of-range values), half-typed values ("1"
# on the way to "11") are never sent, and retyping a value the page moved away from works
# (Dash's type="number" box compares with a stale copy of its value and may not send it).
_NUMBER_BOX = {
    "type": "text",
    "inputMode": "decimal",
    "debounce": True,
    "autoComplete": "off",
    "style": _CSS["input"],
}


def _readout(label: str, id_: str, value: str) -> html.Div:
    return html.Div(
        [html.Div(label, style=_CSS["label"]), html.Div(value, id=id_, style=_CSS["value"])],
        style=_CSS["card"],
    )


def _v0_controls() -> html.Div:
    """The v₀ slider and the v₀ box beside it."""
    marks = {v: f"{v}" for v in range(int(V0_MIN), int(V0_MAX) + 1)}
    return html.Div(
        [
            html.Div(
                dcc.Slider(
                    id="v0-slider",
                    min=V0_MIN,
                    max=V0_MAX,
                    step=V0_STEP,
                    value=V0_DEFAULT,
                    marks=marks,
                    updatemode="drag",
                    **_NO_DIRECT_INPUT,
                ),
                style={"flex": "1", "minWidth": "320px"},
            ),
            html.Label(
                [
                    "v₀ (m/s) ",
                    dcc.Input(
                        id="v0-input",
                        **_NUMBER_BOX,
                        value=V0_DEFAULT,
                    ),
                ]
            ),
        ],
        style={**_CSS["row"], "alignItems": "center"},
    )


def _readout_row() -> html.Div:
    """v₀ and the article's three readouts: landing x, loss, clears wall."""
    return html.Div(
        [
            html.Div("v₀ = …", id="v0-readout", style={**_CSS["value"], "minWidth": "190px"}),
            _readout("landing x", "landing-readout", "…"),
            _readout("loss (x − 10)²", "loss-readout", "…"),
            _readout("clears wall", "clears-readout", "…"),
        ],
        style={**_CSS["row"], "alignItems": "center", "margin": "10px 0"},
    )


def _message_line() -> html.Div:
    """Where the callbacks' one-line messages appear (one slot per source)."""
    return html.Div(
        [
            html.Span(id="v0-message"),
            html.Span(id="params-message"),
            html.Span(id="optimize-message"),
            html.Span(id="figure-message"),
        ],
        id="message",
        role="status",
        style=_CSS["message"],
    )


def _flight_and_loss_figures() -> html.Div:
    """The flight and the loss landscape, side by side."""
    return html.Div(
        [
            dcc.Graph(
                id="flight-figure",
                figure=empty_figure(300),
                config={"displayModeBar": False},
            ),
            dcc.Graph(
                id="loss-figure",
                figure=empty_figure(420),
                config={"displayModeBar": False},
            ),
        ],
        style=_CSS["two"],
    )


def _smoothing_controls() -> html.Div:
    """The σ and τ boxes: the smoothing of the estimators and of the wall."""
    return html.Div(
        [
            html.Label(
                [
                    f"σ, Gaussian smoothing of v₀ ({SIGMA_MIN:g}–{SIGMA_MAX:g} m/s) ",
                    dcc.Input(
                        id="sigma-input",
                        **_NUMBER_BOX,
                        value=SIGMA_DEFAULT,
                    ),
                ]
            ),
            html.Label(
                [
                    f"τ, temperature of the sigmoid wall ({TAU_MIN:g}–{TAU_MAX:g} m) ",
                    dcc.Input(
                        id="tau-input",
                        **_NUMBER_BOX,
                        value=TAU_DEFAULT,
                    ),
                ]
            ),
        ],
        style={**_CSS["row"], "gap": "28px", "margin": "8px 0"},
    )


def _optimize_panel() -> html.Div:
    """The Optimize card: its recipe, the estimator choice, the button and the result."""
    return html.Div(
        [
            html.H3("Optimize", style={"margin": "6px 0"}),
            html.P(
                f"Gradient descent from the current v₀ with the chosen gradient, as "
                f"diffsim optimize runs it: Adam, {OPT_STEPS} steps, step {OPT_LEARNING_RATE} "
                f"cosine-decayed, {OPT_SAMPLES} samples per estimate. The randomized "
                f"estimators start at σ and anneal it toward {SIGMA_END} m/s; the smoothed "
                "model anneals τ the same way.",
                style={"margin": "2px 0 6px", "fontSize": "14px"},
            ),
            dcc.RadioItems(
                id="estimator-select",
                options=[{"label": OPTIMIZE_LABELS[n], "value": n} for n in OPTIMIZE_CHOICES],
                value=OPTIMIZE_DEFAULT,
                inline=True,
                inputStyle={"marginRight": "4px", "marginLeft": "12px"},
            ),
            html.Button(
                "Optimize",
                id="optimize-button",
                n_clicks=0,
                style={"marginTop": "8px", "fontSize": "15px", "padding": "4px 18px"},
            ),
            html.Span("…", id="optimize-status", style={"marginLeft": "10px", "color": "#666"}),
            dcc.Loading(
                html.Div(id="optimize-result", style={"marginTop": "8px", "minHeight": "2em"}),
                type="dot",
            ),
        ],
        style={**_CSS["card"], "background": "white"},
    )


def _gradients_and_optimize() -> html.Div:
    """The gradient estimates (figure and table) beside the Optimize card."""
    return html.Div(
        [
            html.Div(
                [
                    dcc.Graph(
                        id="gradient-figure",
                        figure=empty_figure(300),
                        config={"displayModeBar": False},
                    ),
                    html.Div(id="gradient-table"),
                ]
            ),
            _optimize_panel(),
        ],
        style=_CSS["two"],
    )


def _doctor_panel() -> html.Div:
    """The gradient doctor's verdict, flags and recommendation at v₀."""
    return html.Div(
        [
            html.H3(
                "Gradient doctor: can the exact gradient be trusted here?",
                style={"margin": "14px 0 4px"},
            ),
            html.Div("…", id="doctor-verdict"),
            html.Div(id="doctor-flags"),
            html.Div(id="doctor-recommendation", style={"color": "#444"}),
        ],
        id="doctor",
    )


def _explanation(model: DemoModel) -> html.Div:
    """What the page shows, in words, with ``model``'s numbers (plateau bounds and optima)."""
    v_short, v_clear = model.plateau
    return html.Div(
        [
            html.H3("What you are seeing", style={"margin": "14px 0 4px"}),
            html.P(
                f"Drag v₀. Below about {v_short:.2f} m/s the ball lands short of the wall "
                "and the loss falls smoothly as v₀ grows. Between "
                f"{v_short:.2f} and {v_clear:.2f} m/s it hits the wall and "
                "stops dead at x = 6 m: the loss is 16 whatever v₀ is. That is the plateau, "
                "and on it the exact gradient — what autodiff through the simulator "
                "returns — is exactly 0, because a little more speed changes nothing. At "
                f"{v_clear:.2f} m/s the ball starts to clear the wall and the loss drops off "
                "a cliff, where the derivative does not exist. Past the cliff lies the smooth "
                "basin, where the ball lands on the target: at "
                f"{model.optimal_v0:.3f} m/s for the parabola (its range v₀²/g is 10 m), at "
                f"{model.simulated_optimal_v0:.3f} m/s for the time-stepped simulator that the "
                "page plots and optimizes (h = 1/240 s), the minimum an optimizer reaches."
            ),
            html.P(
                "Gradient descent with the exact gradient therefore never leaves the "
                "plateau. Smoothing fixes this: averaging the loss over v₀ + σw with "
                "w ~ N(0, 1) (dashed curve) turns the cliff into a slope that reaches onto "
                "the plateau. The zeroth-order estimate (ZoBG) only evaluates the loss at "
                "perturbed speeds, so it sees the cliff and is unbiased for that slope; the "
                "first-order one (FoBG) averages exact gradients, which are blind to the jump "
                "and so it is biased near the cliff, with a small variance; the alpha-order "
                f"one (AoBG) mixes the two, trusting FoBG only where it agrees with ZoBG. "
                f"Each uses {NUM_SAMPLES} samples with a fixed random key, and the error "
                "bars are ±2 standard errors. The sigmoid wall (dotted, temperature τ) is "
                "the other fix: a smooth model whose exact gradient points off the plateau."
            ),
            html.P(
                "Every number on this page is computed by diffsim's time-stepped simulator "
                "(h = 1/240 s) and estimators in the Python server; the page holds no copy "
                "of the physics.",
                style={"color": "#666", "fontSize": "13px"},
            ),
            concept_links(),
        ]
    )


def _stores() -> list[Any]:
    """The page's state between callbacks (stores) and its timers (intervals)."""
    return [
        dcc.Store(id="v0-store", data={"v0": V0_DEFAULT}),
        # v₀ where the slider rests (REST_MS after the last move): the heavy panels
        # follow this one, so a moving slider only costs the readouts
        dcc.Store(id="v0-rest-store", data={"v0": V0_DEFAULT}),
        dcc.Store(id="params-store", data={"sigma": SIGMA_DEFAULT, "tau": TAU_DEFAULT}),
        dcc.Store(id="optimize-store", data=None),
        dcc.Store(id="drawn-store", data=None),
        dcc.Store(id="ready-store", data={"gradients": False, "doctor": False, "optimize": False}),
        dcc.Interval(id="ready-poll", interval=400, disabled=False),
        dcc.Interval(id="optimize-interval", interval=40, disabled=True, n_intervals=0),
    ]


def build_layout(model: DemoModel) -> html.Div:
    """The whole page. Readouts and figures start as placeholders; the callbacks fill them
    from the library as soon as the page loads. The numbers in its text are ``model``'s
    (the library's plateau bounds and optima)."""
    return html.Div(
        [
            html.H2("A loss landscape with a contact cliff", style={"marginBottom": "2px"}),
            html.P(
                "A projectile is launched at 45° toward a target 10 m away, over a 2 m wall "
                "at x = 6 m. If it clears the wall it flies on; if not it stops dead at the "
                "wall. The only knob is the launch speed v₀; the loss is the squared miss "
                "distance (x − 10)².",
                style={"marginTop": "2px"},
            ),
            _v0_controls(),
            _readout_row(),
            _message_line(),
            _flight_and_loss_figures(),
            _smoothing_controls(),
            _gradients_and_optimize(),
            _doctor_panel(),
            _explanation(model),
            *_stores(),
        ],
        style=_CSS["page"],
    )
