"""`tfcompile run-local`: run the pods of a compiled job on this machine, as a cluster would.

Every pod of the rendered manifests runs in the image it names, with podman: a network of the
run's own, one podman pod per pod (its address, hostname, and a hosts file answering every pod's
cluster DNS names), its volumes, each container as its pod's user, restarted with the kubelet's
back-off; everything ends with the run however it ends. See `run_pods` for the contract.
"""

from .options import ContainerSummary, LocalRunOptions, PodSummary, RunOutcome
from .runner import run_pods
from .secrets_file import SecretsFileError, parse_secrets_file, parse_secrets_text

__all__ = [
    "ContainerSummary",
    "LocalRunOptions",
    "PodSummary",
    "RunOutcome",
    "SecretsFileError",
    "parse_secrets_file",
    "parse_secrets_text",
    "run_pods",
]
