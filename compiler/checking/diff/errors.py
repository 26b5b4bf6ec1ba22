"""The one error of `diff`: an output tree, or a BASE, that cannot be read."""

from __future__ import annotations


class DiffInputError(Exception):
    """An output tree that cannot be read; the message is one line saying where and why."""
