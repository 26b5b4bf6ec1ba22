"""The revision gate's settings: where every task answers its revision, and how often it asks.

The gate itself is part of the launcher program (see `launcher`'s docstring for the design: a
task trains only while every task of its `TF_CONFIG` runs the same revision). This module owns the
facts the compiled objects must agree on: the port, which the StatefulSets declare and which the
spec keeps free of the training port, the launcher's timing, and the env entry that hands each
pod its revision through the downward API.
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
