"""What :func:`diffsim.identify` does about the doctor's check of the exact Jacobian: a
strategy (``trust=``) with one method, :meth:`AbstractTrust.next_remedy`, that looks at where
the fit stands — the start, or a finished run and what the check found there — and returns
the next remedy, or ``None`` to stop. Like a step-size controller that looks at an error
estimate and returns the next step.

* :class:`Off`: no check.
* :class:`Report`: checked at θ̂, nothing changed.
* :class:`Act` (the default): checked at the start and at θ̂, and acted on (multiple shooting
  over windows the doctor trusts, the smoothed Jacobian, a refit from a lower probe).
"""

from __future__ import annotations

import abc
from typing import Any, ClassVar, NamedTuple

import equinox as eqx

from ._problem import _without_smoothing, is_smoothed
from ._remedies import PROBE_RESTARTS, Checks, Posed, Remedy, RemedyKind, Tally
from ._solve import FitRun

TRUST = ("act", "report", "off")
"""The names ``trust=`` accepts for :class:`Act`, :class:`Report` and :class:`Off`."""

MAX_REMEDIES = 1 + 1 + 3 + PROBE_RESTARTS
"""A bound on the remedies after the first fit, which the strategies below never reach: one
switch (shooting or smoothing), one return to the exact Jacobian, three shorter window
lengths and :data:`PROBE_RESTARTS` probes."""


class Finding(NamedTuple):
    """Where the fit stands, for :meth:`AbstractTrust.next_remedy`."""

    run: FitRun | None
    """The finished run (``None``: at the start, before the first fit)."""
    x: Any
    """The point: the start or the estimate (θ, then shooting's window starts)."""
    x_theta: Any
    """θ at the point (physical values)."""
    trusted: bool | None
    """The doctor's check of the exact Jacobian at the estimate (``None``: not checked)."""
    posed: Posed
    """The problem the run solved (or, at the start, the first fit will solve)."""
    applied: tuple[RemedyKind, ...]
    """The remedies applied so far, in order."""
    unseen: tuple[str, ...] = ()
    """At the start: the parameters the exact Jacobian does not see."""


class Decision(NamedTuple):
    """The next remedy (``None``: stop), the tally of the checks run, and what to say."""

    remedy: Remedy | None
    tally: Tally
    note: str = ""


class AbstractTrust(eqx.Module):
    """What the fit does about the doctor's check of the exact Jacobian."""

    checks_estimate: ClassVar[bool]
    """Whether the doctor checks the exact Jacobian at each estimate."""

    @abc.abstractmethod
    def next_remedy(self, finding: Finding, checks: Checks, tally: Tally) -> Decision:
        """The remedy to apply before the next fit, given ``finding``; ``None`` to stop."""


class Off(AbstractTrust):
    """No check: ``jacobian_trusted`` is ``None``."""

    checks_estimate: ClassVar[bool] = False

    def next_remedy(self, finding: Finding, checks: Checks, tally: Tally) -> Decision:
        return Decision(None, tally)


class Report(AbstractTrust):
    """Checked at θ̂ only; nothing changed."""

    checks_estimate: ClassVar[bool] = True

    def next_remedy(self, finding: Finding, checks: Checks, tally: Tally) -> Decision:
        return Decision(None, tally)


class Act(AbstractTrust):
    """Checked at the start and at θ̂, and acted on (:func:`diffsim.identify`'s ``trust``)."""

    checks_estimate: ClassVar[bool] = True

    def next_remedy(self, finding: Finding, checks: Checks, tally: Tally) -> Decision:
        if finding.run is None:
            return _at_start(finding, checks, tally)
        run, posed, applied = finding.run, finding.posed, finding.applied
        problem = posed.problem
        x_theta = finding.x_theta
        remedied = any(k in (RemedyKind.SHOOTING, RemedyKind.SMOOTHED) for k in applied)
        if finding.trusted is False and not remedied:  # a remedy is applied once
            remedy, note, tally = checks.switch(posed, x_theta, "at the estimate", tally)
            return Decision(remedy, tally, note + ", and fitted again from the estimate")
        exact = Posed(_without_smoothing(problem), posed.extra0, posed.extra_scale)
        if (
            finding.trusted
            and is_smoothed(problem)
            and run.finite
            and checks.full_rank(exact.problem, run.x)
        ):
            # the smoothed Jacobian brought the fit where the exact one is trusted (and not
            # flat): finish with it, so the estimate and its intervals are the exact problem's
            return Decision(Remedy(RemedyKind.EXACT, exact), tally, (
                "at the estimate the doctor trusts the exact Jacobian: fitted again from "
                "there with it (the estimate and its intervals use the exact Jacobian)"
            ))  # fmt: skip
        if (
            not run.converged
            and run.finite
            and checks.shooting is None
            and problem.window is not None
        ):
            # windows the fit chose itself did not converge: shorter ones from their estimate
            why = f"windows of {problem.window} steps did not converge in max_steps"
            shot, tally = checks.shorter_windows(checks.single, x_theta, why, problem.window, tally)
            if shot is not None:
                remedy = Remedy(RemedyKind.SHORTER_WINDOWS, shot[0])
                return Decision(remedy, tally, shot[1] + ", and fitted again from their estimate")
        if not run.finite:
            return Decision(None, tally)
        lower, tally = checks.probe(problem, run.x, tally)
        if lower is None:
            return Decision(None, tally)
        if applied.count(RemedyKind.PROBE) < PROBE_RESTARTS:
            remedy = Remedy(RemedyKind.PROBE, posed, lower[0])
            return Decision(remedy, tally, lower[1] + ": fitted again from there")
        return Decision(None, tally, lower[1] + f", still after {PROBE_RESTARTS} restarts: the "
                        "intervals do not describe the cost around the estimate")  # fmt: skip


def _at_start(finding: Finding, checks: Checks, tally: Tally) -> Decision:
    """:class:`Act` at the start: the smoothed Jacobian on a plateau (where the exact one
    does not see a parameter); else, where the doctor does not trust the exact Jacobian,
    :meth:`Checks.switch`."""
    posed = finding.posed
    x0 = finding.x_theta
    if finding.unseen:
        smoothed = checks.plateau(posed.problem, x0, finding.x, finding.unseen)
        if smoothed is None:
            return Decision(None, tally)
        return Decision(Remedy(RemedyKind.SMOOTHED, smoothed[0]), tally, smoothed[1])
    trusted, tally = checks.exact_trusted(posed.problem, finding.x, tally)
    if trusted:
        return Decision(None, tally)
    remedy, note, tally = checks.switch(posed, x0, "at the start", tally)
    return Decision(remedy, tally, note)


def as_trust(trust: str | AbstractTrust) -> AbstractTrust:
    """``trust=`` as a strategy: :class:`Act`, :class:`Report` or :class:`Off`, or their
    names ``"act"``, ``"report"``, ``"off"``.

    Raises:
        ValueError: another value (the message lists the accepted names).

    Example:
        >>> from diffsim.identification import Act, as_trust
        >>> as_trust("act") == Act(), as_trust("off")
        (True, Off())
    """
    if isinstance(trust, AbstractTrust):
        return trust
    names: dict[Any, AbstractTrust] = {"act": Act(), "report": Report(), "off": Off()}
    if not isinstance(trust, str) or trust not in names:
        raise ValueError(f"trust must be one of {', '.join(map(repr, TRUST))}, got {trust!r}")
    return names[trust]
