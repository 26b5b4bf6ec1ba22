"""The headless Service that gives each pod of a role its stable DNS name."""

from __future__ import annotations

from typing import Any

from tfcompile.spec.models import RoleName, TrainingJob

from ..labels import object_labels, role_selector
from ..names import role_name
from .metadata import object_metadata

PORT_NAME = "tfjob-port"


def headless_service(job: TrainingJob, role: RoleName) -> dict[str, Any]:
    """`J-R`: headless, and publishing pods before they are ready, since TensorFlow servers
    must find each other while they start."""
    name = job.metadata.name
    selector = role_selector(name, role)
    return {
        "apiVersion": "v1",
        "kind": "Service",
        "metadata": object_metadata(job, role_name(name, role),
                                    object_labels(job, role.value, selector)),
        "spec": {
            "clusterIP": "None",
            "publishNotReadyAddresses": True,
            "selector": selector,
            "ports": [
                {
                    "name": PORT_NAME,
                    "port": job.spec.port,
                    "targetPort": PORT_NAME,
                    "protocol": "TCP",
                }
            ],
        },
    }
