"""The one base class of every error a user is meant to read.

Each subclass's message says what is wrong, where (the recipe key, the path, the option)
and how to fix it. The CLI prints any :class:`SweepError` as one ``sweep CMD: error: ...``
line and exits with its ``exit_code``: 2 for bad input (nothing started or written), 1 for a
sweep that could not go on (a batch submission refused, a search stopped, its store moved),
3 for a full disk (what was written is kept). Standard library only: the child imports this
package before pinning.
"""

from __future__ import annotations


class SweepError(Exception):
    """An error with a message written for the user (what, where, how to fix).

    ``exit_code`` is what the ``sweep`` command exits with: 2 (bad input, nothing started)
    unless a subclass says otherwise.
    """

    exit_code = 2


class UsageError(SweepError, ValueError):
    """A command-line argument that can't work (a store that isn't one, an export format)."""


class RecipeError(SweepError, ValueError):
    """An invalid recipe. ``str()`` is one line per problem: ``where: key: what; fix``."""


class SweepWarning(UserWarning):
    """Something that works but may not do what you want (a tight ``ulimit -u``, TLS off)."""
