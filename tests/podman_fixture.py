"""The podman run-local drives in the tests: scripts/podman.sh's private image store, holding the
images scripts/node-images.sh builds on this machine (no registry), and its configuration.

`podman_images` loads the images once per session and points podman at that store for the
session (CONTAINERS_CONF, CONTAINERS_STORAGE_CONF); the machine's own podman storage and
networks are never touched. One warm-up container runs first, so that what podman sets up once
per store (its storage's own mounts) is there before a test compares the host before and after.
"""

from __future__ import annotations

import os
import shutil
import subprocess
from collections.abc import Iterator
from pathlib import Path

import pytest

REPOSITORY = Path(__file__).resolve().parents[1]
SMALL_IMAGE = "docker.io/library/python:3.11"
LOAD_SECONDS = 1800


def podman_environment() -> dict[str, str]:
    """CONTAINERS_CONF and CONTAINERS_STORAGE_CONF of the project's podman."""
    printed = subprocess.run(["bash", str(REPOSITORY / "scripts/podman.sh"), "environment"],
                             capture_output=True, text=True, check=True).stdout
    found = {}
    for line in printed.splitlines():
        name, _, value = line.removeprefix("export ").partition("=")
        found[name] = value
    return found


@pytest.fixture(scope="session")
def podman_images() -> Iterator[dict[str, str]]:
    if os.geteuid() != 0:
        pytest.fail("run-local runs podman as root", pytrace=False)
    if shutil.which("podman") is None:
        pytest.fail("podman is not installed (apt-get install podman; scripts/setup.sh does "
                    "as root)", pytrace=False)
    loaded = subprocess.run(["bash", str(REPOSITORY / "scripts/podman.sh"), "load"],
                            capture_output=True, text=True, timeout=LOAD_SECONDS, check=False)
    if loaded.returncode != 0:
        pytest.fail(f"scripts/podman.sh load failed:\n{loaded.stderr[-3000:]}", pytrace=False)
    environment = podman_environment()
    saved = {name: os.environ.get(name) for name in environment}
    os.environ.update(environment)
    try:
        subprocess.run(["podman", "run", "--rm", "--pull", "never", SMALL_IMAGE, "true"],
                       check=True, capture_output=True, timeout=300)
        yield environment
    finally:
        for name, value in saved.items():
            if value is None:
                os.environ.pop(name, None)
            else:
                os.environ[name] = value
