"""The launcher policy on the test clusters, applied as a user applies it: `tfcompile init` writes
`deploy/cluster/launcher-policy.yaml`, `kubectl apply --server-side -f` applies it once, and the
cluster tests (the local node's release cases included) run under it.

The API server enforces a new policy once its informers have it, a moment after the apply; the
helper waits for that by asking for a dry-run create of a job's state ConfigMap as a launcher
account (impersonated, with every right RBAC can give, so that only the policy can refuse it).
"""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

from tests.cluster.waiting import wait_for
from tfcompile.compiler.objects.names import (
    LAUNCHER_POLICY_FILE,
    LAUNCHER_RECORDS_POLICY,
    LAUNCHER_SCALE_POLICY,
)

_PROBE = """\
apiVersion: v1
kind: ConfigMap
metadata:
  name: probe-state
  namespace: default
  labels: {app.kubernetes.io/managed-by: tfcompile, app.kubernetes.io/component: state}
"""


def _kubectl(kubeconfig: Path, *arguments: str,
             input_text: str | None = None) -> subprocess.CompletedProcess[str]:
    return subprocess.run(["kubectl", f"--kubeconfig={kubeconfig}", *arguments],
                          input=input_text, capture_output=True, text=True, check=False,
                          timeout=120)


def apply_launcher_policy(kubeconfig: Path, directory: Path) -> None:
    """`tfcompile init` into `directory`, apply its launcher policy, wait until it is enforced."""
    init = subprocess.run(
        [sys.executable, "-m", "tfcompile.compiler.cli", "init", str(directory),
         "--tfcompile-requirement", "tfcompile"],
        capture_output=True, text=True, check=False, timeout=300)
    assert init.returncode == 0, init.stderr
    applied = _kubectl(kubeconfig, "apply", "--server-side", "-f",
                       str(directory / LAUNCHER_POLICY_FILE))
    assert applied.returncode == 0, applied.stderr

    def enforced() -> bool:
        for name in (LAUNCHER_SCALE_POLICY, LAUNCHER_RECORDS_POLICY):
            policy = _kubectl(
                kubeconfig, "get", "validatingadmissionpolicy", name,
                "--output=jsonpath={.metadata.generation} {.status.observedGeneration}")
            generation, _, observed = policy.stdout.partition(" ")
            if policy.returncode != 0 or generation != observed:
                return False
        probe = _kubectl(kubeconfig, "create", "--dry-run=server", "-f", "-",
                         "--as=system:serviceaccount:default:probe-launcher",
                         "--as-group=system:masters", input_text=_PROBE)
        return f"ValidatingAdmissionPolicy '{LAUNCHER_RECORDS_POLICY}'" in probe.stderr

    wait_for("the API server to enforce the launcher policy", enforced, 60)
