"""Griffe extension for the API reference: diffsim's docstrings are Google style with a few
reST roles (Sphinx habits). Rendered as Markdown by mkdocstrings, so before parsing:

* ``Example:`` headings become ``Examples:`` (Griffe's examples section, whose ``>>>`` lines
  render as code; a singular heading would be a plain admonition parsed as Markdown);
* ``:func:`x```, ``:class:`x```, ``:math:`x``` and the like become inline code ```x```.

The docstrings stay the source of truth; nothing here changes what they say.
"""

from __future__ import annotations

import re
from typing import Any

import griffe

_HEADING = re.compile(r"^(\s*)Example:[ \t]*$", flags=re.M)
_ROLE = re.compile(r":(?:func|class|data|mod|meth|attr|obj|exc|math):`([^`]*)`")


def rewrite(text: str) -> str:
    text = _HEADING.sub(r"\1Examples:", text)
    return _ROLE.sub(lambda m: f"`{m.group(1)}`", text)


class ReSTRoles(griffe.Extension):
    """Rewrite each docstring once, when Griffe creates its object."""

    def on_instance(self, *, obj: griffe.Object, **kwargs: Any) -> None:
        if obj.docstring is not None:
            obj.docstring.value = rewrite(obj.docstring.value)
