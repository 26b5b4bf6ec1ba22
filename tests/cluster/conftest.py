"""The cluster tier: one real control plane (scripts/control-plane.sh) for all its tests.

These tests need Go (the control plane is built from source once, then cached) or prebuilt
binaries in TFCOMPILE_CONTROL_PLANE_BINARIES / KUBEBUILDER_ASSETS. Without them the fixture fails
with what is needed: CI must run them. `pytest -m "not cluster"` runs everything else.
"""

from __future__ import annotations

import json
import os
import subprocess
import uuid
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest

from tests.cluster.launcher_policy import apply_launcher_policy
from tests.conftest import REPOSITORY

CONTROL_PLANE = REPOSITORY / "scripts" / "control-plane.sh"
# The Pod Security level the namespaces of the cluster tests enforce: the compiled pods must meet
# "restricted" (non-root, no privilege escalation, drop ALL, RuntimeDefault seccomp).
POD_SECURITY_LEVEL = "restricted"
# The first run builds Kubernetes from source: minutes on a small machine.
_UP_TIMEOUT_SECONDS = 3 * 60 * 60


@dataclass(frozen=True)
class Cluster:
    """A running control plane: its kubeconfig and the environment that points kubectl at it."""

    kubeconfig: Path

    @property
    def environment(self) -> dict[str, str]:
        return {**os.environ, "KUBECONFIG": str(self.kubeconfig)}

    def kubectl(
        self, *arguments: str, input_text: str | None = None, check: bool = True,
        environment: dict[str, str] | None = None,
    ) -> subprocess.CompletedProcess[str]:
        completed = subprocess.run(
            ["kubectl", *arguments], input=input_text, capture_output=True, text=True,
            check=False, timeout=120, env={**self.environment, **(environment or {})},
        )
        if check and completed.returncode != 0:
            raise AssertionError(
                f"kubectl {' '.join(arguments)} failed ({completed.returncode}):\n"
                f"{completed.stderr}{completed.stdout}"
            )
        return completed

    def get_json(self, *arguments: str) -> Any:
        return json.loads(self.kubectl("get", *arguments, "--output=json").stdout)

    def fresh_namespace(self, enforce: str = POD_SECURITY_LEVEL) -> str:
        """A new namespace whose Pod Security admission enforces `enforce`."""
        name = f"test-{uuid.uuid4().hex[:10]}"
        self.kubectl("create", "namespace", name)
        self.kubectl("label", "namespace", name,
                     f"pod-security.kubernetes.io/enforce={enforce}",
                     "pod-security.kubernetes.io/enforce-version=latest")
        return name


@pytest.fixture(scope="package")
def cluster(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Cluster]:
    """`scripts/control-plane.sh up` once, `down` after the last cluster test (also on failure),
    so the rest of the suite does not share the machine with it. The launcher policy that `init`
    writes is applied first, as a user applies it once per cluster: every test runs under it."""
    run_directory = tmp_path_factory.mktemp("control-plane")
    environment = {**os.environ, "TFCOMPILE_CONTROL_PLANE_DIR": str(run_directory)}
    try:
        up = subprocess.run(
            ["bash", str(CONTROL_PLANE), "up"], capture_output=True, text=True, check=False,
            env=environment, timeout=_UP_TIMEOUT_SECONDS,
        )
        if up.returncode != 0:
            pytest.fail(
                "the cluster tests need a local control plane and `scripts/control-plane.sh up` "
                f"failed (exit {up.returncode}):\n{up.stderr}\nIt builds Kubernetes from "
                "source with Go (see docs/development.md, \"The cluster tier of the tests\"), "
                "or takes prebuilt "
                "binaries from TFCOMPILE_CONTROL_PLANE_BINARIES. Run `pytest -m \"not "
                "cluster\"` to leave these tests out.",
                pytrace=False,
            )
        exports = [line for line in up.stdout.splitlines() if line.startswith("export KUBECONFIG=")]
        assert exports, f"`up` printed no KUBECONFIG: {up.stdout!r}"
        kubeconfig = Path(exports[-1].removeprefix("export KUBECONFIG="))
        apply_launcher_policy(kubeconfig, tmp_path_factory.mktemp("repository"))
        yield Cluster(kubeconfig=kubeconfig)
    finally:
        subprocess.run(["bash", str(CONTROL_PLANE), "down"], capture_output=True, check=False,
                       env=environment, timeout=120)
