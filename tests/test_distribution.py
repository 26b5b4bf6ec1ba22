"""What `pip install` of this repository ships, built the way pip builds it.

A user installs tfcompile from its git repository; the wheel is what lands in site-packages.
It must hold the packages under their import names (no top-level `spec` or `compiler`), the
files the commands read at run time (the JSON Schema, the scaffold's templates, the Kustomize
Components), and the build must not print setuptools warnings, which read like a broken
package.
"""

from __future__ import annotations

import shutil
import subprocess
import sys
import zipfile
from pathlib import Path

import pytest

from tests.conftest import REPOSITORY

pytestmark = pytest.mark.slow


def test_the_wheel_ships_the_packages_and_their_files_and_builds_without_warnings(
        tmp_path: Path) -> None:
    # From a copy without what earlier builds left in the working tree (build/ is reused).
    source = tmp_path / "source"
    shutil.copytree(REPOSITORY, source, ignore=lambda directory, names: [
        name for name in names if name == "__pycache__" or (Path(directory) == REPOSITORY
        and (name.startswith(".") or name in ("build", "output", "tests", "examples")
             or name.endswith(".egg-info")))])
    built = subprocess.run(
        [sys.executable, "-m", "pip", "wheel", "--no-deps", "--no-build-isolation",
         "--wheel-dir", str(tmp_path), str(source)],
        capture_output=True, text=True, check=False, timeout=300,
        cwd=tmp_path, env={"PATH": str(Path(sys.executable).parent), "HOME": str(tmp_path)},
    )
    assert built.returncode == 0, built.stderr
    assert "warning" not in (built.stdout + built.stderr).lower(), built.stderr
    (wheel,) = tmp_path.glob("tfcompile-*.whl")
    names = set(zipfile.ZipFile(wheel).namelist())
    top_level = {name.split("/")[0] for name in names}
    assert {name for name in top_level if not name.endswith(".dist-info")} == {"tfcompile"}
    assert not any(name.startswith(("tfcompile/compiler/node_agent", "tests/")) for name in names)
    for shipped in ("tfcompile/spec/trainingjob.schema.json",
                    "tfcompile/compiler/scaffold/files/applicationset.yaml",
                    "tfcompile/compiler/scaffold/files/health.lua",
                    "tfcompile/overlays/gpu/kustomization.yaml",
                    "tfcompile/overlays/azure/kustomization.yaml",
                    "tfcompile/overlays/azure/storage-class.yaml",
                    "tfcompile/overlays/azure-smb/kustomization.yaml",
                    "tfcompile/compiler/checking/diff/comparison.py",
                    "tfcompile/spec/py.typed", "tfcompile/compiler/py.typed"):
        assert shipped in names
