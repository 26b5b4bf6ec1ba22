"""The NetworkPolicy: a job's pods reach each other on every port (NCCL opens its own), others
reach them only as the job says; a TensorBoard exposed to the internet is refused."""

from __future__ import annotations

import textwrap
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from tests.conftest import Result, job_text
from tfcompile.compiler.objects.compile import build_objects
from tfcompile.compiler.output.launcher_zip import shipped_launcher
from tfcompile.spec.loading import load_jobs


def job(extra: str = "") -> str:
    """The demo job with shared storage, two GPU workers and `extra` lines in its spec."""
    return job_text(spec_lines="storage:\n  shared: {mountPath: /mnt/shared, size: 1Gi}\n"
                    + textwrap.dedent(extra), roles="worker: {replicas: 2, gpus: 1}")


def compile_with(tmp_path: Path, extra: str) -> list[dict[str, Any]]:
    path = tmp_path / "job.yaml"
    path.write_text(job(extra))
    (loaded,) = load_jobs(path)
    return build_objects(loaded, shipped_launcher())


def policy_of(objects: list[dict[str, Any]]) -> dict[str, Any]:
    (policy,) = [item for item in objects if item["kind"] == "NetworkPolicy"]
    return policy


def test_pods_of_the_job_reach_each_other_on_every_port(tmp_path: Path) -> None:
    spec = policy_of(compile_with(tmp_path, ""))["spec"]
    assert spec["policyTypes"] == ["Ingress"]
    (own,) = spec["ingress"]
    assert own == {"from": [{"podSelector": {"matchLabels": {"tfcompile.dev/job": "demo"}}}]}
    assert spec["podSelector"]["matchLabels"] == {"tfcompile.dev/job": "demo"}


def test_the_job_may_admit_more_sources(tmp_path: Path) -> None:
    spec = policy_of(compile_with(tmp_path, """\
        networkPolicy:
          ingress:
          - from: [{namespaceSelector: {matchLabels: {kubernetes.io/metadata.name: monitoring}}}]
            ports: [{port: 9100, protocol: TCP}]
        """))["spec"]
    assert spec["ingress"][1] == {
        "from": [{"namespaceSelector": {"matchLabels": {
            "kubernetes.io/metadata.name": "monitoring"}}}],
        "ports": [{"port": 9100, "protocol": "TCP"}]}
    assert len(spec["ingress"]) == 2


def test_network_policy_false_still_turns_it_off(tmp_path: Path) -> None:
    objects = compile_with(tmp_path, "networkPolicy: false\n")
    assert not [item for item in objects if item["kind"] == "NetworkPolicy"]


def test_a_misspelt_ingress_rule_is_located(
    write_job: Callable[..., Path], run_cli: Callable[..., Result], tmp_path: Path,
) -> None:
    text = job("networkPolicy:\n  ingress:\n  - form: []\n")
    result = run_cli("build", str(write_job(text)), "-o", str(tmp_path / "out"))
    assert result.status == 2
    assert ":12:7: spec.networkPolicy.ingress[0].form: unknown field" in result.stderr


def test_an_open_load_balancer_tensorboard_is_refused(
    write_job: Callable[..., Path], run_cli: Callable[..., Result], tmp_path: Path,
) -> None:
    text = job("tensorboard: {logDir: /mnt/shared, serviceType: LoadBalancer}\n")
    result = run_cli("build", str(write_job(text)), "-o", str(tmp_path / "out"))
    assert result.status == 2
    assert "spec.tensorboard.serviceType: a LoadBalancer TensorBoard with no source ranges" \
        in result.stderr
    assert "loadBalancerSourceRanges" in result.stderr and "internal" in result.stderr
    # Restricted to known clients, or kept internal by the azure component: accepted.
    ranged = text.replace("LoadBalancer}", "LoadBalancer, loadBalancerSourceRanges: "
                          "[10.0.0.0/8]}")
    objects = compile_with(tmp_path, "tensorboard: {logDir: /mnt/shared, serviceType: "
                           "LoadBalancer, loadBalancerSourceRanges: [10.0.0.0/8]}\n")
    (service,) = [item for item in objects
                  if item["kind"] == "Service" and item["metadata"]["name"] == "demo-tensorboard"]
    assert service["spec"]["loadBalancerSourceRanges"] == ["10.0.0.0/8"]
    assert run_cli("build", str(write_job(ranged)), "-o", str(tmp_path / "out")).status == 0
    bad = text.replace("LoadBalancer}", "LoadBalancer, loadBalancerSourceRanges: [anywhere]}")
    result = run_cli("build", str(write_job(bad)), "-o", str(tmp_path / "out2"))
    assert result.status == 2 and "not a CIDR" in result.stderr


def test_tensorboard_pulls_with_the_jobs_image_pull_secrets(tmp_path: Path) -> None:
    objects = compile_with(tmp_path, """\
        tensorboard: {logDir: /mnt/shared}
        podTemplate: {spec: {imagePullSecrets: [{name: registry}], nodeSelector: {pool: gpu}}}
        """)
    (deployment,) = [item for item in objects if item["kind"] == "Deployment"]
    spec = deployment["spec"]["template"]["spec"]
    assert spec["imagePullSecrets"] == [{"name": "registry"}]
    assert "nodeSelector" not in spec  # the training pods' placement is not TensorBoard's


INTERNAL = """\
apiVersion: kustomize.config.k8s.io/v1alpha1
kind: Component
patches:
- target: {kind: Service, labelSelector: tfcompile.dev/load-balancer=true}
  patch: |-
    apiVersion: v1
    kind: Service
    metadata:
      name: any
      annotations: {networking.gke.io/load-balancer-type: Internal}
"""

LABEL_ONLY = """\
apiVersion: kustomize.config.k8s.io/v1alpha1
kind: Component
commonAnnotations: {team: vision}
"""


@pytest.mark.parametrize(("component", "exposed"), [(INTERNAL, False), (LABEL_ONLY, True)])
def test_validate_judges_a_load_balancer_a_users_component_handles(
    tmp_path: Path, run_cli: Callable[..., Result], component: str, exposed: bool,
) -> None:
    (tmp_path / "overlays" / "cloud").mkdir(parents=True)
    (tmp_path / "overlays" / "cloud" / "kustomization.yaml").write_text(component)
    jobs = tmp_path / "jobs"
    jobs.mkdir()
    (jobs / "job.yaml").write_text(job(
        "tensorboard: {logDir: /mnt/shared, serviceType: LoadBalancer}\noverlays: [cloud]\n"))
    output = tmp_path / "output"
    assert run_cli("build", str(jobs), "-o", str(output), "--overlays",
                   str(tmp_path / "overlays")).status == 0
    result = run_cli("validate", str(output / "demo"))
    assert (result.status == 1) is exposed, result.stdout
    assert ("error: Service/demo-tensorboard: a LoadBalancer with no loadBalancerSourceRanges "
            "and no internal-load-balancer annotation is reachable from the internet"
            in result.stdout) is exposed


@pytest.mark.parametrize(
    ("setting", "at", "says"),
    [
        ("{ingres: []}", "spec.networkPolicy.ingres", "unknown field; allowed here: enabled, "
         "ingress"),
        ('"yes"', "spec.networkPolicy", "give true, false, or {ingress:"),
    ],
)
def test_a_wrong_network_policy_setting_says_what_is_allowed(
    write_job: Callable[..., Path], run_cli: Callable[..., Result], tmp_path: Path,
    setting: str, at: str, says: str,
) -> None:
    text = job(f"networkPolicy: {setting}\n")
    result = run_cli("build", str(write_job(text)), "-o", str(tmp_path / "out"))
    assert result.status == 2
    (line,) = result.stderr.splitlines()[:-1]
    assert f": {at}: {says}" in line
