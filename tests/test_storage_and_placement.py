"""Storage beyond the shared claim (existing claims per role, read-only, subPath), Azure Files over
NFS or SMB, TensorBoard's pod settings and Kueue's topology-aware placement: what the compiled
and rendered objects say, and the located errors for what cannot work."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
from ruamel.yaml import YAML

from tests.conftest import OVERLAYS, Result, job_text
from tests.test_kubeconform import kubeconform_check
from tfcompile.compiler.checking.validation.schemas import schema_problems
from tfcompile.compiler.checking.validation.validator import validate
from tfcompile.compiler.kubernetes_versions import (
    DEFAULT_KUBERNETES_VERSION,
    OLDEST_KUBERNETES_VERSION,
)
from tfcompile.compiler.objects.compile import build_objects
from tfcompile.compiler.output.launcher_zip import shipped_launcher
from tfcompile.compiler.rendering.kustomize import render
from tfcompile.compiler.rendering.manifests import parse_manifests
from tfcompile.spec.loading import load_jobs

ROLES = "chief: {replicas: 1}\nworker: {replicas: 2}"

VOLUMES = """\
storage:
  shared: {mountPath: /mnt/shared, size: 100Gi}
  volumes:
  - {name: imagenet, claimName: imagenet-v2, mountPath: /data, readOnly: true, subPath: train}
  - {name: models, claimName: model-store, mountPath: /models, readOnly: false, roles: [chief]}
"""


def compiled(tmp_path: Path, text: str) -> dict[str, dict[str, Any]]:
    path = tmp_path / "job.yaml"
    path.write_text(text)
    (loaded,) = load_jobs(path)
    return {f"{item['kind']}/{item['metadata']['name']}": item
            for item in build_objects(loaded, shipped_launcher())}


def pod_spec(item: dict[str, Any]) -> dict[str, Any]:
    spec: dict[str, Any] = item["spec"]["template"]["spec"]
    return spec


def build(run_cli: Callable[..., Result], write_job: Callable[..., Path], tmp_path: Path,
          text: str) -> Result:
    return run_cli("build", str(write_job(text)), "-o", str(tmp_path / "out"))


def test_existing_claims_are_mounted_per_role_and_never_emitted(tmp_path: Path) -> None:
    objects = compiled(tmp_path, job_text(spec_lines=VOLUMES, roles=ROLES))
    chief, worker = (pod_spec(objects[f"StatefulSet/demo-{role}"]) for role in ("chief", "worker"))
    mounts = {mount["name"]: mount for mount in chief["containers"][0]["volumeMounts"]}
    volumes = {volume["name"]: volume for volume in chief["volumes"]}
    assert mounts["imagenet"] == {"name": "imagenet", "mountPath": "/data", "subPath": "train",
                                  "readOnly": True}
    # Read-only in the volume too: no container of the pod (a sidecar) can write the claim.
    assert volumes["imagenet"]["persistentVolumeClaim"] == {"claimName": "imagenet-v2",
                                                            "readOnly": True}
    assert mounts["models"] == {"name": "models", "mountPath": "/models"}
    assert volumes["models"]["persistentVolumeClaim"] == {"claimName": "model-store"}
    worker_volumes = {volume["name"] for volume in worker["volumes"]}
    assert "imagenet" in worker_volumes and "models" not in worker_volumes
    # The claims are not tfcompile's: no object of the job is one, so prune never deletes them.
    claims = [name for name in objects if name.startswith("PersistentVolumeClaim/")]
    assert claims == ["PersistentVolumeClaim/demo-shared"]


def test_validate_lists_the_existing_claims_as_prerequisites(
    run_cli: Callable[..., Result], write_job: Callable[..., Path], tmp_path: Path,
) -> None:
    assert build(run_cli, write_job, tmp_path, job_text(spec_lines=VOLUMES, roles=ROLES)) \
        .status == 0
    report = validate(tmp_path / "out" / "demo")
    assert report.ok, report.to_text()
    required = {(item.kind, item.name): item.used_by for item in report.prerequisites}
    assert required[("PersistentVolumeClaim", "model-store")] == ("StatefulSet/demo-chief",)
    assert required[("PersistentVolumeClaim", "imagenet-v2")] == (
        "StatefulSet/demo-chief", "StatefulSet/demo-worker")


@pytest.mark.parametrize(
    ("volume", "field", "says"),
    [
        ("{name: d, claimName: c, mountPath: /opt/tfcompile/x, readOnly: true}",
         "spec.storage.volumes[0].mountPath", "/opt/tfcompile"),
        ("{name: d, claimName: c, mountPath: /tmp, readOnly: true}",
         "spec.storage.volumes[0].mountPath", "/tmp"),
        ("{name: d, claimName: c, mountPath: /, readOnly: true}",
         "spec.storage.volumes[0].mountPath", "around it"),
        ("{name: d, claimName: c, mountPath: /mnt/shared/data, readOnly: true}",
         "spec.storage.volumes[0].mountPath", "spec.storage.shared.mountPath"),
        ("{name: shared, claimName: c, mountPath: /d, readOnly: true}",
         "spec.storage.volumes[0].name", "tfcompile's"),
        ("{name: d, claimName: c, mountPath: /d, readOnly: true, subPath: ../other}",
         "spec.storage.volumes[0].subPath", "without `..`"),
        ("{name: d, claimName: c, mountPath: /d, readOnly: true, subPath: /abs}",
         "spec.storage.volumes[0].subPath", "relative path"),
        ("{name: d, claimName: c, mountPath: /d, readOnly: true, roles: [ps]}",
         "spec.storage.volumes[0].roles[0]", "no ps role"),
        ("{name: d, claimName: c, mountPath: /d, readOnly: true, roles: []}",
         "spec.storage.volumes[0].roles", "at least one role"),
        ("{name: d, claimName: c, mountPath: /d}",
         "spec.storage.volumes[0].readOnly", "required"),
        ("{name: d, claimName: Claim_1, mountPath: /d, readOnly: true}",
         "spec.storage.volumes[0].claimName", "object name"),
        ("{name: d, claimName: c, mountPath: relative, readOnly: true}",
         "spec.storage.volumes[0].mountPath", ""),
    ],
)
def test_volume_mistakes_are_located(
    run_cli: Callable[..., Result], write_job: Callable[..., Path], tmp_path: Path,
    volume: str, field: str, says: str,
) -> None:
    storage = f"storage:\n  shared: {{mountPath: /mnt/shared, size: 1Gi}}\n  volumes: [{volume}]"
    result = build(run_cli, write_job, tmp_path, job_text(spec_lines=storage, roles=ROLES))
    assert result.status == 2
    assert any("job.yaml:" in line and f": {field}: " in line and says in line
               for line in result.stderr.splitlines()), result.stderr
    assert "Traceback" not in result.stderr
    assert not (tmp_path / "out").exists()


def test_two_volumes_of_one_name_or_one_path_are_refused(
    run_cli: Callable[..., Result], write_job: Callable[..., Path], tmp_path: Path,
) -> None:
    storage = """\
storage:
  volumes:
  - {name: d, claimName: a, mountPath: /d, readOnly: true, roles: [chief]}
  - {name: d, claimName: b, mountPath: /e, readOnly: true}
  - {name: e, claimName: b, mountPath: /d/inner, readOnly: true}
  - {name: f, claimName: b, mountPath: /d/inner, readOnly: true, roles: [worker]}
podTemplate: {spec: {volumes: [{name: e, emptyDir: {}}]}}
"""
    result = build(run_cli, write_job, tmp_path, job_text(spec_lines=storage, roles=ROLES))
    assert result.status == 2
    lines = result.stderr.splitlines()
    assert any(": spec.storage.volumes[1].name: this volume name is used twice" in line
               for line in lines), result.stderr
    assert any(": spec.storage.volumes[2].mountPath: mounted in the same pods as "
               "spec.storage.volumes[0].mountPath" in line for line in lines), result.stderr
    assert any(": spec.storage.volumes[3].mountPath: mounted in the same pods as "
               "spec.storage.volumes[2].mountPath" in line for line in lines), result.stderr
    assert any(": spec.podTemplate.spec.volumes[0].name: storage.volumes names a volume so too"
               in line for line in lines), result.stderr


def test_paths_may_repeat_in_pods_that_do_not_share_them(tmp_path: Path) -> None:
    storage = """\
storage:
  volumes:
  - {name: a, claimName: a, mountPath: /d, readOnly: true, roles: [chief]}
  - {name: b, claimName: b, mountPath: /d, readOnly: false, roles: [worker]}
"""
    objects = compiled(tmp_path, job_text(spec_lines=storage, roles=ROLES))
    for role, claim in (("chief", "a"), ("worker", "b")):
        (volume,) = [volume for volume in pod_spec(objects[f"StatefulSet/demo-{role}"])["volumes"]
                     if "persistentVolumeClaim" in volume]
        assert volume["persistentVolumeClaim"]["claimName"] == claim


def rendered_objects(run_cli: Callable[..., Result], write_job: Callable[..., Path],
                     tmp_path: Path, overlay: str) -> dict[str, dict[str, Any]]:
    text = job_text(spec_lines=f"storage:\n  shared: {{mountPath: /mnt/shared, size: 100Gi}}\n"
                    f"overlays: [{overlay}]", roles=ROLES)
    result = run_cli("build", str(write_job(text)), "-o", str(tmp_path / "out"),
                     "--overlays", str(OVERLAYS))
    assert result.status == 0, result.stderr
    documents = [d for d in YAML(typ="safe").load_all(render(tmp_path / "out" / "demo")) if d]
    return {f"{d['kind']}/{d['metadata']['name']}": d for d in documents}


def test_azure_component_makes_the_shared_claim_an_nfs_share(
    run_cli: Callable[..., Result], write_job: Callable[..., Path], tmp_path: Path,
) -> None:
    rendered = rendered_objects(run_cli, write_job, tmp_path, "azure")
    claim = rendered["PersistentVolumeClaim/demo-shared"]
    storage_class = YAML(typ="safe").load((OVERLAYS / "azure" / "storage-class.yaml").read_text())
    assert claim["spec"]["storageClassName"] == storage_class["metadata"]["name"]
    assert storage_class["provisioner"] == "file.csi.azure.com"
    assert storage_class["parameters"]["protocol"] == "nfs"
    # Azure Files serves NFS from premium accounts only.
    assert storage_class["parameters"]["skuName"].startswith("Premium_")
    problems, _ = schema_problems([storage_class], "1.33")
    assert problems == []
    # NFS keeps locking: nothing turns HDF5's off.
    for role in ("chief", "worker"):
        env = pod_spec(rendered[f"StatefulSet/demo-{role}"])["containers"][0]["env"]
        assert "HDF5_USE_FILE_LOCKING" not in {variable["name"] for variable in env}
    report = validate(tmp_path / "out" / "demo")
    assert report.ok and report.warnings == [], report.to_text()


def test_azure_smb_component_is_smb_and_validate_warns_about_checkpoints(
    run_cli: Callable[..., Result], write_job: Callable[..., Path], tmp_path: Path,
) -> None:
    rendered = rendered_objects(run_cli, write_job, tmp_path, "azure-smb")
    assert rendered["PersistentVolumeClaim/demo-shared"]["spec"]["storageClassName"] == \
        "azurefile-csi"
    for role in ("chief", "worker"):
        env = pod_spec(rendered[f"StatefulSet/demo-{role}"])["containers"][0]["env"]
        assert env[-1] == {"name": "HDF5_USE_FILE_LOCKING", "value": "FALSE"}
    result = run_cli("validate", str(tmp_path / "out" / "demo"))
    assert result.status == 0, result.stdout + result.stderr
    warnings = [line for line in result.stdout.splitlines() if line.startswith("  warning: ")]
    assert len(warnings) == 2, result.stdout
    assert warnings[0] == (
        "  warning: StatefulSet/demo-chief: the training writes to "
        "PersistentVolumeClaim/demo-shared (at /mnt/shared), an Azure Files share over SMB "
        "(storage class azurefile-csi), where TensorFlow's checkpoint writes (a temporary file "
        "renamed over the last checkpoint) fail (tensorflow#19440): use the azure component "
        "(Azure Files over NFS) instead of azure-smb, or write checkpoints elsewhere")


@pytest.mark.parametrize(
    ("spec_lines", "field", "says"),
    [
        ("storage:\n  shared: {mountPath: /s, size: 1Gi, storageClassName: fast}\n"
         "overlays: [azure-smb]", "spec.storage.shared.storageClassName", "azure-smb overlay"),
        ("storage:\n  shared: {mountPath: /s, size: 1Gi}\noverlays: [azure, azure-smb]",
         "spec.overlays[1]", "name one of them"),
    ],
)
def test_azure_storage_class_choices_are_one(
    run_cli: Callable[..., Result], write_job: Callable[..., Path], tmp_path: Path,
    spec_lines: str, field: str, says: str,
) -> None:
    result = run_cli("build", str(write_job(job_text(spec_lines=spec_lines, roles=ROLES))),
                     "-o", str(tmp_path / "out"), "--overlays", str(OVERLAYS))
    assert result.status == 2
    assert any(f": {field}: " in line and says in line for line in result.stderr.splitlines()), \
        result.stderr


TENSORBOARD = """\
storage:
  shared: {mountPath: /mnt/shared, size: 1Gi}
tensorboard:
  logDir: /mnt/shared/logs
  podTemplate:
    metadata: {labels: {team: vision}}
    spec:
      nodeSelector: {pool: cpu}
      tolerations: [{key: dedicated, operator: Exists}]
      containers:
      - name: tensorboard
        resources: {requests: {cpu: "1", memory: 2Gi}}
        volumeMounts: [{name: plugins, mountPath: /plugins, readOnly: true}]
      volumes: [{name: plugins, persistentVolumeClaim: {claimName: tb-plugins}}]
"""


def test_tensorboard_pod_template_is_merged_like_a_roles(tmp_path: Path) -> None:
    objects = compiled(tmp_path, job_text(spec_lines=TENSORBOARD, roles=ROLES))
    template = objects["Deployment/demo-tensorboard"]["spec"]["template"]
    spec = template["spec"]
    assert template["metadata"]["labels"]["team"] == "vision"
    assert template["metadata"]["labels"]["tfcompile.dev/component"] == "tensorboard"
    assert spec["nodeSelector"] == {"pool": "cpu"}
    assert spec["tolerations"] == [{"key": "dedicated", "operator": "Exists"}]
    (container,) = spec["containers"]
    assert container["command"][:3] == ["tensorboard", "--logdir", "/mnt/shared/logs"]
    assert container["resources"] == {"requests": {"cpu": "1", "memory": "2Gi"}}
    assert [mount["name"] for mount in container["volumeMounts"]] == [
        "shared", "tfcompile-home", "tfcompile-tmp", "plugins"]
    assert container["securityContext"] == {"allowPrivilegeEscalation": False,
                                            "capabilities": {"drop": ["ALL"]}}
    assert [volume["name"] for volume in spec["volumes"]] == [
        "shared", "tfcompile-home", "tfcompile-tmp", "plugins"]
    # The roles' pods are not TensorBoard's: nothing of its template reaches them.
    for role in ("chief", "worker"):
        assert "nodeSelector" not in pod_spec(objects[f"StatefulSet/demo-{role}"])


@pytest.mark.parametrize(
    ("fragment", "field", "says"),
    [
        ("{spec: {containers: [{name: tensorboard, image: other}]}}",
         "spec.tensorboard.podTemplate.spec.containers[0].image", "tensorboard.image"),
        ("{spec: {containers: [{name: tensorboard, args: [--x]}]}}",
         "spec.tensorboard.podTemplate.spec.containers[0].args", "tensorboard --logdir"),
        ("{spec: {restartPolicy: Never}}",
         "spec.tensorboard.podTemplate.spec.restartPolicy", "Deployment"),
        ("{spec: {volumes: [{name: shared, emptyDir: {}}]}}",
         "spec.tensorboard.podTemplate.spec.volumes[0].name", "tfcompile's"),
        ("{metadata: {labels: {tfcompile.dev/job: x}}}",
         "spec.tensorboard.podTemplate.metadata.labels.tfcompile.dev/job", "set by tfcompile"),
        ("{spec: {nodeSelectors: {a: b}}}",
         "spec.tensorboard.podTemplate.spec.nodeSelectors", "unknown field"),
    ],
)
def test_tensorboard_pod_template_mistakes_are_located(
    run_cli: Callable[..., Result], write_job: Callable[..., Path], tmp_path: Path,
    fragment: str, field: str, says: str,
) -> None:
    text = job_text(spec_lines="storage:\n  shared: {mountPath: /s, size: 1Gi}\n"
                    f"tensorboard: {{logDir: /s/logs, podTemplate: {fragment}}}", roles=ROLES)
    result = build(run_cli, write_job, tmp_path, text)
    assert result.status == 2
    assert any(f": {field}: " in line and says in line for line in result.stderr.splitlines()), \
        result.stderr


def test_topology_goes_on_every_pod_of_the_gang(tmp_path: Path) -> None:
    scheduling = ("scheduling: {gang: kueue, queue: team-a, "
                  "topology: {preferred: cloud.provider.com/topology-block}}")
    objects = compiled(tmp_path, job_text(spec_lines=scheduling, roles=ROLES))
    for role in ("chief", "worker"):
        item = objects[f"StatefulSet/demo-{role}"]
        annotations = item["spec"]["template"]["metadata"]["annotations"]
        assert annotations["kueue.x-k8s.io/podset-preferred-topology"] == \
            "cloud.provider.com/topology-block"
        assert "kueue.x-k8s.io/podset-required-topology" not in annotations
        assert "kueue.x-k8s.io/podset-preferred-topology" not in item["metadata"].get(
            "annotations", {})


@pytest.mark.parametrize(
    ("scheduling", "field", "says"),
    [
        ("{gang: volcano, topology: {required: rack}}", "spec.scheduling.topology",
         "set scheduling.gang: kueue"),
        ("{topology: {required: rack}}", "spec.scheduling.topology", "Kueue's"),
        ("{gang: kueue, queue: q, topology: {required: rack, preferred: block}}",
         "spec.scheduling.topology", "exactly one of required or preferred"),
        ("{gang: kueue, queue: q, topology: {}}", "spec.scheduling.topology",
         "exactly one of required or preferred"),
        ("{gang: kueue, queue: q, topology: {required: 'a b'}}",
         "spec.scheduling.topology.required", "qualified name"),
        ("{gang: kueue, queue: q, topology: {required: " + "r" * 64 + "}}",
         "spec.scheduling.topology.required", "63"),
        ("{gang: kueue, queue: q, topology: {rack: x}}", "spec.scheduling.topology.rack",
         "unknown field"),
    ],
)
def test_topology_mistakes_are_located(
    run_cli: Callable[..., Result], write_job: Callable[..., Path], tmp_path: Path,
    scheduling: str, field: str, says: str,
) -> None:
    result = build(run_cli, write_job, tmp_path,
                   job_text(spec_lines=f"scheduling: {scheduling}", roles=ROLES))
    assert result.status == 2
    assert any(f": {field}: " in line and says in line for line in result.stderr.splitlines()), \
        result.stderr


@pytest.mark.slow
@pytest.mark.parametrize("version", [OLDEST_KUBERNETES_VERSION, DEFAULT_KUBERNETES_VERSION])
def test_kubeconform_accepts_the_new_settings_strictly(
    run_cli: Callable[..., Result], write_job: Callable[..., Path], tmp_path: Path,
    kubeconform: str, kubeconform_schema_location: str, version: str,
) -> None:
    text = job_text(spec_lines=VOLUMES + TENSORBOARD.removeprefix(
        "storage:\n  shared: {mountPath: /mnt/shared, size: 1Gi}\n")
        + "scheduling: {gang: kueue, queue: team-a, topology: {required: "
        "cloud.provider.com/topology-rack}}\noverlays: [azure]", roles=ROLES,
        metadata_lines="namespace: research")
    result = run_cli("build", str(write_job(text)), "-o", str(tmp_path / "out"),
                     "--overlays", str(OVERLAYS))
    assert result.status == 0, result.stderr
    rendered = render(tmp_path / "out" / "demo") + "---\n" + (
        OVERLAYS / "azure" / "storage-class.yaml").read_text()
    objects = len(parse_manifests(rendered))
    checked = kubeconform_check(kubeconform, kubeconform_schema_location, version, rendered)
    assert checked.returncode == 0, checked.stdout + checked.stderr
    assert (f"Summary: {objects} resources found parsing stdin - Valid: {objects}, Invalid: 0, "
            "Errors: 0, Skipped: 0") in checked.stdout


CLAIM = "PersistentVolumeClaim/demo-shared"


def test_the_shared_claim_outlives_its_job_unless_the_spec_deletes_it_with_the_job(
        tmp_path: Path) -> None:
    """Retain (the default) tells Argo CD not to prune it (it left git) nor delete it (its
    Application was deleted), and Flux not to prune it; Delete leaves it to their prune."""
    kept = compiled(tmp_path, job_text(
        spec_lines="storage:\n  shared: {mountPath: /mnt/shared, size: 1Gi}", roles=ROLES))
    assert kept[CLAIM]["metadata"]["annotations"] == {
        "argocd.argoproj.io/sync-options": "Prune=false,Delete=false",
        "kustomize.toolkit.fluxcd.io/prune": "disabled"}
    deleted = compiled(tmp_path, job_text(
        spec_lines="storage:\n  shared: {mountPath: /mnt/shared, size: 1Gi, whenDeleted: Delete}",
        roles=ROLES))
    assert "annotations" not in deleted[CLAIM]["metadata"]


def test_a_jobs_own_sync_options_are_kept_beside_those_that_keep_the_claim(
        tmp_path: Path) -> None:
    text = job_text(
        metadata_lines="annotations: {argocd.argoproj.io/sync-options: 'ServerSideApply=true,"
        "Prune=true', team: vision}",
        spec_lines="storage:\n  shared: {mountPath: /mnt/shared, size: 1Gi}", roles=ROLES)
    objects = compiled(tmp_path, text)
    assert objects[CLAIM]["metadata"]["annotations"] == {
        "argocd.argoproj.io/sync-options": "ServerSideApply=true,Prune=false,Delete=false",
        "kustomize.toolkit.fluxcd.io/prune": "disabled", "team": "vision"}
    worker = objects["StatefulSet/demo-worker"]["metadata"]["annotations"]
    assert worker["argocd.argoproj.io/sync-options"] == "ServerSideApply=true,Prune=true"
