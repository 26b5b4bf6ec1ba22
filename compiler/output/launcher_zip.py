"""The launcher as the pods get it: one zip application of the installed package's modules.

The launcher (`compiler/launcher/`) is an ordinary package; the job's launcher ConfigMap carries
its modules zipped (`binaryData`; `objects/builders/launcher_config_map.py` says why a zip
and what a
reviewer keeps), built here because the compiler proper does no I/O (it gets the zip as a
`LauncherProgram`). Python runs a zip whose top holds `__main__.py` as it runs a script
(`python tfcompile-launcher.pyz --role=ROLE -- COMMAND`), with the zip first on its path, and
imports from it with zipimport, which CPython 3.8 to 3.13 and PyPy have (the slow tier runs the
zip with every Python it finds). `start.py` is the zip's `__main__.py`; the other modules are the
package `start.PACKAGE`, so their relative imports work as in the installed package.

The zip must be the same bytes on every machine and every run, or `build --check` would call a
clean tree stale on another CI runner: entries sorted by name, each stored (not deflated: zlib's
output at a given level differs between zlib versions and zlib-ng, and with it the bytes, while
stored bytes depend on nothing but the text), a fixed time (1980-01-01, the earliest a zip can
hold), fixed permissions (a regular file, 0644) and a fixed creating system (Unix, where
`zipfile` would say Windows on Windows). The zip's entries are the modules' UTF-8 bytes, read
from the installed package (no file system's order, owner or time reaches the zip). Measured:
CPython 3.8 to 3.13, PyPy 3.9 and Debian's 3.11 build the same bytes from the same modules, and
run the zip (3.7 too; 2.7 and 3.6 cannot read the launcher's syntax, as before). The zip is
~54 KB, ~72 KB as base64, of the ConfigMap's 1 MiB.
"""

from __future__ import annotations

import functools
import io
import zipfile
from importlib import resources

from tfcompile.compiler.launcher import start
from tfcompile.compiler.launcher.protocol import PROTOCOL
from tfcompile.compiler.objects.launcher_interface import LauncherProgram

ENTRY_MODULE = "start.py"
"""The module the container's command runs: the zip's `__main__.py`."""
MAIN = "__main__.py"
TIMESTAMP = (1980, 1, 1, 0, 0, 0)
"""Every entry's time: the earliest a zip can hold, never the machine's clock or a file's."""
FILE_MODE = 0o100644
"""A regular file readable by all, as a Unix zip tool records it (`external_attr`'s high half)."""
UNIX = 3
"""`create_system` of every entry: the same bytes whatever system builds the zip."""


def launcher_modules() -> tuple[tuple[str, str], ...]:
    """The installed launcher's modules as the zip holds them, (path in the zip, text), sorted
    by path: `start.py` as `__main__.py`, the others under `start.PACKAGE/`."""
    package = resources.files("tfcompile.compiler.launcher")
    modules = []
    for entry in package.iterdir():
        if entry.is_file() and entry.name.endswith(".py"):
            path = MAIN if entry.name == ENTRY_MODULE else f"{start.PACKAGE}/{entry.name}"
            modules.append((path, entry.read_text(encoding="utf-8")))
    return tuple(sorted(modules))


def launcher_archive(modules: tuple[tuple[str, str], ...]) -> bytes:
    """The zip application of `modules` (path in the zip, text): the same bytes for the same
    modules, on any machine and Python."""
    buffer = io.BytesIO()
    with zipfile.ZipFile(buffer, "w", compression=zipfile.ZIP_STORED) as archive:
        for path, text in sorted(modules):
            info = zipfile.ZipInfo(path, date_time=TIMESTAMP)
            info.compress_type = zipfile.ZIP_STORED
            info.create_system = UNIX
            info.external_attr = FILE_MODE << 16
            archive.writestr(info, text.encode("utf-8"))
    return buffer.getvalue()


def launcher_program(modules: tuple[tuple[str, str], ...],
                     protocol: int = PROTOCOL) -> LauncherProgram:
    """The launcher made of `modules`, speaking `protocol`."""
    return LauncherProgram(archive=launcher_archive(modules), protocol=protocol)


@functools.cache
def shipped_launcher() -> LauncherProgram:
    """The launcher of this installation, with the protocol its modules speak."""
    return launcher_program(launcher_modules())
