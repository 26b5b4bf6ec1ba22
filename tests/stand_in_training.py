"""A stand-in for examples/mnist/train.py in the tests of controller behaviour.

Rolls, killed or deleted workers and suspension are the StatefulSet controller's, the node's,
run-local's and the launcher's doing; TensorFlow adds only minutes to them (the example's own
recovery under TensorFlow is tests/test_training_scripts.py's subject). This program keeps the
parts of the example's contract those tests watch, with the standard library alone:

- it reads `TF_CONFIG` and prints `<type>-<index>: <n> replicas, attempt <id>` as the example does,
  then a line per epoch;
- it listens on its own `TF_CONFIG` address and the workers go through each epoch together, as
  MultiWorkerMirroredStrategy's collectives make them: a worker that loses a peer it has
  reached stops with exit 1, as a collective fails when a peer dies or is replaced (nothing
  listens at its address any more, its name no longer resolves, or another attempt answers
  there; a peer that is only slow to answer on a loaded node is lost after
  `PEER_SILENT_SECONDS`);
- it keeps the example's files on the shared volume: `progress/<type>-<index>.log` (one JSON line
  per epoch: attempt, epoch), `backup/epoch` (worker 0's last completed epoch, every
  `--save-every` epochs, where a new attempt resumes; removed when training completes, as
  BackupAndRestore's backup is) and `results/<type>-<index>.json` (`epochs_completed`,
  `initial_epoch`, `replicas`, `attempt`);
- on SIGTERM (a pod deleted, evicted or drained) it saves a checkpoint before it exits, as the
  examples do: `backup/epoch` with the epochs it has completed, and `backup/saved-on-sigterm`
  (`task`, `epoch`, `attempt`).

It trains nothing, so it reports no accuracy; the tests that judge a model use TensorFlow.
"""

from __future__ import annotations

import argparse
import json
import os
import signal
import socket
import socketserver
import threading
import time
from pathlib import Path

PEER_WAIT_SECONDS = 120.0
PEER_SILENT_SECONDS = 20.0
POLL_SECONDS = 0.1
LINGER_SECONDS = 3.0


class Progress:
    """The epochs this worker has completed, answered to peers that ask with its attempt."""

    def __init__(self, completed: int, attempt: str) -> None:
        self.completed = completed
        self.attempt = attempt


def serve(port: int, progress: Progress) -> None:
    class Answer(socketserver.BaseRequestHandler):
        def handle(self) -> None:
            self.request.sendall(f"{progress.completed} {progress.attempt}\n".encode())

    socketserver.ThreadingTCPServer.allow_reuse_address = True
    server = socketserver.ThreadingTCPServer(("", port), Answer)
    server.daemon_threads = True
    threading.Thread(target=server.serve_forever, daemon=True).start()


def ask(address: str) -> tuple[int, str] | str:
    """A peer's completed epochs and attempt, or why it did not answer: `gone` (refused,
    reset, its name no longer resolves, no answer before the connection closed) or `slow` (no
    answer in 2 s, or a name server that did not answer)."""
    host, _, port = address.rpartition(":")
    try:
        with socket.create_connection((host, int(port)), timeout=2) as connection:
            line = connection.makefile().readline()
    except TimeoutError:
        return "slow"
    except socket.gaierror as error:
        return "slow" if error.errno == socket.EAI_AGAIN else "gone"
    except OSError:
        return "gone"
    completed, _, attempt = line.strip().partition(" ")
    if not completed.isdigit() or not attempt:
        return "gone"
    return int(completed), attempt


def wait_for_peers(peers: list[str], epoch: int, reached: dict[str, str]) -> None:
    """Return when every peer has completed `epoch` epochs; exit 1 when one that answered
    before (`reached`: the attempt that answered) is gone or replaced, or one never answers."""
    started = time.monotonic()
    waiting = list(peers)
    silent_since: dict[str, float] = {}
    while waiting:
        for address in list(waiting):
            answer = ask(address)
            if isinstance(answer, str):
                silent = time.monotonic() - silent_since.setdefault(address, time.monotonic())
                if address in reached and (answer == "gone" or silent > PEER_SILENT_SECONDS):
                    print(f"stand-in: lost peer {address} ({answer})", flush=True)
                    raise SystemExit(1)
                continue
            silent_since.pop(address, None)
            completed, attempt = answer
            if reached.setdefault(address, attempt) != attempt:
                print(f"stand-in: lost peer {address} (replaced)", flush=True)
                raise SystemExit(1)
            if completed >= epoch:
                waiting.remove(address)
        if waiting and time.monotonic() - started > PEER_WAIT_SECONDS:
            print(f"stand-in: peers {waiting} never reached epoch {epoch}", flush=True)
            raise SystemExit(1)
        if waiting:
            time.sleep(POLL_SECONDS)


def write_atomically(path: Path, text: str) -> None:
    temporary = path.with_name(f".{path.name}.{os.getpid()}")
    temporary.write_text(text)
    os.replace(temporary, path)


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--epochs", type=int, required=True)
    parser.add_argument("--shared-dir", type=Path, required=True)
    parser.add_argument("--epoch-seconds", type=float, default=0.5)
    parser.add_argument("--save-every", type=int, default=1)
    arguments = parser.parse_args()
    tf_config = json.loads(os.environ["TF_CONFIG"])
    task_type = tf_config["task"]["type"]
    task_index = int(tf_config["task"]["index"])
    workers: list[str] = tf_config["cluster"]["worker"]
    shared: Path = arguments.shared_dir
    for folder in ("progress", "results", "backup"):
        (shared / folder).mkdir(parents=True, exist_ok=True)
    backup = shared / "backup" / "epoch"
    initial_epoch = int(backup.read_text()) if backup.exists() else 0
    attempt = f"{socket.gethostname()}-{os.getpid()}-{int(time.time() * 1000)}"
    print(f"{task_type}-{task_index}: {len(workers)} replicas, attempt {attempt}", flush=True)
    progress = Progress(initial_epoch, attempt)

    def save_and_exit(number: int, frame: object) -> None:
        write_atomically(backup, str(progress.completed))
        write_atomically(shared / "backup" / "saved-on-sigterm", json.dumps({
            "task": f"{task_type}-{task_index}", "epoch": progress.completed,
            "attempt": attempt}))
        print(f"stand-in: saved a checkpoint at epoch {progress.completed} on SIGTERM",
              flush=True)
        raise SystemExit(143)

    signal.signal(signal.SIGTERM, save_and_exit)
    serve(int(workers[task_index].rpartition(":")[2]), progress)
    peers = [address for index, address in enumerate(workers) if index != task_index]
    reached: dict[str, str] = {}
    if initial_epoch < arguments.epochs:  # after the last epoch there is nothing to train together
        wait_for_peers(peers, initial_epoch, reached)
    log = shared / "progress" / f"{task_type}-{task_index}.log"
    for epoch in range(initial_epoch, arguments.epochs):
        time.sleep(arguments.epoch_seconds)
        progress.completed = epoch + 1
        wait_for_peers(peers, epoch + 1, reached)
        print(f"{task_type}-{task_index}: epoch {epoch + 1}/{arguments.epochs}", flush=True)
        with log.open("a") as lines:
            lines.write(json.dumps({"attempt": attempt, "epoch": epoch, "time": time.time()})
                        + "\n")
        if task_index == 0 and (epoch + 1) % arguments.save_every == 0:
            write_atomically(backup, str(epoch + 1))
    write_atomically(shared / "results" / f"{task_type}-{task_index}.json", json.dumps({
        "epochs_completed": arguments.epochs, "initial_epoch": initial_epoch,
        "replicas": len(workers), "attempt": attempt, "task_type": task_type,
        "task_index": task_index}))
    time.sleep(LINGER_SECONDS)  # peers still at the last barrier ask once more
    if task_index == 0:
        backup.unlink(missing_ok=True)


if __name__ == "__main__":
    main()
