"""Components that fight: `validate` reports a list entry (toleration, env var, volume, mount,
container, port) that a component dropped, naming it and what had the entry."""

from __future__ import annotations

import shutil
import textwrap
from collections.abc import Callable
from pathlib import Path

from tests.conftest import OVERLAYS, Result, job_text


def job(overlays: str) -> str:
    """The job `fight`: two GPU workers with a toleration of their own, under `overlays`."""
    return job_text("fight", spec_lines=f"""\
        env: {{EPOCHS: "3"}}
        overlays: [{overlays}]
        podTemplate:
          spec:
            tolerations: [{{key: dedicated, operator: Exists}}]
        """, roles="worker: {replicas: 2, gpus: 1}")

SPOT = """\
apiVersion: kustomize.config.k8s.io/v1alpha1
kind: Component
patches:
- target: {kind: StatefulSet}
  patch: |-
    apiVersion: apps/v1
    kind: StatefulSet
    metadata: {name: any}
    spec:
      template:
        spec:
          tolerations:
          - {key: spot, operator: Exists}
"""

ENVIRONMENT = """\
apiVersion: kustomize.config.k8s.io/v1alpha1
kind: Component
patches:
- target: {kind: StatefulSet}
  patch: |-
    - op: replace
      path: /spec/template/spec/containers/0/env
      value: [{name: ONLY, value: "1"}]
"""


def repository(tmp_path: Path, overlays: str, components: dict[str, str]) -> Path:
    overlay_directory = tmp_path / "overlays"
    for name in ("gpu", "azure"):
        shutil.copytree(OVERLAYS / name, overlay_directory / name)
    for name, text in components.items():
        (overlay_directory / name).mkdir(parents=True)
        (overlay_directory / name / "kustomization.yaml").write_text(text)
    jobs = tmp_path / "jobs"
    jobs.mkdir()
    (jobs / "job.yaml").write_text(job(overlays))
    return jobs


def build_and_validate(tmp_path: Path, run_cli: Callable[..., Result], overlays: str,
                       components: dict[str, str]) -> Result:
    jobs = repository(tmp_path, overlays, components)
    output = tmp_path / "output"
    assert run_cli("build", str(jobs), "-o", str(output), "--overlays",
                   str(tmp_path / "overlays")).status == 0
    return run_cli("validate", str(output / "fight"))


def test_a_component_replacing_tolerations_is_named(
    tmp_path: Path, run_cli: Callable[..., Result],
) -> None:
    result = build_and_validate(tmp_path, run_cli, "gpu, spot", {"spot": SPOT})
    assert result.status == 1
    lines = [line.strip() for line in result.stdout.splitlines() if "error:" in line]
    assert ("error: StatefulSet/fight-worker: component ../../overlays/spot dropped the "
            "toleration key nvidia.com/gpu, operator Exists, effect NoSchedule that component "
            "../../overlays/gpu had") in "\n".join(lines)
    assert ("error: StatefulSet/fight-worker: component ../../overlays/spot dropped the "
            "toleration key dedicated, operator Exists that component ../../overlays/gpu "
            "had") in "\n".join(lines)
    assert len(lines) == 2, lines


def test_a_component_replacing_env_is_named_without_values(
    tmp_path: Path, run_cli: Callable[..., Result],
) -> None:
    result = build_and_validate(tmp_path, run_cli, "environment", {"environment": ENVIRONMENT})
    assert result.status == 1
    assert ("component ../../overlays/environment dropped the env var TF_CONFIG of container "
            "tensorflow that the compiled output had") in result.stdout
    assert ("dropped the env var EPOCHS of container tensorflow that the compiled output had"
            in result.stdout)
    assert '"3"' not in result.stdout


def test_the_shipped_components_only_add(tmp_path: Path, run_cli: Callable[..., Result]) -> None:
    result = build_and_validate(tmp_path, run_cli, "gpu, azure", {})
    assert result.status == 0, result.stdout
    assert "dropped" not in result.stdout
    assert textwrap.dedent("no problems") in result.stdout.splitlines()[0]


def test_a_users_overlay_naming_a_component_is_checked_too(
    tmp_path: Path, run_cli: Callable[..., Result],
) -> None:
    jobs = repository(tmp_path, "gpu", {"spot": SPOT})
    output = tmp_path / "output"
    assert run_cli("build", str(jobs), "-o", str(output), "--overlays",
                   str(tmp_path / "overlays")).status == 0
    overlay = tmp_path / "production"
    overlay.mkdir()
    (overlay / "kustomization.yaml").write_text(
        "resources: [../output/fight]\ncomponents: [../overlays/spot]\n")
    result = run_cli("validate", str(overlay))
    assert result.status == 1
    assert ("component ../overlays/spot dropped the toleration key nvidia.com/gpu, operator "
            "Exists, effect NoSchedule that the compiled output had") in result.stdout
