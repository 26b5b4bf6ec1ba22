"""How a container's paths map under its root overlay, symbolic links followed inside it."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from tfcompile.compiler.local_run.filesystem_view import ContainerFilesystem


def test_paths_resolve_inside_the_root(tmp_path: Path) -> None:
    view = ContainerFilesystem(str(tmp_path))
    root = tmp_path / "root"
    (root / "run").mkdir(parents=True)
    (root / "var").mkdir()
    os.symlink("/run", root / "var" / "run")
    os.symlink("../run/inner", root / "var" / "relative")
    os.symlink("loop", root / "loop")
    assert view.host_path("/var/run/x") == f"{root}/run/x"
    assert view.host_path("/var/relative/y") == f"{root}/run/inner/y"
    assert view.host_path("/../../etc/./hosts") == f"{root}/etc/hosts"
    assert view.host_path("/") == str(root)
    with pytest.raises(OSError, match="too many symbolic links"):
        view.host_path("/loop/z")
