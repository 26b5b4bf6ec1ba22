"""A NetworkPolicy that admits the TensorFlow port only from pods of the same job.

TensorFlow's gRPC servers have no authentication: anything that reaches the port can run ops.
"""

from __future__ import annotations

from typing import Any

from tfcompile.spec.models import TrainingJob

from ..labels import JOB_LABEL, ROLE_LABEL, object_labels
from ..names import network_policy_name
from .metadata import object_metadata


def network_policy(job: TrainingJob) -> dict[str, Any]:
    name = job.metadata.name
    labels = object_labels(job, "network-policy", {JOB_LABEL: name})
    return {
        "apiVersion": "networking.k8s.io/v1",
        "kind": "NetworkPolicy",
        "metadata": object_metadata(job, network_policy_name(name), labels),
        "spec": {
            "podSelector": {
                "matchLabels": {JOB_LABEL: name},
                "matchExpressions": [{"key": ROLE_LABEL, "operator": "Exists"}],
            },
            "policyTypes": ["Ingress"],
            "ingress": [
                {
                    "from": [{"podSelector": {"matchLabels": {JOB_LABEL: name}}}],
                    "ports": [{"protocol": "TCP", "port": job.spec.port}],
                }
            ],
        },
    }
