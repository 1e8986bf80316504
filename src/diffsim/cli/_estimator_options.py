"""The estimator options that ``diffsim estimate`` and ``diffsim optimize`` share: the
systems with a study, the checks of --v0/--sigma/--samples/--seed, and the estimator built
from them."""

from __future__ import annotations

from typing import Any

from ..estimators import ESTIMATORS, Estimator, make_estimator
from ..systems import SYSTEMS as SYSTEM_REGISTRY
from ..systems import Study, wall_study
from ._common import CLIError, check_seed, registry_choice, used
from ._limits import estimate_cost


def registered_studies() -> dict[str, Study]:
    """The registered systems with a :class:`~diffsim.systems.Study` (for now: the wall),
    read when the command runs."""
    return {name: spec.study for name, spec in SYSTEM_REGISTRY.items() if spec.study is not None}


def registered_study(system: str) -> Study:
    return registered_studies()[registry_choice("--system", system, registered_studies())]


def _estimator_help() -> str:
    lines = [f"{name}: {cls.summary}" for name, cls in ESTIMATORS.items()]
    return "Estimator, one of: " + "; ".join(lines) + "."


ESTIMATOR_HELP = _estimator_help()
SYSTEM_HELP = "System: a registered system with a study (wall)."

CLI_OPTIONS = {"sigma": "sigma", "num_samples": "samples"}
"""Estimator option → the CLI flag's name in the output (what the user typed it as)."""


def v0_range(system: str) -> tuple[float, float]:
    """(0, the registry's maximum for v0]: faster balls outrun the rollout's horizon."""
    for setting in SYSTEM_REGISTRY[system].settings:
        if setting.name == "v0" and setting.maximum is not None:
            return 0.0, float(setting.maximum)
    return 0.0, float("inf")


def check_common(
    system: str, estimator: str, v0: float, sigma: float | None, samples: int, seed: int
) -> tuple[float, float | None]:
    registry_choice("--system", system, registered_studies())
    if estimator not in ESTIMATORS:
        raise CLIError(
            f"estimator must be one of {', '.join(sorted(ESTIMATORS))}, got {estimator!r}"
        )
    v0 = used("v0", v0)
    lo, hi = v0_range(system)
    if not lo < v0 <= hi:
        raise CLIError(f"v0 must be a finite speed in ({lo:g}, {hi:g}] m/s, got {v0}")
    if sigma is not None:  # None: the estimator's own, diffsim's one rule (5 % of v0)
        sigma = used("sigma", sigma)
        top = wall_study.SIGMA_MAX
        if not 0 < sigma <= top:
            raise CLIError(f"sigma must be finite and in (0, {top:g}] m/s, got {sigma}")
    if samples < 2:
        raise CLIError(f"samples must be an integer >= 2, got {samples}")
    check_seed(seed)
    return v0, sigma


def call_cost(est: Estimator, estimator: str, samples: int) -> tuple[float, float, str]:
    """Bytes and seconds of one estimate of d loss / d v0 (θ has one component), from the
    estimator's declared cost, and the option they grow with (for the message)."""
    nbytes, seconds = estimate_cost(est, 1)
    grows = f"--samples {samples}" if type(est).takes("num_samples") else ""
    return nbytes, seconds, grows or f"--estimator {estimator}"


def estimator_settings(estimator: str, sigma: float | None, samples: int) -> dict[str, float | int]:
    """The CLI's options this estimator takes (declared in its ``options``), by option name
    (σ left out when ``None``: the estimator's own, relative to θ)."""
    given = {"sigma": sigma, "num_samples": samples}
    return {
        name: v for name, v in given.items() if ESTIMATORS[estimator].takes(name) and v is not None
    }


def build_estimator(estimator: str, sigma: float | None, samples: int, devices: Any) -> Estimator:
    """The estimator with the CLI's options, each checked against what the estimator
    declares (the message names the flag), before anything is traced."""
    options: dict[str, Any] = dict(estimator_settings(estimator, sigma, samples))
    for option in ESTIMATORS[estimator].options:
        if option.name not in options:
            continue
        try:
            option.check(options[option.name])
        except ValueError:
            raise CLIError(
                f"--{CLI_OPTIONS.get(option.name, option.name)} must be {option.accepts()} "
                f"for --estimator {estimator}, got {options[option.name]}"
            ) from None
    if ESTIMATORS[estimator].sharded:
        options["devices"] = devices
    return make_estimator(estimator, **options)
