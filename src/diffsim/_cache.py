"""JAX's persistent compilation cache, for the processes diffsim starts (the CLI, the demo).

XLA compiles every new program once per process; the doctor on a MuJoCo model compiles for
minutes (gymnasium's walker2d: 2 min 8 s for its batch alone). With the cache on, a second
run of the same command reads the compiled programs from disk. The CLI and the demo turn
it on by default; a library user turns it on with one call (diffsim does not change JAX's
configuration on import: it would cache the user's other programs too).
"""

from __future__ import annotations

import os
from pathlib import Path

CACHE_ENV = "DIFFSIM_JAX_CACHE"
"""The environment variable that moves the cache (a directory) or turns it off (``off``)."""


def default_cache_dir() -> Path | None:
    """Where the cache lives: ``$DIFFSIM_JAX_CACHE``, else ``~/.cache/diffsim/jax``;
    ``None`` when the variable says ``off`` (or ``0``, ``none``)."""
    value = os.environ.get(CACHE_ENV)
    if value is not None and value.strip().lower() in ("off", "0", "none", "false"):
        return None
    return Path(value) if value else Path.home() / ".cache" / "diffsim" / "jax"


def enable_compilation_cache(
    cache_dir: str | os.PathLike | None = None, *, min_compile_seconds: float = 1.0
) -> Path | None:
    """Turn on JAX's persistent compilation cache in ``cache_dir`` (default
    :func:`default_cache_dir`) for programs that took at least ``min_compile_seconds`` to
    compile; return the directory, or ``None`` when off (``DIFFSIM_JAX_CACHE=off``) or
    when the directory cannot be made. A cache directory already configured for JAX is kept
    (and returned).

    Example:
        >>> import tempfile, jax
        >>> from diffsim import enable_compilation_cache
        >>> before = jax.config.jax_compilation_cache_dir
        >>> d = enable_compilation_cache(tempfile.mkdtemp())  # None where it cannot run
        >>> d is None or str(d) == jax.config.jax_compilation_cache_dir
        True
        >>> jax.config.update("jax_compilation_cache_dir", before)  # as it was
    """
    import jax

    # JAX sets its flags as attributes at run time; its Config class does not declare them
    configured = jax.config.jax_compilation_cache_dir  # pyright: ignore[reportAttributeAccessIssue]
    if configured:
        return Path(configured)
    if cache_dir is None:
        cache_dir = default_cache_dir()
        if cache_dir is None:
            return None
    try:
        Path(cache_dir).mkdir(parents=True, exist_ok=True)
    except OSError:
        return None  # a read-only home: run without the cache
    jax.config.update("jax_compilation_cache_dir", str(cache_dir))
    jax.config.update("jax_persistent_cache_min_compile_time_secs", float(min_compile_seconds))
    jax.config.update("jax_persistent_cache_min_entry_size_bytes", 0)
    # JAX's cache reads and writes through etils.epath (JAX 0.4.38 needs it, and it breaks
    # without importlib_resources): checked by importing it, not by compiling, which would
    # start JAX's backend before the CLI's --devices could choose the devices
    try:
        from etils import epath  # noqa: F401
    except Exception:
        jax.config.update("jax_compilation_cache_dir", None)
        return None
    return Path(cache_dir)
