"""The launcher's files as the pods get them: read from the installed package, once per process.

The launcher (`compiler/launcher/`) is an ordinary package; its ConfigMap carries the package's
own modules, read here because the compiler proper does no I/O (it gets them as a
`LauncherProgram`). The pods mount them as a directory that is a package, and start it with
`start.py`, shipped as `tfcompile-launcher.py`.
"""

from __future__ import annotations

import functools
from importlib import resources

from tfcompile.compiler.launcher import program
from tfcompile.compiler.objects.launcher import PROGRAM_FILE, LauncherProgram

ENTRY_MODULE = "start.py"
"""The module the container's command runs, shipped as `PROGRAM_FILE`."""


@functools.cache
def shipped_launcher() -> LauncherProgram:
    """The launcher of this installation, with the protocol its modules speak."""
    package = resources.files("tfcompile.compiler.launcher")
    files = []
    for entry in package.iterdir():
        if entry.is_file() and entry.name.endswith(".py"):
            name = PROGRAM_FILE if entry.name == ENTRY_MODULE else entry.name
            files.append((name, entry.read_text(encoding="utf-8")))
    return LauncherProgram(files=tuple(sorted(files)), protocol=program.PROTOCOL)
