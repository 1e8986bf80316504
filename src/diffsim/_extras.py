"""The optional parts of diffsim and the pip extras that install them.

``pip install .`` (``diffsim-jax``) gives the library: JAX, Optax, Equinox, Optimistix,
jaxtyping and NumPy. The command line, the figures and the demo page are extras, imported
only when used; a missing one is a :class:`MissingExtraError` whose message is one line
naming what is missing and the pip command that installs it.
"""

from __future__ import annotations

import importlib

EXTRAS: dict[str, tuple[str, tuple[str, ...]]] = {
    "cli": ("the diffsim command", ("typer", "rich")),
    "plots": ("diffsim's figures", ("matplotlib",)),
    "demo": ("the demo page", ("dash", "plotly")),
}
"""Each extra: what it gives, and the modules it installs (``pyproject.toml``'s extras;
``all`` installs the three)."""


class MissingExtraError(ImportError):
    """An optional part of diffsim is used without the extra that installs it.

    Example:
        >>> import diffsim
        >>> try:
        ...     import diffsim.app  # needs the demo extra (Dash, Plotly)
        ... except diffsim.MissingExtraError as error:  # without it: one line, what to install
        ...     print(error)
        >>> issubclass(diffsim.MissingExtraError, ImportError)
        True
    """


def require_extra(extra: str) -> None:
    """Import the modules of ``extra``, or raise :class:`MissingExtraError` naming them and
    the install command.

    Example:
        >>> from diffsim import EXTRAS, require_extra
        >>> list(EXTRAS)  # pip install '.[NAME]' (and '.[all]' for the three)
        ['cli', 'plots', 'demo']
        >>> require_extra("cli")  # typer and rich import: nothing happens
        >>> require_extra("gui")
        Traceback (most recent call last):
        ...
        ValueError: extra must be one of cli, plots, demo, got 'gui'
    """
    if extra not in EXTRAS:
        raise ValueError(f"extra must be one of {', '.join(EXTRAS)}, got {extra!r}")
    what, modules = EXTRAS[extra]
    missing = []
    for module in modules:
        try:
            importlib.import_module(module)
        except ImportError:
            missing.append(module)
    if missing:
        raise MissingExtraError(
            f"{what} needs {' and '.join(missing)}, not installed: pip install "
            f"'diffsim-jax[{extra}]' (from a clone: pip install '.[{extra}]'; '.[all]' installs "
            "the command, the figures and the demo page)"
        )
