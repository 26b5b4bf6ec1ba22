"""What can stop a write to the output tree, told apart by whose move it is.

`OutputRefused` is a state of the tree tfcompile must not touch (a file it did not write, a
symbolic link, an output path that is a file): the user decides, exit 2. `OutputEnvironmentError`
is the machine saying no (disk full, read-only, permission denied): one line naming the path and
the operating system's reason, exit 1.
"""

from __future__ import annotations

import os
from collections.abc import Sequence
from pathlib import Path


def shown(path: Path | str) -> str:
    """A path as the user should read it: relative to the working directory when inside it."""
    text = os.fspath(path)
    try:
        relative = os.path.relpath(text)
    except ValueError:
        return text
    return text if relative.startswith("..") and os.path.isabs(text) else relative


class OutputRefused(Exception):
    """The output tree holds something tfcompile will not overwrite, delete or follow."""

    def __init__(self, reasons: Sequence[str]) -> None:
        super().__init__("; ".join(reasons))
        self.reasons = list(reasons)


class OutputEnvironmentError(Exception):
    """The file system refused an operation: what, where, and the operating system's reason."""

    def __init__(self, action: str, path: Path | str, error: OSError) -> None:
        reason = error.strerror or type(error).__name__
        super().__init__(f"cannot {action} {shown(path)}: {reason}")
