"""Shared test fixtures: float64 on, a PRNG key, tree comparison, registries."""

from __future__ import annotations

import os

os.environ.setdefault("XLA_FLAGS", "--xla_cpu_multi_thread_eigen=false")

import jax

jax.config.update("jax_enable_x64", True)

import jax.numpy as jnp  # noqa: E402
import numpy as np  # noqa: E402
import pytest  # noqa: E402
from hypothesis import HealthCheck, settings  # noqa: E402

from diffsim import estimators, integrators, systems  # noqa: E402

INTEGRATORS = dict(integrators.INTEGRATORS)
ESTIMATORS = estimators.ESTIMATORS
"""Every registered estimator: tests that take ``estimator_name`` run once per entry."""
SYSTEMS = systems.SYSTEMS
"""Every registered system: tests that take ``system_name`` run once per entry."""


def pytest_generate_tests(metafunc):
    # the registries drive the shared tests: a new estimator or system is tested by them
    # as soon as its registry line exists
    if "estimator_name" in metafunc.fixturenames:
        metafunc.parametrize("estimator_name", list(ESTIMATORS))
    if "system_name" in metafunc.fixturenames:
        metafunc.parametrize("system_name", list(SYSTEMS))


# Hypothesis profiles (the fuzz suite in tests/fuzz): ``ci`` by default, a short run in every
# job; ``DIFFSIM_FUZZ=long`` for eight times as many cases on demand. Every fuzz test asserts
# one of exactly two outcomes: a finite, correctly typed result, or a clean ValueError /
# TypeError (CLI: one line on stderr, exit code 2; HTTP: a 4xx, the server still up).
settings.register_profile(
    "ci",
    max_examples=60,
    deadline=None,
    derandomize=True,
    suppress_health_check=[HealthCheck.too_slow, HealthCheck.function_scoped_fixture],
)
settings.register_profile(  # about 30 min with -n 2 (the ci profile: 5 min)
    "long",
    max_examples=500,
    deadline=None,
    suppress_health_check=[HealthCheck.too_slow, HealthCheck.function_scoped_fixture],
)
settings.load_profile(os.environ.get("DIFFSIM_FUZZ", "ci"))


class _Result:
    """A CliRunner result whose ``output`` is stdout and stderr together, as in Click 8.2+."""

    def __init__(self, result):
        self._result = result

    def __getattr__(self, name):
        return getattr(self._result, name)

    @property
    def output(self) -> str:
        return self._result.stdout + self._result.stderr


class _Runner:
    def __init__(self, runner):
        self._runner = runner

    def invoke(self, *args, **kwargs):
        return _Result(self._runner.invoke(*args, **kwargs))


def cli_runner():
    """Typer's CliRunner with ``.stdout``, ``.stderr`` and ``.output`` (both) on every Click:
    older Click (as with the oldest supported Typer) mixes the streams unless told not to,
    and then leaves stderr out of ``.output``; Click 8.2+ always separates them."""
    from typer.testing import CliRunner

    try:
        return _Runner(CliRunner(mix_stderr=False))  # type: ignore[call-arg]
    except TypeError:
        return CliRunner()


_MARK_BY_FILE = {"test_demo_browser.py": "browser", "test_bench.py": "peers"}
"""Whole files that belong to the separate job (scripts/test-slow): real Chromium, and the
peer frameworks of the benchmark (Warp, Taichi, PyTorch, the compiled C reference)."""


_SLOW_TESTS = (
    # each measured at >= 10 s on 2 cores (``pytest --durations``, 2026-12-01): they run in
    # scripts/test-slow, so that the default command stays under 10 minutes
    "src/diffsim/doctor/_diagnose.py::diffsim.doctor._diagnose.diagnose_rollout",
    "src/diffsim/engines/brax.py::diffsim.engines.brax.BraxStep",
    "src/diffsim/engines/control.py::diffsim.engines.control.reacher_open_loop",
    "src/diffsim/estimators/auto.py::diffsim.estimators.auto.Auto",
    "src/diffsim/systems/wall_study.py::diffsim.systems.wall_study.optimize_wall",
    "tests/fuzz/test_fuzz_cli.py::test_fuzz_command[optimize]",
    "tests/fuzz/test_fuzz_cli.py::test_fuzz_command[estimate]",
    "tests/fuzz/test_fuzz_cli.py::test_fuzz_command[diagnose]",
    "tests/fuzz/test_fuzz_cli.py::test_fuzz_command[jacobian]",
    "tests/fuzz/test_fuzz_cli.py::test_fuzz_command[wall]",
    "tests/fuzz/test_fuzz_cli.py::test_fuzz_diagnose_mjcf_cost_is_checked_before_compiling",
    "tests/fuzz/test_fuzz_library.py::test_diagnose",
    "tests/fuzz/test_fuzz_library.py::test_estimators",
    "tests/test_auto.py::test_auto_inside_jit_and_vmap_over_starts",
    "tests/test_auto.py::test_many_parameters_are_still_trusted",
    "tests/test_auto.py::test_sigma_forms_and_relative_default",
    "tests/test_auto.py::test_wall_near_the_cliff_follows_the_smoothed_loss",
    "tests/test_auto.py::test_wall_basin_gets_the_exact_gradient",
    "tests/test_auto.py::test_stiff_contact_auto_and_the_doctor_agree",
    "tests/test_bench_sharding.py::test_sharding_benchmark_runs_and_splits_memory",
    "tests/test_cli_estimators.py::test_optimize_defaults_from_plateau",
    "tests/test_cli_estimators.py::test_optimize_exact_stuck_and_text_output",
    "tests/test_cli_hardening.py::test_json_is_strict[args5]",
    "tests/test_demo_app.py::test_gradients_are_looked_up_by_name",
    "tests/test_demo_app.py::test_optimize_is_the_clis_recipe",
    "tests/test_demo_app.py::test_optimize_smoothed_and_exact",
    "tests/test_diagnose.py::test_chaos_at_long_horizon_only",
    "tests/test_engines_mjx.py::test_reverse_mode_through_free_flight_is_finite_and_exact",
    "tests/test_identify.py::test_bouncing_ball_restitution_and_gravity_noise_free",
    "tests/test_library_hardening.py::test_no_doctor_flag_rests_on_non_finite_statistics",
    "tests/test_library_hardening.py::test_numpy_integer_counts_are_python_ints[auto]",
    "tests/test_one_verdict.py::test_user_sigma_is_used_by_both",
    "tests/test_optimize.py::test_wall_from_plateau_reaches_target[alpha]",
    "tests/test_readme.py::test_readme_python_blocks_run",
    "tests/test_readme.py::test_docs_python_blocks_run[docs/concepts/doctor.md]",
    "tests/test_readme.py::test_docs_python_blocks_run[docs/guides/optimize-contact.md]",
    "tests/test_readme.py::test_docs_python_blocks_run[docs/guides/difftaichi.md]",
    "tests/test_registries.py::test_estimator_declares_and_reports[auto]",
    "tests/test_registries.py::test_estimator_through_the_cli[auto]",
    "tests/test_registries.py::test_worked_example_estimator",
    "tests/test_sharding.py::test_cli_devices_splits_estimate_optimize_and_diagnose",
    "tests/test_sharding.py::test_sharded_",  # the four-device fixture: 190 s to set up
    "tests/test_sharding.py::test_two_processes_give_the_single_process_estimate",
    # each runs `python -m diffsim` in a subprocess: 5-21 s (the diagnose one compiles the
    # doctor); the default suite ran 602 s from a fresh clone with them (2026-12-01)
    "tests/test_doc_outputs.py::test_sample_output_is_what_the_command_prints",
)


def _is_slow(nodeid: str) -> bool:
    return any(
        nodeid == name or nodeid.startswith(name if name.endswith("_") else name + "[")
        for name in _SLOW_TESTS
    )


@pytest.hookimpl(wrapper=True)
def pytest_collection_modifyitems(config, items):
    for item in items:
        mark = _MARK_BY_FILE.get(item.path.name)
        if mark is not None:
            item.add_marker(getattr(pytest.mark, mark))
        if _is_slow(item.nodeid):
            item.add_marker(pytest.mark.slow)
    yield  # `-m` deselects by the marks above; xdist's worker keys each grouped test
    if getattr(config.option, "loadgroup", False):
        _key_by_group(items)


def _key_by_group(items) -> None:
    """Make xdist's `@group` suffix the test's id, as pytest < 9 did.

    pytest-xdist (3.8) keys a test to its `xdist_group` by assigning `item._nodeid`
    ("...::test@group"), which pytest 9 no longer reads: `Node.nodeid` is `str(item._id)`.
    Without this the scheduler never sees a group, spreads its tests over both workers, and
    each worker builds the group's fixture again (four devices, the page's server, Brax).
    """
    try:
        from _pytest.nodeid import coerce_node_id
    except ImportError:  # pytest < 9 reads `_nodeid` itself
        return
    for item in items:
        grouped = getattr(item, "_nodeid", None)
        if isinstance(grouped, str) and grouped != item.nodeid:
            item._id = coerce_node_id(grouped)


@pytest.fixture
def key():
    return jax.random.PRNGKey(0)


def tree_allclose(a, b, *, rtol=1e-7, atol=1e-9) -> bool:
    la, ta = jax.tree_util.tree_flatten(a)
    lb, tb = jax.tree_util.tree_flatten(b)
    if ta != tb:
        return False
    return all(
        np.allclose(np.asarray(x), np.asarray(y), rtol=rtol, atol=atol) for x, y in zip(la, lb)
    )


def central_fd(f, x, eps=1e-6):
    """Central finite-difference Jacobian of f: R^n -> R^m, in float64."""
    x = jnp.asarray(x, jnp.float64)
    cols = []
    for i in range(x.size):
        e = jnp.zeros_like(x).at[i].set(eps)
        cols.append((jnp.ravel(f(x + e)) - jnp.ravel(f(x - e))) / (2 * eps))
    return jnp.stack(cols, axis=1)


def _memory_map_count() -> int | None:
    try:
        with open("/proc/self/maps", "rb") as f:
            return sum(1 for _ in f)
    except OSError:  # not Linux
        return None


def _max_map_count() -> int:
    try:
        with open("/proc/sys/vm/max_map_count") as f:
            return int(f.read())
    except (OSError, ValueError):
        return 65530


@pytest.fixture(autouse=True)
def _release_compiled_programs():
    """Free JAX's compiled programs when the process nears the kernel's limit on memory
    mappings (``vm.max_map_count``, 65,530 by default). XLA:CPU maps each loaded executable's
    code in many pieces; the MJX tests load enough programs in one process to reach the
    limit, and the next compilation then fails inside XLA — and the C++ exception carrying
    that error crashes the interpreter (SIGABRT/SIGSEGV) instead of reaching Python."""
    yield
    n = _memory_map_count()
    if n is not None and n > _max_map_count() // 2:
        jax.clear_caches()
        import gc

        gc.collect()


def request_with_host(
    flask_app, host: str | None, path: str = "/", *, method: str = "GET", data=b"", headers=None
) -> tuple[int, bytes, dict]:
    """``method path`` through ``flask_app`` (WSGI) with the raw ``Host`` header ``host``
    (``None``: the default, localhost): the environ is built without one and ``HTTP_HOST``
    set afterwards, so that no client library parses or refuses the header first (older
    Werkzeug's test client raises on a bad port or an unclosed ``[``) and the server's own
    check answers it. Returns ``(status code, body, response headers)``."""
    from werkzeug.test import EnvironBuilder, run_wsgi_app

    rest = {k: v for k, v in (headers or {}).items() if k.lower() != "host"}
    environ = EnvironBuilder(path=path, method=method, data=data, headers=rest).get_environ()
    if host is not None:
        environ["HTTP_HOST"] = host
    app_iter, status, response_headers = run_wsgi_app(flask_app, environ, buffered=True)
    return int(str(status).split()[0]), b"".join(app_iter), dict(response_headers)


def get_with_host(flask_app, host: str, path: str = "/") -> tuple[int, bytes]:
    """``GET path`` with the raw ``Host`` header ``host`` (:func:`request_with_host`)."""
    code, body, _ = request_with_host(flask_app, host, path)
    return code, body
