"""The revision gate: a task trains only while every task of its cluster runs the same revision.

A change to a job rolls every role (the revision annotation on every pod template differs), but
a StatefulSet replaces its pods one at a time, and each role's StatefulSet rolls on its own. For
a while, pods of the old revision (old `TF_CONFIG`) and of the new one run side by side, and two
`TF_CONFIG`s must never train together. Kubernetes' controllers cannot restart a whole job at
once (`maxUnavailable` for StatefulSets is behind the `MaxUnavailableStatefulSet` feature gate,
off by default), so the pods hold themselves back:

- every task serves its own revision (the pod's `tfcompile.dev/revision` annotation, read through
  the downward API into `TFCOMPILE_REVISION`) on `REVISION_PORT`: one line, nothing else;
- before training, a task asks every other task of its `TF_CONFIG` for its revision and waits
  (running, so the pod is Ready and the StatefulSet controller goes on replacing the next pod)
  until all of them answer its own;
- while training, it keeps asking; a peer that answers another revision stops the training
  (SIGTERM, exit status 1): it is an old task whose cluster is being replaced.

So the old tasks train together until the first of them is replaced (their collectives then
fail, and they wait at the gate or are replaced in turn), and the new tasks start together once the
last old pod is gone, resuming from the job's checkpoint. The gate needs no access to the API
server and works with the controllers Kubernetes 1.28 has.

`PROGRAM` is a Python program (standard library only: the TensorFlow images have Python) run by
the launcher in front of the training command: `python -c PROGRAM COMMAND...`. Like the launcher,
its text avoids the dollar forms that the kubelet (`$(VAR)`, `$$`) or Flux (the brace form)
would rewrite.
"""

from __future__ import annotations

from collections.abc import Sequence

from tfcompile.spec.rules import REVISION_VARIABLE

from .labels import REVISION_ANNOTATION

REVISION_PORT = 2223
PORT_NAME = "tfjob-revision"
CHECK_SECONDS = 2.0
TRAINING_CHECK_SECONDS = 5.0

PROGRAM = f"""\
import json, os, signal, socket, subprocess, sys, threading, time
PORT = {REVISION_PORT}
REVISION = os.environ.get("{REVISION_VARIABLE}", "")


def say(message):
    print("tfcompile: " + message, flush=True)


def serve(server):
    while True:
        connection, _ = server.accept()
        with connection:
            connection.sendall(REVISION.encode() + b"\\n")


def peers():
    config = json.loads(os.environ.get("TF_CONFIG") or "{{}}")
    task = config.get("task") or {{}}
    hosts = []
    for role, addresses in sorted((config.get("cluster") or {{}}).items()):
        for index, address in enumerate(addresses):
            if role != task.get("type") or index != task.get("index"):
                hosts.append(address.rsplit(":", 1)[0])
    return hosts


def revision_of(host):
    try:
        with socket.create_connection((host, PORT), timeout=2) as connection:
            return connection.makefile().readline().strip() or None
    except OSError:
        return None


def others():
    answers = [(host, revision_of(host)) for host in peers()]
    return [(host, answer) for host, answer in answers if answer != REVISION]


server = socket.create_server(("", PORT))
threading.Thread(target=serve, args=(server,), daemon=True).start()
reported = None
while True:
    waiting = others()
    if not waiting:
        break
    text = ", ".join(host + " (" + (answer or "no answer") + ")" for host, answer in waiting)
    if text != reported:
        say("revision " + REVISION + " waits for every task to run it: " + text)
        reported = text
    time.sleep({CHECK_SECONDS})
say("every task runs revision " + REVISION + "; training")
child = subprocess.Popen(sys.argv[1:])
for number in (signal.SIGTERM, signal.SIGINT):
    signal.signal(number, lambda received, frame: child.send_signal(received))
while True:
    try:
        status = child.wait(timeout={TRAINING_CHECK_SECONDS})
        break
    except subprocess.TimeoutExpired:
        pass
    changed = [(host, answer) for host, answer in others() if answer is not None]
    if changed:
        host, answer = changed[0]
        say(host + " runs revision " + answer + ", not " + REVISION + ": stopping the training")
        child.terminate()
        child.wait()
        sys.exit(1)
sys.exit(status if status >= 0 else 128 - status)
"""


def gated_arguments(arguments: Sequence[str]) -> list[str]:
    """The container arguments that run `arguments` behind the gate."""
    return ["python", "-c", PROGRAM, *arguments]


def revision_variable() -> dict[str, object]:
    """The env entry that gives the gate its pod's revision (through the downward API)."""
    return {"name": REVISION_VARIABLE, "valueFrom": {"fieldRef": {
        "fieldPath": f"metadata.annotations['{REVISION_ANNOTATION}']"}}}
