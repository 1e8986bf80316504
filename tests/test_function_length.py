"""No function in src/diffsim is longer than MAX_LINES lines of code, its docstring excluded
(STYLE.md: a longer function is split by what its parts do)."""

from __future__ import annotations

import ast
import textwrap
from pathlib import Path

SRC = Path(__file__).resolve().parents[1] / "src" / "diffsim"
MAX_LINES = 120


def code_lines(fn: ast.FunctionDef | ast.AsyncFunctionDef) -> int:
    """Lines from the ``def`` (decorators left out) to the function's last line, less its
    docstring's lines: the signature and the body, blank lines and comments included."""
    assert fn.end_lineno is not None
    n = fn.end_lineno - fn.lineno + 1
    first = fn.body[0]
    if (
        isinstance(first, ast.Expr)
        and isinstance(first.value, ast.Constant)
        and isinstance(first.value.value, str)
    ):
        assert first.end_lineno is not None
        n -= first.end_lineno - first.lineno + 1
    return n


def function_lengths(source: str) -> dict[str, int]:
    """Each function's (and method's, nested ones too) :func:`code_lines`, by qualified
    name and line."""
    out = {}

    def visit(node: ast.AST, prefix: str) -> None:
        for child in ast.iter_child_nodes(node):
            name = prefix
            if isinstance(child, (ast.FunctionDef, ast.AsyncFunctionDef)):
                name = f"{prefix}{child.name}"
                out[f"{name}:{child.lineno}"] = code_lines(child)
            elif isinstance(child, ast.ClassDef):
                name = f"{prefix}{child.name}"
            visit(child, f"{name}." if name != prefix else prefix)

    visit(ast.parse(source), "")
    return out


def test_the_measure_counts_code_and_leaves_out_the_docstring():
    body = "\n".join(f"    x{i} = {i}" for i in range(128))
    docstring = '    """One line.\n\n    Three more\n    lines.\n    """'
    source = f"def long(a, b):\n{docstring}\n{body}\n    return x0\n"
    # 1 (def) + 128 assignments + 1 (return): 130 lines of code; the 5-line docstring is out
    assert function_lengths(source) == {"long:1": 130}
    nested = textwrap.dedent('''
        class A:
            @property
            def f(self):
                """Doc."""

                def g():
                    return 1

                return g()
        ''')
    assert function_lengths(nested) == {"A.f:4": 6, "A.f.g:7": 2}


def test_no_function_in_src_is_longer_than_the_limit():
    files = sorted(SRC.rglob("*.py"))
    assert len(files) > 50  # the package, not an empty folder
    too_long = {
        f"{path.relative_to(SRC)}:{name}": n
        for path in files
        for name, n in function_lengths(path.read_text(encoding="utf-8")).items()
        if n > MAX_LINES
    }
    assert not too_long, f"functions over {MAX_LINES} lines of code: {too_long}"
