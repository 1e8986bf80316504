"""``python -m diffsim``: the same as the ``diffsim`` command."""

from .cli import main

main()
