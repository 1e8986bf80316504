"""One self-validating parameter type: the settings a system is examined at and the options
an estimator's constructor takes are both :class:`Option` s.

An option knows its name, meaning, kind, unit, accepted range and default; it says what it
accepts in words (:meth:`Option.accepts`), checks a value (:meth:`Option.check`) and parses
text (:meth:`Option.parse`), so the CLI's ``--set NAME=VALUE``, the page's inputs and the
doctor's presets validate through the one declaration.
"""

from __future__ import annotations

import dataclasses
import math
from typing import Any


@dataclasses.dataclass(frozen=True)
class Option:
    """A named, typed, bounded parameter: an estimator's constructor option
    (:attr:`diffsim.estimators.Estimator.options`) or a system's setting
    (:attr:`diffsim.systems.SystemSpec.settings`).

    ``kind`` is ``float``, ``int`` or ``bool``; ``minimum``/``maximum`` bound the accepted
    values (``None``: unbounded; ``exclusive`` when the bounds themselves are refused); an
    integer option may take only multiples of ``multiple_of`` (2: even).
    ``default`` is a system setting's default; an estimator's defaults are its fields'
    (:meth:`~diffsim.estimators.Estimator.defaults`), and its options leave it ``None``.

    Examples:
        >>> from diffsim.estimators import Option
        >>> v0 = Option("v0", "launch speed", float, "m/s", 4.0, 14.0, default=8.0)
        >>> v0.accepts(), v0.check(9.5), v0.parse(" 12 ")
        ('a number in [4, 14] m/s', 9.5, 12.0)
        >>> Option("sigma", "σ", float, "m/s", 0.0, None, True).accepts()
        'a number > 0 m/s'
    """

    name: str
    help: str
    kind: type = float
    unit: str = ""
    minimum: float | None = None
    maximum: float | None = None
    exclusive: bool = False
    default: Any = None
    multiple_of: int | None = None

    def accepts(self) -> str:
        """What :meth:`check` accepts, in words (for error messages and help).

        Example:
            >>> from diffsim.estimators import Option
            >>> Option("steps", "horizon", int, "", 0).accepts()
            'an integer >= 0'
            >>> Option("num_samples", "N", int, "", 4, multiple_of=2).accepts()
            'an even integer >= 4'
        """
        if self.kind is bool:
            return "true or false"
        what = "an integer" if self.kind is int else "a number"
        if self.kind is int and self.multiple_of == 2:
            what = "an even integer"
        elif self.kind is int and self.multiple_of:
            what = f"an integer multiple of {self.multiple_of}"
        unit = f" {self.unit}" if self.unit else ""
        lo, hi = (None if b is None else self._shown(b) for b in (self.minimum, self.maximum))
        if lo is not None and hi is not None:
            left, right = ("(", ")") if self.exclusive else ("[", "]")
            return f"{what} in {left}{lo}, {hi}{right}{unit}"
        if lo is not None:
            return f"{what} {'>' if self.exclusive else '>='} {lo}{unit}"
        if hi is not None:
            return f"{what} {'<' if self.exclusive else '<='} {hi}{unit}"
        return f"{what}{unit}"

    def _shown(self, bound: float) -> str:
        """A bound as text: an integer option's in full (2147483647, not 2.14748e+09)."""
        return str(int(bound)) if self.kind is int and bound == int(bound) else f"{bound:g}"

    def _ok(self, value: Any) -> bool:
        if self.kind is bool:
            return isinstance(value, bool)
        if isinstance(value, bool) or not isinstance(value, (int, float)):
            return False
        try:  # before int(value), which raises on inf and NaN
            if not math.isfinite(value):
                return False
        except OverflowError:  # an int beyond float's range
            return False
        if self.kind is int and value != int(value):
            return False
        if self.kind is int and self.multiple_of and int(value) % self.multiple_of:
            return False
        lo, hi = self.minimum, self.maximum
        if self.exclusive:
            return (lo is None or value > lo) and (hi is None or value < hi)
        return (lo is None or value >= lo) and (hi is None or value <= hi)

    def check(self, value: Any) -> Any:
        """``value`` (a Python or NumPy scalar) as this option's kind, if it is one it accepts.

        Raises:
            ValueError: naming the option, what it accepts and what was given.

        Example:
            >>> from diffsim.estimators import Option
            >>> Option("num_samples", "N", int, "", 2).check(1)
            Traceback (most recent call last):
            ...
            ValueError: num_samples must be an integer >= 2, got 1
        """
        try:
            plain = value.item() if hasattr(value, "item") else value
        except (TypeError, ValueError):
            plain = value
        if not self._ok(plain):
            raise ValueError(f"{self.name} must be {self.accepts()}, got {value!r}")
        return self.kind(plain)

    def parse(self, text: str) -> Any:
        """The value ``text`` gives this option: of its kind, finite and in its range.

        Raises:
            ValueError: naming the option, what it accepts and what was given.

        Example:
            >>> from diffsim.estimators import Option
            >>> toi = Option("toi", "time-of-impact correction", bool, default=True)
            >>> toi.parse("false"), Option("k", "stiffness", float, "N/m", 0.0).parse("1e5")
            (False, 100000.0)
        """
        words = text.strip().lower()
        value: Any = None
        if self.kind is bool:
            value = {"true": True, "1": True, "false": False, "0": False}.get(words)
        else:
            try:
                value = float(words)
                if self.kind is int and value == int(value):
                    value = int(value)
            except (TypeError, ValueError, OverflowError):
                value = None
        if value is None or not self._ok(value):
            raise ValueError(f"{self.name} must be {self.accepts()}, got {text!r}")
        return value
