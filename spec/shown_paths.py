"""How a file's path is shown in a problem: relative to the working directory when inside it.

Apart from `problems.py`, which holds what a problem is and no file system: the compiler proper
imports problems, and reads no file and no working directory.
"""

from __future__ import annotations

import os
from pathlib import Path


def display_path(path: Path) -> str:
    """A path as the user should read it: relative to the working directory when inside it."""
    try:
        return os.path.relpath(path)
    except ValueError:
        return str(path)
