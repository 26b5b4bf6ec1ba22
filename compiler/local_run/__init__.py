"""`tfcompile run-local`: run the pods of a compiled job on this machine, as a cluster would.

There is no cluster or container engine here, so every pod of the rendered manifests becomes a
group of local processes: its own network namespace on a bridge private to the run, a hosts file
answering every pod's cluster DNS names, its volumes, and for each container a private mount and
PID namespace; commands run with this machine's Python, as no user of this machine (a user
namespace), and end with the run however it ends. See `run_pods` for the contract.
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
