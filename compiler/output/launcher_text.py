"""The launcher's text as the pods get it: read from the installed package, once per process.

The launcher (`compiler/launcher/program.py`) is an ordinary module; its ConfigMap carries the
module's own text, read here because the compiler proper does no I/O (it gets the text as a
`LauncherProgram`).
"""

from __future__ import annotations

import functools
from importlib import resources

from tfcompile.compiler.launcher import program
from tfcompile.compiler.objects.launcher import LauncherProgram

PROGRAM_MODULE = "program.py"


@functools.cache
def shipped_launcher() -> LauncherProgram:
    """The launcher of this installation, with the protocol its text speaks."""
    package = resources.files("tfcompile.compiler.launcher")
    text = package.joinpath(PROGRAM_MODULE).read_text(encoding="utf-8")
    return LauncherProgram(text=text, protocol=program.PROTOCOL)
