"""A NetworkPolicy: pods of the same job reach each other on every port, others only as the job
says (`networkPolicy.ingress`).

TensorFlow's gRPC servers have no authentication: anything that reaches the port can run ops, so
nothing outside the job is admitted by default. Inside the job every port is open, because the
collectives open their own connections (NCCL between GPU workers, the profiler, …) on ports no
spec can list.
"""

from __future__ import annotations

from typing import Any

from tfcompile.spec.models import TrainingJob

from ..labels import JOB_LABEL, ROLE_LABEL, object_labels
from ..names import network_policy_name
from .metadata import object_metadata


def network_policy(job: TrainingJob) -> dict[str, Any]:
    settings = job.spec.network_policy_settings()
    assert settings is not None
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
                {"from": [{"podSelector": {"matchLabels": {JOB_LABEL: name}}}]},
                *settings.ingress,
            ],
        },
    }
