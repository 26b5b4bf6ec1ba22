"""Synchronous multi-worker training with MultiWorkerMirroredStrategy and fault tolerance.

Every worker runs this same script. `TF_CONFIG` (set by the compiled StatefulSets) tells each
process the cluster and its own task; without `TF_CONFIG` the script trains alone. The model is a
small dense network on 8x8 images of the ten digits that the script generates (`load_data`), so
the example needs no download and nothing beyond what tensorflow/tensorflow:2.15.0 holds.

Fault tolerance: `BackupAndRestore` keeps a checkpoint of the model and the epoch counter on the
shared volume. When a worker fails, the collectives of the others fail too and their processes
exit non-zero; the kubelet restarts every failed container and together they resume from the
last completed epoch instead of starting over. How a surviving worker learns of the failure:

- the failed process is gone (crash, OOM kill, deleted pod): its connections reset and the
  survivor's next collective fails within about a second;
- it comes back before that (a quick container restart): the coordination service, which runs
  in worker 0, sees a new incarnation of the task and aborts the collectives of the others;
- it hangs or its node is cut off (no connection reset): the coordination service misses its
  heartbeats for 10 s and aborts the collectives; the survivor exits about 10 s later, after its
  own shutdown has waited for the unreachable peer;
- it is alive and heartbeating but stuck: a collective fails after `--collective-timeout`, when
  set. TensorFlow keeps one thread asleep per collective for the whole timeout, so a long
  timeout on a fast model holds thousands of threads (and a pod's process limit); off by
  default, the heartbeats above cover the common failures.

Preemption (a pod deleted, evicted or drained): the launcher forwards SIGTERM to this process,
which then has the pod's grace period (`terminationGracePeriodSeconds`, 30 s by default) before it
is killed. `SaveOnSigterm` catches the signal; after every step the workers sum their "stop"
flags in one small collective, so all of them learn of it after the same step, save the backup
there (epoch and step included) and exit with status 143 (128 + SIGTERM) without writing results.
The kubelet restarts them (a failure that follows a peer's stop does not count against
`failurePolicy`), and the restarted workers resume at the next step of that epoch. Saving takes
well under a second for this model; a model whose save takes longer than the grace period needs
a longer one. TensorFlow's own `BackupAndRestore(save_before_preemption=True)` is not used: in
Keras 2.15 (and tf-keras 2.21) it is switched on only when a GCP metadata server answers,
elsewhere it silently saves at epoch ends only, and on GCP CPU machines it skips the restore
altogether.

After `model.fit` returns, the script no longer talks to the other workers: the model is copied
out of the strategy to be saved and evaluated. Otherwise a worker that failed after its peers had
finished (and exited 0, never to run again) would wait for them forever when restarted.

Files written under `--shared-dir`:

- `backup/`: the `BackupAndRestore` checkpoint, saved after every epoch and at the step where a
  SIGTERM stopped the training (deleted when training completes).
- `progress/<type>-<index>.log`: one JSON line per completed epoch, appended by every attempt:
  `{"attempt": ..., "epoch": <0-based epoch index>, "loss": ..., "time": ...}`. The same
  epoch (1-based, of `--epochs`) and loss go to `$TFCOMPILE_PROGRESS_FILE` for the launcher.
- `model/`: the trained model (SavedModel), written by the chief (worker 0 when there is no chief).
- `results/<type>-<index>.json`: `final_loss`, `accuracy` and `loss` on the held-out digits,
  `epochs_completed`, `initial_epoch` of the attempt that finished (greater than 0 when it
  resumed from the backup), `initial_step` (its first step in that epoch: greater than 0 when it
  resumed from a save after SIGTERM), `attempt`, `task_type`, `task_index`, `replicas`.
- `preempted/<type>-<index>.json`, when a SIGTERM stopped the training: `attempt`, `epoch` and
  `step` (0-based) of the last step saved, and whether this worker got the signal itself
  (`signalled`).
"""

from __future__ import annotations

import argparse
import importlib.util
import json
import os
import shutil
import signal
import socket
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

# tf.keras must be Keras 2. In the image (tensorflow/tensorflow:2.15.0) it is TensorFlow's own
# Keras; TensorFlow 2.16 and later bring Keras 3 and take Keras 2 from the tf-keras package when
# TF_USE_LEGACY_KERAS=1. Set without tf-keras installed, that variable breaks `tf.keras`.
if importlib.util.find_spec("tf_keras") is not None:
    os.environ.setdefault("TF_USE_LEGACY_KERAS", "1")
else:
    os.environ.pop("TF_USE_LEGACY_KERAS", None)

import numpy as np
import tensorflow as tf

keras = tf.keras

SEED = 1234
PREEMPTED_STATUS = 128 + signal.SIGTERM
"""The exit status of a worker that saved and stopped because a worker got SIGTERM."""


def parse_args(argv: list[str] | None = None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--epochs", type=int, default=8, help="number of training epochs")
    parser.add_argument(
        "--shared-dir",
        type=Path,
        default=Path("/mnt/shared"),
        help="directory shared by all tasks (checkpoints, model, results)",
    )
    parser.add_argument(
        "--batch-size-per-replica",
        type=int,
        default=16,
        help="batch size per replica (one replica per worker on CPU, one per GPU otherwise)",
    )
    parser.add_argument(
        "--steps-per-epoch",
        type=int,
        default=60,
        help="training steps per epoch (the training set is repeated as needed)",
    )
    parser.add_argument(
        "--collective-timeout",
        type=float,
        default=0.0,
        help="seconds a collective operation may wait for the other workers before failing "
        "(0: no limit; each collective holds a thread for this long)",
    )
    return parser.parse_args(argv)


def task_identity() -> tuple[str, int]:
    """Return this process's (task type, task index), also when there is no TF_CONFIG."""
    tf_config = json.loads(os.environ.get("TF_CONFIG") or "{}")
    task = tf_config.get("task")
    if task:
        return str(task["type"]), int(task["index"])
    return "worker", int(os.environ.get("TASK_INDEX") or 0)


EXAMPLES, HELD_OUT = 1797, 450
DIGIT_GLYPHS = (  # the ten digits in 5 x 7 pixels, row by row
    "01110 10001 10011 10101 11001 10001 01110",
    "00100 01100 00100 00100 00100 00100 01110",
    "01110 10001 00001 00010 00100 01000 11111",
    "11111 00010 00100 00010 00001 10001 01110",
    "00010 00110 01010 10010 11111 00010 00010",
    "11111 10000 11110 00001 00001 10001 01110",
    "00110 01000 10000 11110 10001 10001 01110",
    "11111 00001 00010 00100 01000 01000 01000",
    "01110 10001 10001 01110 10001 10001 01110",
    "01110 10001 10001 01111 00001 00010 01100",
)


def load_data() -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray]:
    """The ten digits as 8x8 images (flat vectors in [0, 1]): 1347 to train on, 450 held out.

    Generated from a fixed seed, so every worker and every run has the same data and nothing is
    downloaded: each image is a digit's glyph at one of four positions, in ink of its own
    strength with about one pixel in ten of the stroke missing, over random background noise.
    """
    rng = np.random.default_rng(SEED)
    glyphs = np.array([[list(map(float, row)) for row in glyph.split()] for glyph in DIGIT_GLYPHS])
    labels = rng.permutation(np.arange(EXAMPLES) % 10)
    images = np.zeros((EXAMPLES, 8, 8))
    for image, label in zip(images, labels, strict=True):
        top, left = rng.integers(0, 2), rng.integers(1, 3)
        ink = rng.uniform(0.5, 1.0) * (rng.random((7, 5)) < 0.9)
        image[top : top + 7, left : left + 5] = glyphs[label] * ink
    images += 0.2 * rng.random(images.shape)
    features = np.clip(images, 0.0, 1.0).reshape(EXAMPLES, 64).astype("float32")
    labels = labels.astype("int64")
    train = EXAMPLES - HELD_OUT
    return features[:train], labels[:train], features[train:], labels[train:]


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
    """Append one JSON line per completed epoch, so restarts are visible afterwards, and tell
    tfcompile's launcher how far the training is (`TFCOMPILE_PROGRESS_FILE`: `tfcompile status`
    and Argo CD show it)."""

    def __init__(self, path: Path, attempt: str, epochs: int) -> None:
        super().__init__()
        self.path = path
        self.attempt = attempt
        self.epochs = epochs
        self.initial_epoch: int | None = None
        self.initial_step: int | None = None

    def on_train_batch_begin(self, batch: int, logs: dict[str, Any] | None = None) -> None:
        if self.initial_step is None:
            self.initial_step = int(batch)

    def on_epoch_end(self, epoch: int, logs: dict[str, Any] | None = None) -> None:
        if self.initial_epoch is None:
            self.initial_epoch = epoch
        record = {
            "attempt": self.attempt,
            "epoch": epoch,
            "loss": float((logs or {}).get("loss", float("nan"))),
            "time": time.time(),
        }
        with self.path.open("a") as log:
            log.write(json.dumps(record) + "\n")
        report_progress({"epoch": epoch + 1, "epochs": self.epochs, "loss": record["loss"]})
        print(f"epoch {epoch} done, loss {record['loss']:.4f}", flush=True)


def report_progress(numbers: dict[str, float]) -> None:
    """Write the progress where the launcher reads it (replaced whole, so it never reads half a
    file); nothing without the launcher."""
    target = os.environ.get("TFCOMPILE_PROGRESS_FILE")
    if not target:
        return
    partial = f"{target}.partial"
    with open(partial, "w") as progress_file:
        json.dump(numbers, progress_file)
    os.replace(partial, target)


class Preempted(Exception):
    """Raised out of `model.fit` once the backup of a preempted training is saved."""


class SaveOnSigterm(keras.callbacks.BackupAndRestore):
    """`BackupAndRestore` that also saves, on every worker, at the step after a SIGTERM.

    An integer `save_freq` makes the restore resume at the step after the saved one (with
    "epoch" it would skip the rest of a half-done epoch); this class saves at the last step of
    every epoch itself instead of counting steps, and at the step all workers agree on after
    any of them got SIGTERM. Agreeing needs one collective per step: a sum of the workers' flags.
    """

    def __init__(self, backup_dir: str, strategy: tf.distribute.Strategy) -> None:
        super().__init__(backup_dir=backup_dir, save_freq=1)
        self.strategy = strategy
        self.signalled = False
        self.stopped_at: tuple[int, int] | None = None
        self.previous_handler: Any = None

        @tf.function
        def any_signalled(flag: tf.Tensor) -> tf.Tensor:
            per_replica = strategy.run(lambda: tf.identity(flag))
            return strategy.reduce(tf.distribute.ReduceOp.SUM, per_replica, axis=None)

        self.any_signalled = any_signalled

    def on_sigterm(self, signum: int, frame: Any) -> None:
        print("SIGTERM: saving the backup after the current step", flush=True)
        self.signalled = True

    def on_train_begin(self, logs: dict[str, Any] | None = None) -> None:
        super().on_train_begin(logs)
        self.previous_handler = signal.signal(signal.SIGTERM, self.on_sigterm)

    def on_train_batch_end(self, batch: int, logs: dict[str, Any] | None = None) -> None:
        # `batch` is the index of the step just done within its epoch.
        flag = tf.constant(1.0 if self.signalled else 0.0)
        if float(self.any_signalled(flag)) > 0:
            self._backup(epoch=self._current_epoch, batch=batch)
            self.stopped_at = (self._current_epoch, batch)
            signal.signal(signal.SIGTERM, self.previous_handler)
            raise Preempted()
        if batch == self.params["steps"] - 1:
            self._backup(epoch=self._current_epoch, batch=batch)

    def on_epoch_end(self, epoch: int, logs: dict[str, Any] | None = None) -> None:
        pass  # saved at the epoch's last step

    def on_train_end(self, logs: dict[str, Any] | None = None) -> None:
        signal.signal(signal.SIGTERM, self.previous_handler)
        super().on_train_end(logs)


def write_json(path: Path, data: dict[str, Any]) -> None:
    """Write JSON atomically, so a reader never sees half a file."""
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_name(f".{path.name}.{os.getpid()}.tmp")
    tmp.write_text(json.dumps(data, indent=2, sort_keys=True) + "\n")
    tmp.replace(path)


def plain_copy(model: keras.Model) -> keras.Model:
    """A copy of `model` outside the strategy, so saving and evaluating need no other worker."""
    copy = build_model()
    copy.set_weights(model.get_weights())
    return copy


def save_model(model: keras.Model, model_dir: Path) -> None:
    """Save to a temporary directory next to `model_dir`, then move it into place."""
    staging = Path(tempfile.mkdtemp(prefix=f".{model_dir.name}-", dir=model_dir.parent))
    model.save(str(staging / "model"))
    if model_dir.exists():
        shutil.rmtree(model_dir)
    (staging / "model").rename(model_dir)
    staging.rmdir()


def evaluate(model: keras.Model, x_test: np.ndarray, y_test: np.ndarray) -> tuple[float, float]:
    """Held-out loss and accuracy."""
    loss, accuracy = model.evaluate(x_test, y_test, batch_size=256, verbose=0)
    return float(loss), float(accuracy)


def main(argv: list[str] | None = None) -> int:
    args = parse_args(argv)
    task_type, task_index = task_identity()
    if task_type not in ("chief", "worker"):
        print(f"error: this script runs as chief or worker, not as {task_type}", file=sys.stderr)
        return 2
    attempt = f"{socket.gethostname()}-{os.getpid()}-{int(time.time() * 1000)}"
    shared: Path = args.shared_dir
    for sub in ("progress", "results"):
        (shared / sub).mkdir(parents=True, exist_ok=True)

    keras.utils.set_random_seed(SEED)
    strategy = tf.distribute.MultiWorkerMirroredStrategy(
        communication_options=tf.distribute.experimental.CommunicationOptions(
            timeout_seconds=args.collective_timeout or None
        )
    )
    replicas = strategy.num_replicas_in_sync
    is_chief = strategy.extended.should_checkpoint
    print(f"{task_type}-{task_index}: {replicas} replicas, attempt {attempt}", flush=True)

    x_train, y_train, x_test, y_test = load_data()
    # The strategy shards this data set by element: each worker keeps every n-th element, so the
    # shuffle must produce the same order on every worker (a fixed seed).
    train = (
        tf.data.Dataset.from_tensor_slices((x_train, y_train))
        .shuffle(len(x_train), seed=SEED)
        .repeat()
        .batch(args.batch_size_per_replica * replicas)
    )
    with strategy.scope():
        model = build_model()

    progress = ProgressLog(shared / "progress" / f"{task_type}-{task_index}.log", attempt,
                           args.epochs)
    backup = SaveOnSigterm(str(shared / "backup"), strategy)
    try:
        history = model.fit(
            train,
            epochs=args.epochs,
            steps_per_epoch=args.steps_per_epoch,
            callbacks=[backup, progress],
            verbose=0,
        )
    except Preempted:
        assert backup.stopped_at is not None
        epoch, step = backup.stopped_at
        write_json(
            shared / "preempted" / f"{task_type}-{task_index}.json",
            {"attempt": attempt, "epoch": epoch, "step": step, "signalled": backup.signalled},
        )
        print(f"saved at epoch {epoch} step {step}; exiting {PREEMPTED_STATUS}", flush=True)
        return PREEMPTED_STATUS

    # From here on nothing talks to the other workers (see the module docstring).
    trained = plain_copy(model)
    if is_chief:
        save_model(trained, shared / "model")
    test_loss, test_accuracy = evaluate(trained, x_test, y_test)
    write_json(
        shared / "results" / f"{task_type}-{task_index}.json",
        {
            "task_type": task_type,
            "task_index": task_index,
            "replicas": replicas,
            "attempt": attempt,
            "initial_epoch": progress.initial_epoch,
            "initial_step": progress.initial_step,
            "epochs_completed": history.epoch[-1] + 1 if history.epoch else None,
            "final_loss": history.history["loss"][-1] if history.epoch else None,
            "loss": test_loss,
            "accuracy": test_accuracy,
        },
    )
    print(f"held-out accuracy {test_accuracy:.4f}, loss {test_loss:.4f}", flush=True)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
