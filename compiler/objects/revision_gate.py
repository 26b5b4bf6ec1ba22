"""The revision gate's settings: where every task answers its revision, and how often it asks.

Why a gate. A change to a job must restart every task onto the new revision, and a cluster must
never train with two `TF_CONFIG`s (a worker that expects two peers next to one that expects
three). The controllers of Kubernetes 1.28 and later cannot restart a job at once: a StatefulSet
with `RollingUpdate` replaces its pods one at a time, highest ordinal first (replacing several,
`rollingUpdate.maxUnavailable`, needs the `MaxUnavailableStatefulSet` feature gate, beta since
1.35 but off by default); `OnDelete` needs someone with the right to delete pods (an operator,
which tfcompile does not want); and every role is a StatefulSet of its own that rolls on its own
(the revision annotation, a digest of what the pods run, makes every role roll).

So the pods hold themselves back. The gate is part of the launcher program (see the docstring of
`compiler/launcher/program.py`): every task answers its revision on the gate port from the moment
it starts; before training it waits, running and Ready (so the controller goes on replacing the
next pod), until every other host of its `TF_CONFIG` answers its own revision; while training it
keeps asking a few peers in turn and stops (exit 1, not counted against `failurePolicy`) when one
answers another revision. For 2 -> 3 workers: worker 2 (new) starts and waits; worker 1 is
replaced, the old worker 0's collectives fail and it restarts into the gate; worker 0 is replaced;
all three answer the new revision and train together, resuming from the checkpoint on the shared
volume. Old and new tasks never train together, no pod needs the API server for it, and nothing
waits on a feature gate. `tests/test_launcher.py` shows the gate between processes on loopback, and
`tests/cluster/test_local_node.py` a whole roll under the real StatefulSet controller.

This module owns the facts the compiled objects must agree on: the port, which the StatefulSets
declare and which the spec keeps free of the training port, the launcher's timing, and the env
entry that hands each pod its revision through the downward API.
"""

from __future__ import annotations

from typing import Any

from tfcompile.spec.rules import REVISION_PORT, REVISION_VARIABLE

from .labels import REVISION_ANNOTATION

PORT_NAME = "tfjob-revision"
WAIT_SECONDS = 2.0
"""How often a task waiting at the gate asks the tasks that have not answered its revision."""
WATCH_SECONDS = 5.0
"""How often a training task asks peers whether they still run its revision."""
WATCH_PEERS = 4
"""How many peers a training task asks each time, in turn (all of them in small jobs): a large
job must not ask every peer of every task every few seconds."""


def gate_settings() -> dict[str, Any]:
    """The gate's part of the launcher's settings."""
    return {"port": REVISION_PORT, "waitSeconds": WAIT_SECONDS, "watchSeconds": WATCH_SECONDS,
            "watchPeers": WATCH_PEERS}


def gate_port() -> dict[str, Any]:
    """The container port entry, so the port shows in the pod and in `kubectl describe`."""
    return {"name": PORT_NAME, "containerPort": REVISION_PORT, "protocol": "TCP"}


def revision_variable() -> dict[str, object]:
    """The env entry that gives the launcher its pod's revision (through the downward API)."""
    return {"name": REVISION_VARIABLE, "valueFrom": {"fieldRef": {
        "fieldPath": f"metadata.annotations['{REVISION_ANNOTATION}']"}}}
