"""`tfcompile validate --server` against a real API server: what schemas miss, it refuses."""

from __future__ import annotations

import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

from tests.cluster.conftest import Cluster
from tests.cluster.launcher_policy import apply_launcher_policy
from tests.conftest import OUTPUT, job_text

pytestmark = pytest.mark.cluster

EXAMPLES = sorted(path.name for path in OUTPUT.iterdir() if (path / "kustomization.yaml").is_file())
TFCOMPILE = str(Path(sys.executable).parent / "tfcompile")


def tfcompile(cluster: Cluster, *arguments: str, cwd: Path | None = None) -> (
        subprocess.CompletedProcess[str]):
    return subprocess.run([TFCOMPILE, *arguments], capture_output=True, text=True, check=False,
                          env=cluster.environment, cwd=cwd, timeout=300)


def write_job(root: Path, script_name: str = "train.py", overlays: str = "[]") -> Path:
    """A two-worker job `demo` in root/jobs, compiled into root/output; returns root/output/demo."""
    job = root / "jobs" / "demo"
    job.mkdir(parents=True)
    (job / script_name).write_text("print('training')\n", encoding="utf-8")
    (job / "job.yaml").write_text(job_text(script=f'"{script_name}"', command=None)
                                  + f"  overlays: {overlays}\n", encoding="utf-8")
    (root / "overlays").mkdir(exist_ok=True)
    built = subprocess.run(
        [TFCOMPILE, "build", "jobs", "-o", "output", "--overlays", "overlays"],
        capture_output=True, text=True, check=False, cwd=root,
    )
    assert built.returncode == 0, built.stderr
    return root / "output" / "demo"


def test_every_example_passes_the_api_server(cluster: Cluster) -> None:
    # parameter-server names its namespace; like Argo CD's destination, it must exist.
    cluster.kubectl("create", "namespace", "ml", check=False)
    result = tfcompile(cluster, "validate", "--server", *(str(OUTPUT / e) for e in EXAMPLES))
    assert result.returncode == 0, result.stdout + result.stderr
    assert result.stdout.count("no problems") == len(EXAMPLES), result.stdout
    # Nothing was persisted: a dry run.
    for namespace in ("default", "ml"):
        assert cluster.kubectl("get", "all", "--namespace", namespace, "--output=name",
                               "--selector=app.kubernetes.io/managed-by=tfcompile").stdout == ""


def test_what_the_statefulset_controller_refuses_is_a_problem(
    cluster: Cluster, tmp_path: Path
) -> None:
    component = tmp_path / "overlays" / "run-once"
    component.mkdir(parents=True)
    (component / "kustomization.yaml").write_text(textwrap.dedent("""\
        apiVersion: kustomize.config.k8s.io/v1alpha1
        kind: Component
        patches:
        - target: {kind: StatefulSet}
          patch: |
            - op: replace
              path: /spec/template/spec/restartPolicy
              value: OnFailure
            - op: add
              path: /spec/template/spec/activeDeadlineSeconds
              value: 3600
        """), encoding="utf-8")
    job = write_job(tmp_path, overlays="[run-once]")

    offline = tfcompile(cluster, "validate", str(job))
    online = tfcompile(cluster, "validate", "--server", str(job))

    # The schemas pass both; validate knows what the API server refuses, and names the
    # component that set the restart policy.
    assert offline.returncode == 1, offline.stdout
    assert "2 problems" in offline.stdout
    assert "  error: StatefulSet/demo-worker: component ../../overlays/run-once sets " \
        "restartPolicy OnFailure: a StatefulSet's pods must restart Always" in offline.stdout
    assert "  error: StatefulSet/demo-worker: activeDeadlineSeconds: a StatefulSet's pods " \
        "cannot have one (the API server refuses it); use `deadline` in job.yaml" \
        in offline.stdout
    assert online.returncode == 1, online.stdout + online.stderr
    assert "  error: StatefulSet/demo-worker: spec.template.spec.restartPolicy: Unsupported " \
        'value: supported values: "Always" (refused by the API server)' in online.stdout
    assert "  error: StatefulSet/demo-worker: spec.template.spec.activeDeadlineSeconds: " \
        "Forbidden: " in online.stdout
    assert "4 problems" in online.stdout
    assert "1 of 1 job(s) failed validation" in online.stderr


def test_an_invalid_configmap_key_is_a_problem(cluster: Cluster, tmp_path: Path) -> None:
    # A script whose file name is no ConfigMap key is refused by `build` itself; a key brought
    # in by a user's kustomization on top of the compiled job is refused by the API server.
    write_job(tmp_path)
    mine = tmp_path / "mine"
    mine.mkdir()
    (mine / "kustomization.yaml").write_text(textwrap.dedent("""\
        resources: [../output/demo]
        patches:
        - target: {kind: ConfigMap, name: "demo-script-.*"}
          patch: |
            - op: add
              path: /data/train job.py
              value: print('training')
        """), encoding="utf-8")

    offline = tfcompile(cluster, "validate", str(mine))
    result = tfcompile(cluster, "validate", "--server", str(mine))

    assert offline.returncode == 0, offline.stdout
    assert result.returncode == 1, result.stdout + result.stderr
    problems = [line for line in result.stdout.splitlines() if line.startswith("  error: ")]
    assert len(problems) == 1, result.stdout
    assert problems[0].startswith("  error: ConfigMap/demo-script-")
    assert ": data[train job.py]: Invalid value: a valid config key must consist of " \
        "alphanumeric characters" in problems[0]
    # The refused value itself is not echoed after "Invalid value:".
    assert 'Invalid value: "' not in result.stdout


def test_a_name_too_long_for_the_api_server_is_a_problem(cluster: Cluster, tmp_path: Path) -> None:
    write_job(tmp_path)
    # A user's kustomization on top of the compiled job, with a long name prefix.
    mine = tmp_path / "mine"
    mine.mkdir()
    prefix = "x" * 60 + "-"
    (mine / "kustomization.yaml").write_text(
        f"resources: [../output/demo]\nnamePrefix: {prefix}\n", encoding="utf-8")

    result = tfcompile(cluster, "validate", "--server", str(mine))

    assert result.returncode == 1, result.stdout + result.stderr
    assert f"  error: Service/{prefix}demo-worker: metadata.name: Invalid value: must be no " \
        "more than 63 characters (refused by the API server)" in result.stdout


def test_admission_warnings_are_notes(cluster: Cluster, tmp_path: Path) -> None:
    write_job(tmp_path)
    namespace = cluster.fresh_namespace()
    cluster.kubectl("label", "namespace", namespace, "pod-security.kubernetes.io/warn=baseline")
    mine = tmp_path / "mine"
    mine.mkdir()
    (mine / "kustomization.yaml").write_text(textwrap.dedent(f"""\
        resources: [../output/demo]
        namespace: {namespace}
        patches:
        - target: {{kind: StatefulSet}}
          patch: |
            - op: add
              path: /spec/template/spec/containers/0/securityContext
              value: {{privileged: true}}
        """), encoding="utf-8")

    result = tfcompile(cluster, "validate", "--server", str(mine))

    # Pod Security admission judges pods; for a StatefulSet it only warns.
    assert result.returncode == 0, result.stdout + result.stderr
    assert "  note: StatefulSet/demo-worker: the API server warns: would violate PodSecurity " \
        '"baseline:latest": privileged (container "tensorflow" must not set ' \
        "securityContext.privileged=true)" in result.stdout


def test_a_cluster_without_the_launcher_policy_is_said_by_validate_and_status(
        cluster: Cluster, tmp_path: Path) -> None:
    """The dry run passes with or without the policy; validate --server and status say when it
    is missing, and what a job's pods may do then. (The policy is applied again afterwards.)"""
    job = str(OUTPUT / "mnist")
    with_it = tfcompile(cluster, "validate", "--server", job)
    assert with_it.returncode == 0, with_it.stdout + with_it.stderr
    assert "launcher policy" not in with_it.stderr
    cluster.kubectl("delete", "validatingadmissionpolicybinding", "tfcompile-launcher-scale")
    try:
        without = tfcompile(cluster, "validate", "--server", job)
        assert without.returncode == 0, without.stdout + without.stderr
        assert "no problems" in without.stdout
        warning = ("tfcompile: warning: the cluster lacks the launcher policy "
                   "(ValidatingAdmissionPolicyBinding tfcompile-launcher-scale): a job's pods, "
                   "and any token of an account bound to a job's launcher Role, may then write "
                   "any task's record")
        assert warning in without.stderr
        status = tfcompile(cluster, "status", "-o", str(OUTPUT))
        assert status.returncode == 0, status.stderr
        assert warning in status.stderr
        cluster.kubectl("patch", "validatingadmissionpolicy", "tfcompile-launcher-records",
                        "--type=json", "--patch",
                        '[{"op": "replace", "path": "/spec/failurePolicy", "value": "Ignore"}]')
        edited = tfcompile(cluster, "validate", "--server", job)
        assert ("the cluster's launcher policy (ValidatingAdmissionPolicy "
                "tfcompile-launcher-records) is not the one this tfcompile writes") in edited.stderr
    finally:  # the edited policy goes, so that applying it again meets no other manager
        cluster.kubectl("delete", "validatingadmissionpolicy", "tfcompile-launcher-records",
                        "--ignore-not-found")
        apply_launcher_policy(cluster.kubeconfig, tmp_path / "repository")
    again = tfcompile(cluster, "status", "-o", str(OUTPUT))
    assert "launcher policy" not in again.stderr
