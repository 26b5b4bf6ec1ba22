"""How a container's paths map under its root overlay, symbolic links followed inside it."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from tfcompile.compiler.local_run.filesystem_view import ContainerFilesystem, open_beneath


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


def test_a_sub_path_is_opened_beneath_its_volume_and_never_through_a_link(
        tmp_path: Path) -> None:
    volume = tmp_path / "volume"
    (volume / "data" / "inner").mkdir(parents=True)
    (volume / "data" / "file").write_text("mine")
    outside = tmp_path / "outside"
    outside.mkdir()
    (outside / "secret").write_text("host's")
    os.symlink(outside, volume / "link")
    os.symlink("../outside", volume / "data" / "relative")
    descriptor = open_beneath(str(volume), "data/file", create=False)
    try:
        assert os.readlink(f"/proc/self/fd/{descriptor}") == str(volume / "data" / "file")
    finally:
        os.close(descriptor)
    for sub_path, refused in (("link", "link is a symbolic link"),
                              ("link/secret", "link is a symbolic link"),
                              ("data/relative/secret", "data/relative is a symbolic link"),
                              ("data/file/below", "data/file is not a directory"),
                              ("data/../link", "holds '..'"),
                              ("/etc", "is absolute")):
        with pytest.raises(OSError, match=refused):
            open_beneath(str(volume), sub_path, create=True)
    assert sorted(p.name for p in outside.iterdir()) == ["secret"]


def test_a_missing_sub_path_is_made_like_its_volume_and_only_inside_it(tmp_path: Path) -> None:
    volume = tmp_path / "volume"
    volume.mkdir()
    volume.chmod(0o2775)
    outside = tmp_path / "outside"
    outside.mkdir()
    os.symlink(outside, volume / "link")
    descriptor = open_beneath(str(volume), "a/b/c", create=True)
    os.close(descriptor)
    made = volume / "a" / "b" / "c"
    assert made.is_dir() and not made.is_symlink()
    assert oct(made.stat().st_mode & 0o7777) == oct(0o2775)
    assert (made.stat().st_uid, made.stat().st_gid) == (volume.stat().st_uid,
                                                         volume.stat().st_gid)
    with pytest.raises(OSError, match="link is a symbolic link"):
        open_beneath(str(volume), "link/new", create=True)
    assert list(outside.iterdir()) == []
    with pytest.raises(FileNotFoundError):
        open_beneath(str(volume), "missing", create=False)
