"""A small MultiWorkerMirroredStrategy training; replace it with yours.

TF_CONFIG comes from tfcompile's manifests; with one pod there is none and this trains alone.
"""

import argparse
import os

os.environ.setdefault("TF_USE_LEGACY_KERAS", "1")

import numpy as np
import tensorflow as tf

parser = argparse.ArgumentParser()
parser.add_argument("--epochs", type=int, default=3)
parser.add_argument("--shared-dir", default="/mnt/shared")
arguments = parser.parse_args()

strategy = tf.distribute.MultiWorkerMirroredStrategy()
generator = np.random.default_rng(0)
features = generator.normal(size=(4096, 16)).astype("float32")
labels = (features.sum(axis=1) > 0).astype("int32")
dataset = tf.data.Dataset.from_tensor_slices((features, labels)).shuffle(4096).batch(64)

with strategy.scope():
    model = tf.keras.Sequential(
        [
            tf.keras.layers.Dense(32, activation="relu"),
            tf.keras.layers.Dense(2),
        ]
    )
    model.compile(
        optimizer="adam",
        loss=tf.keras.losses.SparseCategoricalCrossentropy(from_logits=True),
        metrics=["accuracy"],
    )

callbacks = [
    tf.keras.callbacks.BackupAndRestore(os.path.join(arguments.shared_dir, "backup")),
    tf.keras.callbacks.TensorBoard(os.path.join(arguments.shared_dir, "logs")),
]
model.fit(dataset, epochs=arguments.epochs, callbacks=callbacks)
