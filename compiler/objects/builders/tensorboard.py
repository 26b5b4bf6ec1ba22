"""TensorBoard: a Deployment reading the shared volume, and a Service in front of it.

`tensorboard.podTemplate` merges into the generated pod template as a role's podTemplate merges
into a role's (`pod_template.merge_pod_template`): resources, node placement, tolerations, more
volumes and sidecars; every container then gets the secure defaults.

A sweep's one TensorBoard (`sweep.sweep_board`) is built here too, given the sweep's name: it
is named `<sweep>-tensorboard` as a job's is, and selects its pod by the sweep rather than a
job, since it belongs to no trial."""

from __future__ import annotations

from typing import Any

from tfcompile.spec.models import ServiceType, TrainingJob

from ..labels import (
    LOAD_BALANCER_LABEL,
    TENSORBOARD_COMPONENT,
    object_labels,
    sweep_tensorboard_selector,
    tensorboard_selector,
)
from ..names import tensorboard_name
from .metadata import object_metadata, template_metadata
from .pod_security import (
    HOME_DIRECTORY,
    HOME_VOLUME,
    TMP_DIRECTORY,
    TMP_VOLUME,
    pod_security_context,
    secure_containers,
    settle_token,
)
from .pod_template import merge_pod_template
from .storage import claim_name

TENSORBOARD_PORT = 6006
PORT_NAME = "http"


def _naming(job: TrainingJob, sweep: str | None) -> tuple[str, dict[str, str]]:
    """The TensorBoard's name and selector: the job's, or with `sweep`, the sweep's."""
    if sweep is not None:
        return tensorboard_name(sweep), sweep_tensorboard_selector(sweep)
    return tensorboard_name(job.metadata.name), tensorboard_selector(job.metadata.name)


def tensorboard_deployment(job: TrainingJob, sweep: str | None = None) -> dict[str, Any]:
    """The Deployment of the job's TensorBoard, or with `sweep`, of that sweep's one."""
    settings = job.spec.tensorboard
    shared = job.spec.storage.shared
    claim = claim_name(job)
    assert settings is not None and shared is not None and claim is not None
    name, selector = _naming(job, sweep)
    labels = object_labels(job, TENSORBOARD_COMPONENT, selector)
    container: dict[str, Any] = {
        "name": TENSORBOARD_COMPONENT,
        "image": settings.image or job.spec.image,
        "command": [
            "tensorboard",
            "--logdir",
            settings.log_dir,
            "--bind_all",
            "--port",
            str(TENSORBOARD_PORT),
        ],
        "ports": [{"name": PORT_NAME, "containerPort": TENSORBOARD_PORT, "protocol": "TCP"}],
        "env": [{"name": "HOME", "value": HOME_DIRECTORY}],
        "volumeMounts": [
            {"name": "shared", "mountPath": shared.mount_path, "readOnly": True},
            {"name": HOME_VOLUME, "mountPath": HOME_DIRECTORY},
            {"name": TMP_VOLUME, "mountPath": TMP_DIRECTORY},
        ],
    }
    pod_spec: dict[str, Any] = {
        "enableServiceLinks": False,
        "automountServiceAccountToken": False,
        "securityContext": pod_security_context(),
    }
    pull_secrets = ((job.spec.pod_template or {}).get("spec") or {}).get("imagePullSecrets")
    if pull_secrets:
        # TensorBoard runs the job's image unless told otherwise: the same registry credentials.
        pod_spec["imagePullSecrets"] = pull_secrets
    template: dict[str, Any] = {
        "metadata": template_metadata(job, labels, {}),
        "spec": {
            **pod_spec,
            "containers": [container],
            "volumes": [
                {
                    "name": "shared",
                    "persistentVolumeClaim": {"claimName": claim, "readOnly": True},
                },
                {"name": HOME_VOLUME, "emptyDir": {}},
                {"name": TMP_VOLUME, "emptyDir": {}},
            ],
        },
    }
    fragments = [settings.pod_template] if settings.pod_template is not None else []
    for fragment in fragments:
        template = merge_pod_template(template, fragment)
    template["spec"] = secure_containers(template["spec"])
    settle_token(template["spec"], fragments)
    return {
        "apiVersion": "apps/v1",
        "kind": "Deployment",
        "metadata": object_metadata(job, name, labels),
        "spec": {
            "replicas": 1,
            "selector": {"matchLabels": selector},
            "template": template,
        },
    }


def tensorboard_service(job: TrainingJob, sweep: str | None = None) -> dict[str, Any]:
    """The Service in front of the job's TensorBoard, or with `sweep`, that sweep's one."""
    settings = job.spec.tensorboard
    assert settings is not None
    name, selector = _naming(job, sweep)
    labels = object_labels(job, TENSORBOARD_COMPONENT, selector)
    if settings.service_type is ServiceType.LOAD_BALANCER:
        labels[LOAD_BALANCER_LABEL] = "true"
    spec: dict[str, Any] = {"type": settings.service_type.value}
    if settings.load_balancer_source_ranges:
        spec["loadBalancerSourceRanges"] = list(settings.load_balancer_source_ranges)
    return {
        "apiVersion": "v1",
        "kind": "Service",
        "metadata": object_metadata(job, name, labels),
        "spec": {
            **spec,
            "selector": selector,
            "ports": [
                {
                    "name": PORT_NAME,
                    "port": TENSORBOARD_PORT,
                    "targetPort": PORT_NAME,
                    "protocol": "TCP",
                }
            ],
        },
    }
