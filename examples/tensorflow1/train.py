"""TensorFlow 1 style between-graph replication, as hand-written Helm charts ran it.

The cluster comes from flags (`--ps_hosts`, `--worker_hosts`, `--job_name`, `--task_index`), the
way TensorFlow 1 scripts were written before `TF_CONFIG`; the job fills them from tfcompile's
`PS_HOSTS`, `WORKER_HOSTS`, `JOB_NAME` and `TASK_INDEX` variables. Everything runs in graph mode
through `tf.compat.v1`:

- `ps` tasks start a `tf.compat.v1.train.Server` and hold the variables.
- `worker` tasks build the same graph with `replica_device_setter` (variables on the ps tasks,
  computation on the worker) and train asynchronously with `MonitoredTrainingSession` until the
  global step reaches `--train_steps`. Worker 0 is the chief: it initializes or restores the
  variables, writes checkpoints to `--shared-dir/checkpoints` and TensorBoard summaries to
  `--shared-dir/logs/train`. A restarted worker resumes from the latest checkpoint.
- the `evaluator` is not part of the cluster: it evaluates each new checkpoint on held-out data,
  writes summaries to `--shared-dir/logs/eval`, and stops after the checkpoint of the last step.

The prepared data set (8x8 digits from scikit-learn, scaled and split) is cached as `.npy` files
in `--scratch-dir`, node-local scratch space that survives container restarts.

What differs from the same script under TensorFlow 1.x, and why:

- `tf.device` in TensorFlow 2 rejects device functions, so the `replica_device_setter` is applied
  with `tf.compat.v1.device`.
- `tf.compat.v1.layers` fails under Keras 3 ("`dense` is not available with Keras 3") and works
  only with the separate tf-keras package and `TF_USE_LEGACY_KERAS=1`. The model is therefore
  written with `tf.compat.v1.get_variable` and plain ops, and the script needs no Keras at all.
- `MonitoredTrainingSession` makes a non-chief worker that finds the model uninitialized sleep a
  fixed 30 seconds before looking again. Non-chief workers therefore first poll for the chief's
  initialization every second themselves, then open the session.
- `server.join()` never returns, and a task that never exits leaves its pod (and resources)
  running after training ended. Each ps task instead waits on a queue that lives on it: every
  worker puts a token in it as its last step, and the ps exits 0 after one token per worker (the
  usual TensorFlow 1 way to stop parameter servers). A ps that restarts after some workers have
  finished keeps serving, like `join()`.

Files written under `--shared-dir`:

- `checkpoints/model.ckpt-<step>.*`, written by the chief.
- `logs/train` (chief) and `logs/eval` (evaluator): TensorBoard summaries.
- `results/worker-<i>.json`: `global_step`, `local_steps`, `final_loss`, `is_chief`.
- `results/evaluator-0.json`: `checkpoint`, `global_step`, `loss`, `accuracy`, `final`.
"""

from __future__ import annotations

import argparse
import json
import os
import time
from pathlib import Path
from typing import Any

import numpy as np
import tensorflow as tf

SEED = 1234
v1 = tf.compat.v1


def parse_args(argv: list[str] | None = None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--ps_hosts", default="", help="comma-separated host:port of ps tasks")
    parser.add_argument(
        "--worker_hosts", default="", help="comma-separated host:port of worker tasks"
    )
    parser.add_argument("--job_name", default="worker", choices=["ps", "worker", "evaluator"])
    parser.add_argument("--task_index", type=int, default=0)
    parser.add_argument("--train_steps", type=int, default=1500, help="global step to stop at")
    parser.add_argument("--batch_size", type=int, default=32)
    parser.add_argument("--learning_rate", type=float, default=0.003)
    parser.add_argument(
        "--checkpoint_steps", type=int, default=300, help="global steps between checkpoints"
    )
    parser.add_argument(
        "--shared-dir",
        "--shared_dir",
        dest="shared_dir",
        type=Path,
        default=Path("/mnt/shared"),
        help="directory shared by all tasks (checkpoints, summaries, results)",
    )
    parser.add_argument(
        "--scratch-dir",
        "--scratch_dir",
        dest="scratch_dir",
        type=Path,
        default=Path("/mnt/scratch"),
        help="node-local directory for the prepared data set cache",
    )
    return parser.parse_args(argv)


def host_list(flag: str) -> list[str]:
    return [host for host in flag.split(",") if host]


def write_json(path: Path, data: dict[str, Any]) -> None:
    """Write JSON atomically, so a reader never sees half a file."""
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_name(f".{path.name}.{os.getpid()}.tmp")
    tmp.write_text(json.dumps(data, indent=2, sort_keys=True) + "\n")
    tmp.replace(path)


def prepared_data(scratch: Path) -> dict[str, np.ndarray]:
    """Scaled digits with a fixed 25 % held-out split, cached as .npy files in scratch space."""
    cache = scratch / "digits"
    names = ("x_train", "y_train", "x_test", "y_test")
    if all((cache / f"{name}.npy").exists() for name in names):
        print(f"data: cached in {cache}", flush=True)
        return {name: np.load(cache / f"{name}.npy") for name in names}

    from sklearn.datasets import load_digits
    from sklearn.model_selection import train_test_split

    digits = load_digits()
    features = (digits.data / 16.0).astype("float32")
    labels = digits.target.astype("int64")
    split = train_test_split(features, labels, test_size=0.25, random_state=0, stratify=labels)
    arrays = dict(zip(("x_train", "x_test", "y_train", "y_test"), split, strict=True))
    cache.mkdir(parents=True, exist_ok=True)
    for name in names:
        tmp = cache / f".{name}.{os.getpid()}.npy"
        np.save(tmp, arrays[name])
        tmp.replace(cache / f"{name}.npy")
    print(f"data: prepared and cached in {cache}", flush=True)
    return arrays


class Model:
    """A one-hidden-layer network on 8x8 digits, in graph mode."""

    def __init__(self, learning_rate: float) -> None:
        self.features = v1.placeholder(tf.float32, [None, 64], name="features")
        self.labels = v1.placeholder(tf.int64, [None], name="labels")
        glorot = v1.glorot_uniform_initializer(seed=SEED)
        w1 = v1.get_variable("hidden/kernel", [64, 64], initializer=glorot)
        b1 = v1.get_variable("hidden/bias", [64], initializer=v1.zeros_initializer())
        w2 = v1.get_variable("logits/kernel", [64, 10], initializer=glorot)
        b2 = v1.get_variable("logits/bias", [10], initializer=v1.zeros_initializer())
        hidden = tf.nn.relu(tf.matmul(self.features, w1) + b1)
        logits = tf.matmul(hidden, w2) + b2
        self.loss = tf.reduce_mean(
            tf.nn.sparse_softmax_cross_entropy_with_logits(labels=self.labels, logits=logits)
        )
        correct = tf.equal(tf.argmax(logits, axis=1), self.labels)
        self.accuracy = tf.reduce_mean(tf.cast(correct, tf.float32))
        self.global_step = v1.train.get_or_create_global_step()
        self.train_op = v1.train.AdamOptimizer(learning_rate).minimize(
            self.loss, global_step=self.global_step
        )
        v1.summary.scalar("loss", self.loss)
        v1.summary.scalar("accuracy", self.accuracy)


def done_queue(ps_index: int, num_workers: int) -> tf.queue.FIFOQueue:
    """A queue that lives on ps task `ps_index`; each worker puts a token in it when done."""
    with tf.device(f"/job:ps/task:{ps_index}"):
        return v1.FIFOQueue(num_workers, tf.int32, shared_name=f"done_queue_{ps_index}")


def run_ps(server: tf.distribute.Server, task_index: int, num_workers: int) -> int:
    queue = done_queue(task_index, num_workers)
    config = v1.ConfigProto(device_filters=[f"/job:ps/task:{task_index}"])
    with v1.Session(server.target, config=config) as session:
        dequeue = queue.dequeue()
        for done in range(num_workers):
            session.run(dequeue)
            print(f"ps {task_index}: {done + 1}/{num_workers} workers done", flush=True)
    return 0


def wait_for_chief(target: str, config: tf.compat.v1.ConfigProto, model_ready: tf.Tensor) -> None:
    """Poll every second until the chief has initialized (or restored) the variables."""
    with v1.Session(target, config=config) as session:
        while session.run(model_ready).size:
            time.sleep(1.0)


def run_worker(
    args: argparse.Namespace, cluster: tf.train.ClusterSpec, server: tf.distribute.Server
) -> int:
    data = prepared_data(args.scratch_dir)
    index = args.task_index
    num_ps = len(cluster.job_tasks("ps")) if "ps" in cluster.jobs else 0
    num_workers = len(cluster.job_tasks("worker"))
    is_chief = index == 0
    config = v1.ConfigProto(device_filters=["/job:ps", f"/job:worker/task:{index}"])

    with v1.device(
        v1.train.replica_device_setter(worker_device=f"/job:worker/task:{index}", cluster=cluster)
    ):
        model = Model(args.learning_rate)
    enqueue_done = [done_queue(ps, num_workers).enqueue(1) for ps in range(num_ps)]
    model_ready = v1.report_uninitialized_variables()

    if not is_chief:
        wait_for_chief(server.target, config, model_ready)
    rng = np.random.default_rng(SEED + index)
    x_train, y_train = data["x_train"], data["y_train"]
    local_steps, loss = 0, float("nan")
    with v1.train.MonitoredTrainingSession(
        master=server.target,
        is_chief=is_chief,
        checkpoint_dir=str(args.shared_dir / "checkpoints"),
        summary_dir=str(args.shared_dir / "logs" / "train"),
        save_checkpoint_secs=None,
        save_checkpoint_steps=args.checkpoint_steps,
        save_summaries_steps=100,
        hooks=[v1.train.StopAtStepHook(last_step=args.train_steps)],
        config=config,
    ) as session:
        while not session.should_stop():
            batch = rng.integers(0, len(x_train), args.batch_size)
            _, loss = session.run(
                [model.train_op, model.loss],
                feed_dict={model.features: x_train[batch], model.labels: y_train[batch]},
            )
            local_steps += 1

    with v1.Session(server.target, config=config) as session:
        step = int(session.run(model.global_step))
        print(
            f"worker {index}: stopped at global step {step} after {local_steps} steps", flush=True
        )
        write_json(
            args.shared_dir / "results" / f"worker-{index}.json",
            {
                "task_index": index,
                "is_chief": is_chief,
                "global_step": step,
                "local_steps": local_steps,
                "final_loss": float(loss),
            },
        )
        # Tell every ps task that this worker is done; the last token lets a ps exit.
        session.run(enqueue_done)
    return 0


def run_evaluator(args: argparse.Namespace) -> int:
    data = prepared_data(args.scratch_dir)
    model = Model(args.learning_rate)
    saver = v1.train.Saver(var_list=[*v1.trainable_variables(), model.global_step])
    writer = v1.summary.FileWriter(str(args.shared_dir / "logs" / "eval"))
    feed = {model.features: data["x_test"], model.labels: data["y_test"]}
    checkpoints = str(args.shared_dir / "checkpoints")
    with v1.Session() as session:
        for checkpoint in v1.train.checkpoints_iterator(checkpoints, min_interval_secs=1):
            try:
                saver.restore(session, checkpoint)
            except (tf.errors.NotFoundError, tf.errors.DataLossError) as error:
                print(f"evaluator: {checkpoint} not readable ({type(error).__name__})", flush=True)
                continue
            loss, accuracy, step = session.run(
                [model.loss, model.accuracy, model.global_step], feed_dict=feed
            )
            final = int(step) >= args.train_steps
            summary = v1.Summary(
                value=[
                    v1.Summary.Value(tag="loss", simple_value=float(loss)),
                    v1.Summary.Value(tag="accuracy", simple_value=float(accuracy)),
                ]
            )
            writer.add_summary(summary, int(step))
            writer.flush()
            write_json(
                args.shared_dir / "results" / f"evaluator-{args.task_index}.json",
                {
                    "checkpoint": checkpoint,
                    "global_step": int(step),
                    "loss": float(loss),
                    "accuracy": float(accuracy),
                    "final": final,
                },
            )
            print(f"evaluator: step {step}: accuracy {accuracy:.4f}, loss {loss:.4f}", flush=True)
            if final:
                break
    writer.close()
    return 0


def train_alone(args: argparse.Namespace) -> int:
    """No cluster given: train in this process, checkpoints and summaries as the chief would."""
    data = prepared_data(args.scratch_dir)
    model = Model(args.learning_rate)
    rng = np.random.default_rng(SEED)
    with v1.train.MonitoredTrainingSession(
        checkpoint_dir=str(args.shared_dir / "checkpoints"),
        summary_dir=str(args.shared_dir / "logs" / "train"),
        save_checkpoint_secs=None,
        save_checkpoint_steps=args.checkpoint_steps,
        hooks=[v1.train.StopAtStepHook(last_step=args.train_steps)],
    ) as session:
        while not session.should_stop():
            batch = rng.integers(0, len(data["x_train"]), args.batch_size)
            session.run(
                model.train_op,
                feed_dict={
                    model.features: data["x_train"][batch],
                    model.labels: data["y_train"][batch],
                },
            )
    return 0


def main(argv: list[str] | None = None) -> int:
    args = parse_args(argv)
    v1.disable_eager_execution()
    v1.set_random_seed(SEED)
    (args.shared_dir / "results").mkdir(parents=True, exist_ok=True)

    if args.job_name == "evaluator":
        return run_evaluator(args)
    ps_hosts, worker_hosts = host_list(args.ps_hosts), host_list(args.worker_hosts)
    if not worker_hosts:
        return train_alone(args)

    jobs = {"worker": worker_hosts}
    if ps_hosts:
        jobs["ps"] = ps_hosts
    cluster = v1.train.ClusterSpec(jobs)
    server = v1.train.Server(cluster, job_name=args.job_name, task_index=args.task_index)
    print(f"{args.job_name} {args.task_index}: serving at {server.target}", flush=True)
    if args.job_name == "ps":
        return run_ps(server, args.task_index, len(worker_hosts))
    return run_worker(args, cluster, server)


if __name__ == "__main__":
    raise SystemExit(main())
