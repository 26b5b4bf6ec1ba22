"""The revision gate: a task trains only once every other task of its TF_CONFIG runs its revision.

Every launcher answers its revision on the gate port; before training, it asks every peer, and
while training, a few peers in turn, stopping its training when one answers another revision
(`compiler/objects/revision_gate.py` says why a job must never train with two).
"""

from __future__ import annotations

import json
import os
import socket
import threading
import time

from .api_server import Settings
from .messages import say


class RevisionGate:
    """Answer this task's revision on the gate port; ask the other tasks of TF_CONFIG theirs."""

    def __init__(self, settings: Settings, listen: str, revision: str) -> None:
        self.port = int(settings["port"])
        self.wait_seconds = float(settings["waitSeconds"])
        self.watch_seconds = float(settings["watchSeconds"])
        self.watch_peers = int(settings["watchPeers"])
        self.revision = revision
        self.peers = peer_hosts(json.loads(os.environ.get("TF_CONFIG") or "{}"))
        self.turn = 0
        try:
            self.server = socket.create_server((listen, self.port))
        except OSError as error:
            say("cannot answer the revision on port " + str(self.port) + " (" + str(error)
                + "); the other tasks will wait for this one")
            return
        threading.Thread(target=self.answer, daemon=True).start()

    def answer(self) -> None:
        while True:
            try:
                connection, _ = self.server.accept()
                with connection:
                    connection.settimeout(2)
                    connection.sendall(self.revision.encode() + b"\n")
            except OSError:
                time.sleep(0.1)

    def revision_of(self, host: str) -> str | None:
        try:
            with socket.create_connection((host, self.port), timeout=2) as connection:
                connection.settimeout(2)
                return connection.makefile().readline().strip() or None
        except (OSError, UnicodeDecodeError):
            return None

    def wait(self, until: float | None = None) -> bool:
        """Return True once every other task has answered this task's revision; False when the
        time `until` (epoch seconds) comes first."""
        pending = list(self.peers)
        reported = None
        while pending:
            if until is not None and time.time() >= until:
                return False
            answers = [(host, self.revision_of(host)) for host in pending]
            pending = [host for host, answer in answers if answer != self.revision]
            if not pending:
                break
            text = ", ".join(host + " (" + (answer or "no answer") + ")"
                             for host, answer in answers if answer != self.revision)
            if text != reported:
                say("revision " + self.revision + " waits for every task to run it: " + text)
                reported = text
            time.sleep(self.wait_seconds)
        if self.peers:
            say("every task runs revision " + self.revision + "; training")
        return True

    def superseded(self) -> str | None:
        """A peer that answers another revision, or None; asks a few peers per call, in turn."""
        count = min(self.watch_peers, len(self.peers))
        for _ in range(count):
            host = self.peers[self.turn % len(self.peers)]
            self.turn += 1
            answer = self.revision_of(host)
            if answer is not None and answer != self.revision:
                return host + " runs revision " + answer
        return None


def peer_hosts(tf_config: Settings) -> list[str]:
    """The host of every task in TF_CONFIG's cluster but this one."""
    return [str(address).rsplit(":", 1)[0] for _, address in peers(tf_config)]


def peer_tasks(tf_config: Settings) -> list[str]:
    """The record key (`<role>-<index>`) of every task in TF_CONFIG's cluster but this one."""
    return [task for task, _ in peers(tf_config)]


def peers(tf_config: Settings) -> list[tuple[str, str]]:
    task = tf_config.get("task") or {}
    found = []
    for role, addresses in sorted((tf_config.get("cluster") or {}).items()):
        for index, address in enumerate(addresses):
            if role != task.get("type") or index != task.get("index"):
                found.append((str(role) + "-" + str(index), str(address)))
    return found
