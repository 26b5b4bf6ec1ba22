"""Parameter server training (TensorFlow 2) with a coordinator and a sidecar evaluator.

One script serves every role of the job; `TF_CONFIG` says which one this process is:

- `ps` and `worker`: run a `tf.distribute.Server` and serve variables and steps. They stop (exit 0)
  once the chief has marked the run finished; until then they behave like `server.join()`. A
  task that starts when the run is already marked finished takes it for an earlier job's (a new
  chief is about to start the next run) and serves until the next run finishes.
- `chief`: the coordinator. It creates the model under `ParameterServerStrategy` (variables live on
  the parameter servers), trains with `model.fit` (each step runs on some worker), keeps a
  `BackupAndRestore` backup and one weights checkpoint per epoch on the shared volume, then waits a
  bounded time for the evaluator's report on the final checkpoint and writes its own result.
- `evaluator`: not part of the training cluster. It evaluates each new checkpoint the chief writes
  on held-out data and stops after the final one.

The roles find each other's progress through `run.json` on the shared volume, which the chief
writes: `{"run_id": ..., "state": "training" | "finished", "epochs": ..., "final_checkpoint": ...}`.
A new `run_id` starts when the chief begins a training from scratch (no backup to resume from); the
chief then removes the previous run's checkpoints and results, so nothing stale is evaluated or
reported.

Failures: the coordinator retries a failed worker's steps on the others and uses the worker again
once it is back. A failed ps makes `model.fit` raise on the chief, which exits non-zero; after
its restart it resumes from the `BackupAndRestore` backup, as it does after its own failure.

Preemption (SIGTERM, then the pod's grace period): this script saves nothing extra. A chief
stopped by SIGTERM dies at once and, restarted, resumes from the last epoch's backup (the epoch
it was in is trained again); a stopped worker's steps are retried on the others; a stopped ps
fails the chief as above. TensorFlow's save-on-preemption (`PreemptionCheckpointHandler`)
refuses clusters with ps tasks.

Files written under `--shared-dir`:

- `run.json` (above), `backup/` (emptied when training completes), `checkpoints/ckpt-NNNN.*`.
- `logs/<run_id>/train` (chief) and `logs/<run_id>/evaluation` (evaluator): TensorBoard summaries,
  written when the `tensorboard` package is installed.
- `results/chief-0.json`: `run_id`, `epochs_completed`, `final_loss`, `final_checkpoint`,
  `evaluator` (the evaluator's report on the final checkpoint, or null if none came in time).
  Without `TF_CONFIG` (a job of one pod) the chief trains alone and reports its own evaluation.
- `results/evaluator-0.json`: `run_id`, `checkpoint`, `epoch`, `loss`, `accuracy`, `final`
  (true once the final checkpoint was evaluated); rewritten after every evaluation.
"""

from __future__ import annotations

import argparse
import importlib.util
import json
import os
import shutil
import sys
import time
import uuid
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
POLL_SECONDS = 1.0
# tf.summary needs the tensorboard package (part of every tensorflow/tensorflow image).
HAVE_TENSORBOARD = importlib.util.find_spec("tensorboard") is not None


def parse_args(argv: list[str] | None = None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--epochs", type=int, default=6, help="number of training epochs")
    parser.add_argument(
        "--shared-dir",
        type=Path,
        default=Path("/mnt/shared"),
        help="directory shared by all tasks (run state, checkpoints, results)",
    )
    parser.add_argument("--steps-per-epoch", type=int, default=40, help="training steps per epoch")
    parser.add_argument(
        "--batch-size-per-worker", type=int, default=32, help="batch size of each step"
    )
    parser.add_argument(
        "--evaluator-wait",
        type=float,
        default=60.0,
        help="seconds the chief waits for the evaluator's report on the final checkpoint",
    )
    return parser.parse_args(argv)


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


def read_json(path: Path) -> dict[str, Any] | None:
    try:
        data = json.loads(path.read_text())
    except (FileNotFoundError, json.JSONDecodeError):
        return None
    return data if isinstance(data, dict) else None


def write_json(path: Path, data: dict[str, Any]) -> None:
    """Write JSON atomically, so a reader never sees half a file."""
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_name(f".{path.name}.{os.getpid()}.tmp")
    tmp.write_text(json.dumps(data, indent=2, sort_keys=True) + "\n")
    tmp.replace(path)


def checkpoint_epoch(path: str) -> int:
    """`.../ckpt-0007` -> 7."""
    return int(path.rsplit("-", 1)[-1])


def serve(resolver: tf.distribute.cluster_resolver.ClusterResolver, shared: Path) -> int:
    """ps and worker tasks: serve the coordinator until it marks a run finished."""
    server = tf.distribute.Server(
        resolver.cluster_spec(),
        job_name=resolver.task_type,
        task_index=resolver.task_id,
        protocol=resolver.rpc_layer or "grpc",
        start=True,
    )
    print(f"{resolver.task_type}-{resolver.task_id}: serving at {server.target}", flush=True)
    # A run that is already finished when this task starts belongs to an earlier job.
    state = read_json(shared / "run.json") or {}
    stale = state.get("run_id") if state.get("state") == "finished" else None
    while True:
        state = read_json(shared / "run.json") or {}
        if state.get("state") == "finished" and state.get("run_id") != stale:
            print(f"run {state['run_id']} finished, stopping", flush=True)
            return 0
        time.sleep(POLL_SECONDS)


def start_or_resume_run(shared: Path, epochs: int) -> str:
    """Return the run id: the one in progress if there is a backup, else a new one."""
    state = read_json(shared / "run.json") or {}
    backup = shared / "backup"
    resumable = backup.is_dir() and any(backup.iterdir())
    if resumable and state.get("state") == "training" and state.get("run_id"):
        return str(state["run_id"])
    for stale in ("checkpoints", "backup"):
        shutil.rmtree(shared / stale, ignore_errors=True)
    for stale_result in ("chief-0.json", "evaluator-0.json"):
        (shared / "results" / stale_result).unlink(missing_ok=True)
    run_id = uuid.uuid4().hex[:12]
    write_json(shared / "run.json", {"run_id": run_id, "state": "training", "epochs": epochs})
    return run_id


def coordinate(
    resolver: tf.distribute.cluster_resolver.ClusterResolver, args: argparse.Namespace
) -> int:
    """The chief: train with model.fit on the workers, then collect the evaluator's report."""
    shared: Path = args.shared_dir
    run_id = start_or_resume_run(shared, args.epochs)
    print(f"chief: run {run_id}", flush=True)

    # The evaluator is listed in TF_CONFIG but runs no server: keep it out of the training cluster.
    jobs = resolver.cluster_spec().as_dict()
    has_evaluator = bool(jobs.pop("evaluator", None))
    training_cluster = tf.distribute.cluster_resolver.SimpleClusterResolver(
        tf.train.ClusterSpec(jobs),
        task_type="chief",
        task_id=0,
        rpc_layer=resolver.rpc_layer or "grpc",
    )
    strategy = tf.distribute.ParameterServerStrategy(training_cluster)

    x_train, y_train, _, _ = load_data()

    def dataset_fn(context: tf.distribute.InputContext) -> tf.data.Dataset:
        dataset = tf.data.Dataset.from_tensor_slices((x_train, y_train))
        dataset = dataset.shard(context.num_input_pipelines, context.input_pipeline_id)
        return dataset.shuffle(len(x_train)).repeat().batch(args.batch_size_per_worker).prefetch(2)

    with strategy.scope():
        model = build_model()

    callbacks: list[keras.callbacks.Callback] = [
        keras.callbacks.BackupAndRestore(backup_dir=str(shared / "backup")),
        keras.callbacks.ModelCheckpoint(
            filepath=str(shared / "checkpoints" / "ckpt-{epoch:04d}"),
            save_weights_only=True,
        ),
    ]
    if HAVE_TENSORBOARD:
        callbacks.append(keras.callbacks.TensorBoard(log_dir=str(shared / "logs" / run_id)))
    final_checkpoint = str(shared / "checkpoints" / f"ckpt-{args.epochs:04d}")
    history = model.fit(
        keras.utils.experimental.DatasetCreator(dataset_fn),
        epochs=args.epochs,
        steps_per_epoch=args.steps_per_epoch,
        callbacks=callbacks,
        verbose=2,
    )

    report = wait_for_evaluator(shared, run_id, args.evaluator_wait) if has_evaluator else None
    if has_evaluator and report is None:
        print(f"chief: no evaluator report within {args.evaluator_wait:.0f} s", flush=True)
    write_json(
        shared / "results" / "chief-0.json",
        {
            "run_id": run_id,
            "epochs_completed": args.epochs,
            "final_loss": history.history["loss"][-1] if history.epoch else None,
            "final_checkpoint": final_checkpoint,
            "evaluator": report,
        },
    )
    write_json(
        shared / "run.json",
        {
            "run_id": run_id,
            "state": "finished",
            "epochs": args.epochs,
            "final_checkpoint": final_checkpoint,
        },
    )
    print("chief: done", flush=True)
    return 0


def wait_for_evaluator(shared: Path, run_id: str, timeout: float) -> dict[str, Any] | None:
    """The evaluator's report on the final checkpoint of this run, or None after `timeout`."""
    deadline = time.monotonic() + timeout
    while True:
        report = read_json(shared / "results" / "evaluator-0.json")
        if report and report.get("run_id") == run_id and report.get("final"):
            return report
        if time.monotonic() >= deadline:
            return None
        time.sleep(POLL_SECONDS)


def wait_for_new_run(shared: Path) -> dict[str, Any]:
    """The evaluator waits for a run in training (a finished one is an earlier job's)."""
    while True:
        state = read_json(shared / "run.json") or {}
        if state.get("state") == "training" and state.get("run_id"):
            return state
        time.sleep(POLL_SECONDS)


def evaluate_checkpoints(shared: Path) -> int:
    """The evaluator: evaluate every new checkpoint of the current run, up to the final one."""
    run = wait_for_new_run(shared)
    run_id, epochs = str(run["run_id"]), int(run["epochs"])
    print(f"evaluator: following run {run_id} ({epochs} epochs)", flush=True)
    _, _, x_test, y_test = load_data()
    model = build_model()
    checkpoint_dir = shared / "checkpoints"
    summaries = (
        tf.summary.create_file_writer(str(shared / "logs" / run_id / "evaluation"))
        if HAVE_TENSORBOARD
        else None
    )
    evaluated = ""
    while True:
        state = read_json(shared / "run.json") or {}
        if state.get("run_id") != run_id:
            print("evaluator: the run was replaced by a new one", flush=True)
            return 1
        latest = (
            tf.train.latest_checkpoint(str(checkpoint_dir)) if checkpoint_dir.exists() else None
        )
        if latest is None or latest == evaluated:
            time.sleep(POLL_SECONDS)
            continue
        try:
            model.load_weights(latest)
        except (tf.errors.OpError, ValueError) as error:
            print(f"evaluator: {latest} not readable yet ({type(error).__name__})", flush=True)
            time.sleep(POLL_SECONDS)
            continue
        loss, accuracy = model.evaluate(x_test, y_test, batch_size=256, verbose=0)
        epoch = checkpoint_epoch(latest)
        evaluated = latest
        final = epoch >= epochs
        if summaries is not None:
            with summaries.as_default(step=epoch):
                tf.summary.scalar("epoch_loss", loss)
                tf.summary.scalar("epoch_accuracy", accuracy)
            summaries.flush()
        write_json(
            shared / "results" / "evaluator-0.json",
            {
                "run_id": run_id,
                "checkpoint": latest,
                "epoch": epoch,
                "loss": float(loss),
                "accuracy": float(accuracy),
                "final": final,
            },
        )
        print(f"evaluator: {latest}: accuracy {accuracy:.4f}, loss {loss:.4f}", flush=True)
        if final:
            return 0


def train_alone(args: argparse.Namespace) -> int:
    """Without TF_CONFIG there is no cluster: train in this process and evaluate at the end."""
    x_train, y_train, x_test, y_test = load_data()
    model = build_model()
    history = model.fit(
        x_train, y_train, epochs=args.epochs, batch_size=args.batch_size_per_worker, verbose=2
    )
    loss, accuracy = model.evaluate(x_test, y_test, verbose=0)
    write_json(
        args.shared_dir / "results" / "chief-0.json",
        {
            "run_id": None,
            "epochs_completed": args.epochs,
            "final_loss": history.history["loss"][-1],
            "final_checkpoint": None,
            "evaluator": {"loss": float(loss), "accuracy": float(accuracy), "final": True},
        },
    )
    print(f"held-out accuracy {accuracy:.4f}, loss {loss:.4f}", flush=True)
    return 0


def main(argv: list[str] | None = None) -> int:
    args = parse_args(argv)
    shared: Path = args.shared_dir
    (shared / "results").mkdir(parents=True, exist_ok=True)
    keras.utils.set_random_seed(SEED)
    if not os.environ.get("TF_CONFIG"):
        return train_alone(args)
    resolver = tf.distribute.cluster_resolver.TFConfigClusterResolver()
    role = resolver.task_type
    if role in ("ps", "worker"):
        return serve(resolver, shared)
    if role == "chief":
        return coordinate(resolver, args)
    if role == "evaluator":
        return evaluate_checkpoints(shared)
    print(f"error: unknown task type {role!r} in TF_CONFIG", file=sys.stderr)
    return 2


if __name__ == "__main__":
    raise SystemExit(main())
