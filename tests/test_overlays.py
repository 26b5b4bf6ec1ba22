"""The GPU and Azure Kustomize Components, rendered with the real kustomize: what each changes,
and what it leaves alone."""

from __future__ import annotations

from typing import Any

from ruamel.yaml import YAML

from tests.conftest import OUTPUT, rendered_output


def objects(example: str) -> dict[str, dict[str, Any]]:
    documents = [d for d in YAML(typ="safe").load_all(rendered_output(example)) if d]
    return {f"{d['kind']}/{d['metadata']['name']}": d for d in documents}


def compiled(example: str, kind: str, name: str) -> dict[str, Any]:
    text = (OUTPUT / example / f"{kind.lower()}-{name}.yaml").read_text()
    document: dict[str, Any] = YAML(typ="safe").load(text)
    return document


def pod_spec(item: dict[str, Any]) -> dict[str, Any]:
    spec: dict[str, Any] = item["spec"]["template"]["spec"]
    return spec


def test_gpu_component_touches_only_gpu_roles() -> None:
    rendered = objects("parameter-server")
    worker = pod_spec(rendered["StatefulSet/parameter-server-worker"])
    assert worker["tolerations"] == [
        {"key": "sku", "operator": "Equal", "value": "gpu", "effect": "NoSchedule"},
        {"key": "nvidia.com/gpu", "operator": "Exists", "effect": "NoSchedule"}]
    # No node selector: the GPU limit alone keeps the pods on nodes that advertise GPUs (AKS GPU
    # pools carry no `nvidia.com/gpu.present` label without NVIDIA's feature discovery).
    assert "nodeSelector" not in worker and "affinity" not in worker
    assert {"name": "dshm", "emptyDir": {"medium": "Memory"}} in worker["volumes"]
    mounts = worker["containers"][0]["volumeMounts"]
    assert {"name": "dshm", "mountPath": "/dev/shm"} in mounts
    assert worker["containers"][0]["resources"]["limits"] == {"nvidia.com/gpu": 1}
    for role in ("chief", "ps", "evaluator"):
        other = pod_spec(rendered[f"StatefulSet/parameter-server-{role}"])
        assert "tolerations" not in other and "nodeSelector" not in other
        assert all(v["name"] != "dshm" for v in other["volumes"])
        original = pod_spec(compiled("parameter-server", "StatefulSet",
                                     f"parameter-server-{role}"))
        assert other["volumes"] == original["volumes"]


def test_azure_component_makes_shared_storage_azure_files() -> None:
    rendered = objects("parameter-server")
    claim = rendered["PersistentVolumeClaim/parameter-server-shared"]
    # Azure Files over NFS (storage-class.yaml beside the component), which keeps the rename
    # TensorFlow's checkpoint writes rely on.
    assert claim["spec"]["storageClassName"] == "tfcompile-azurefile-nfs"
    assert claim["spec"]["accessModes"] == ["ReadWriteMany"]
    assert claim["spec"]["resources"] == {"requests": {"storage": "100Gi"}}


def test_azure_component_keeps_a_load_balancer_tensorboard_internal() -> None:
    rendered = objects("parameter-server")
    service = rendered["Service/parameter-server-tensorboard"]
    assert service["spec"]["type"] == "LoadBalancer"
    annotations = service["metadata"]["annotations"]
    assert annotations["service.beta.kubernetes.io/azure-load-balancer-internal"] == "true"
    for role in ("chief", "worker", "ps", "evaluator"):
        headless = rendered[f"Service/parameter-server-{role}"]
        assert "service.beta.kubernetes.io/azure-load-balancer-internal" not in headless[
            "metadata"].get("annotations", {})


def test_jobs_without_overlays_render_unchanged() -> None:
    rendered = objects("mnist")
    worker = rendered["StatefulSet/mnist-worker"]
    assert worker["spec"] == compiled("mnist", "StatefulSet", "mnist-worker")["spec"]
    claim = rendered["PersistentVolumeClaim/mnist-shared"]
    assert "storageClassName" not in claim["spec"]


def test_validate_knows_the_azure_components_class() -> None:
    """`validate` judges the azure component's class by name (the class is applied once per
    cluster, never rendered with a job): the name and SKU it assumes are the file's."""
    from tfcompile.compiler.checking.validation.storage_classes import AZURE_COMPONENT_CLASS

    storage_class = YAML(typ="safe").load(
        (OUTPUT.parent / "overlays" / "azure" / "storage-class.yaml").read_text())
    assert storage_class["metadata"]["name"] == AZURE_COMPONENT_CLASS
    assert storage_class["parameters"] == {"protocol": "nfs", "skuName": "Premium_LRS"}
