"""A TF-Spawner style training script, run unchanged by tfcompile.

TF-Spawner started N worker pods, each with `TF_CONFIG` plus `WORKER_NUMBER` (this worker's index)
and `TOT_WORKERS` (N), and passed object-store credentials as environment variables. Scripts
written for it train with MultiWorkerMirroredStrategy across the workers only (no chief, no
parameter servers) and use the two variables directly:

- each worker reads its own shard of the data (`shard(TOT_WORKERS, WORKER_NUMBER)`), and
- the global batch size is the per-worker batch size times `TOT_WORKERS`.

tfcompile sets the same variables, and the job takes `AWS_ACCESS_KEY_ID` and
`AWS_SECRET_ACCESS_KEY` from an existing Secret. The data here ships with scikit-learn, so the
credentials are only checked for presence: their values are never printed or written anywhere.

Files written under `--shared-dir`:

- `backup/`: the `BackupAndRestore` checkpoint, so a restarted worker resumes (deleted at the end).
- `progress/worker-<n>.log`: one JSON line per completed epoch (`attempt`, `epoch`, `loss`, `time`).
- `results/worker-<n>.json`: `worker_number`, `tot_workers`, `global_batch_size`,
  `shard_examples`, `epochs_completed`, `final_loss`, `loss` and `accuracy` on held-out data,
  `s3_endpoint`, `credentials_present`.
"""

from __future__ import annotations

import argparse
import json
import os
import socket
import time
from pathlib import Path
from typing import Any

os.environ.setdefault("TF_USE_LEGACY_KERAS", "1")

import numpy as np
import tensorflow as tf
import tf_keras as keras
from sklearn.datasets import load_digits
from sklearn.model_selection import train_test_split

SEED = 1234
CREDENTIAL_VARIABLES = ("AWS_ACCESS_KEY_ID", "AWS_SECRET_ACCESS_KEY")


def parse_args(argv: list[str] | None = None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--epochs", type=int, default=5, help="number of training epochs")
    parser.add_argument(
        "--shared-dir",
        type=Path,
        default=Path("/mnt/shared"),
        help="directory shared by all workers (checkpoints, results)",
    )
    parser.add_argument(
        "--batch-size-per-worker", type=int, default=16, help="batch size on each worker"
    )
    parser.add_argument("--steps-per-epoch", type=int, default=40, help="training steps per epoch")
    return parser.parse_args(argv)


def spawner_topology() -> tuple[int, int]:
    """(WORKER_NUMBER, TOT_WORKERS) as TF-Spawner set them; one worker when they are unset."""
    worker_number = int(os.environ.get("WORKER_NUMBER") or 0)
    tot_workers = int(os.environ.get("TOT_WORKERS") or 1)
    if not 0 <= worker_number < tot_workers:
        raise SystemExit(f"error: WORKER_NUMBER={worker_number} is not in [0, {tot_workers})")
    return worker_number, tot_workers


def s3_access() -> dict[str, Any]:
    """What the job was given for object storage, without revealing any secret value."""
    return {
        "s3_endpoint": os.environ.get("S3_ENDPOINT") or None,
        "credentials_present": all(os.environ.get(name) for name in CREDENTIAL_VARIABLES),
    }


def load_data() -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray]:
    """The 8x8 digits as flat float vectors, with a fixed 25 % held-out split."""
    digits = load_digits()
    features = (digits.data / 16.0).astype("float32")
    labels = digits.target.astype("int64")
    x_train, x_test, y_train, y_test = train_test_split(
        features, labels, test_size=0.25, random_state=0, stratify=labels
    )
    return x_train, y_train, x_test, y_test


def build_model() -> keras.Model:
    model = keras.Sequential(
        [
            keras.layers.Input(shape=(64,)),
            keras.layers.Dense(64, activation="relu"),
            keras.layers.Dense(10),
        ]
    )
    model.compile(
        optimizer=keras.optimizers.Adam(learning_rate=0.003),
        loss=keras.losses.SparseCategoricalCrossentropy(from_logits=True),
        metrics=[keras.metrics.SparseCategoricalAccuracy(name="accuracy")],
    )
    return model


class ProgressLog(keras.callbacks.Callback):
    """Append one JSON line per completed epoch."""

    def __init__(self, path: Path, attempt: str) -> None:
        super().__init__()
        self.path = path
        self.attempt = attempt

    def on_epoch_end(self, epoch: int, logs: dict[str, Any] | None = None) -> None:
        loss = float((logs or {}).get("loss", float("nan")))
        record = {"attempt": self.attempt, "epoch": epoch, "loss": loss, "time": time.time()}
        with self.path.open("a") as log:
            log.write(json.dumps(record) + "\n")
        print(f"epoch {epoch} done, loss {loss:.4f}", flush=True)


def write_json(path: Path, data: dict[str, Any]) -> None:
    """Write JSON atomically, so a reader never sees half a file."""
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_name(f".{path.name}.{os.getpid()}.tmp")
    tmp.write_text(json.dumps(data, indent=2, sort_keys=True) + "\n")
    tmp.replace(path)


def main(argv: list[str] | None = None) -> int:
    args = parse_args(argv)
    worker_number, tot_workers = spawner_topology()
    storage = s3_access()
    print(
        f"worker {worker_number} of {tot_workers}; S3 endpoint {storage['s3_endpoint']}, "
        f"credentials {'present' if storage['credentials_present'] else 'absent'}",
        flush=True,
    )
    shared: Path = args.shared_dir
    for sub in ("progress", "results"):
        (shared / sub).mkdir(parents=True, exist_ok=True)
    attempt = f"{socket.gethostname()}-{os.getpid()}-{int(time.time() * 1000)}"

    keras.utils.set_random_seed(SEED)
    strategy = tf.distribute.MultiWorkerMirroredStrategy()
    cluster = strategy.cluster_resolver.cluster_spec().as_dict()
    cluster_workers = len(cluster.get("chief", [])) + len(cluster.get("worker", [])) or 1
    if cluster_workers != tot_workers:
        raise SystemExit(f"error: TOT_WORKERS={tot_workers} but TF_CONFIG has {cluster_workers}")
    global_batch_size = args.batch_size_per_worker * tot_workers

    x_train, y_train, x_test, y_test = load_data()
    shard_examples = len(range(worker_number, len(x_train), tot_workers))

    def dataset_fn(context: tf.distribute.InputContext) -> tf.data.Dataset:
        dataset = tf.data.Dataset.from_tensor_slices((x_train, y_train))
        dataset = dataset.shard(tot_workers, worker_number)
        batch = context.get_per_replica_batch_size(global_batch_size)
        return dataset.shuffle(shard_examples, seed=SEED).repeat().batch(batch).prefetch(2)

    train = strategy.distribute_datasets_from_function(dataset_fn)
    with strategy.scope():
        model = build_model()

    history = model.fit(
        train,
        epochs=args.epochs,
        steps_per_epoch=args.steps_per_epoch,
        callbacks=[
            keras.callbacks.BackupAndRestore(backup_dir=str(shared / "backup")),
            ProgressLog(shared / "progress" / f"worker-{worker_number}.log", attempt),
        ],
        verbose=0,
    )

    # Evaluate a plain copy of the model: no other worker needs to take part.
    trained = build_model()
    trained.set_weights(model.get_weights())
    test_loss, test_accuracy = trained.evaluate(x_test, y_test, batch_size=256, verbose=0)
    write_json(
        shared / "results" / f"worker-{worker_number}.json",
        {
            "worker_number": worker_number,
            "tot_workers": tot_workers,
            "global_batch_size": global_batch_size,
            "shard_examples": shard_examples,
            "attempt": attempt,
            "epochs_completed": history.epoch[-1] + 1 if history.epoch else None,
            "final_loss": history.history["loss"][-1] if history.epoch else None,
            "loss": float(test_loss),
            "accuracy": float(test_accuracy),
            **storage,
        },
    )
    print(f"held-out accuracy {test_accuracy:.4f}, loss {test_loss:.4f}", flush=True)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
