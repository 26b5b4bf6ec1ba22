"""A small MultiWorkerMirroredStrategy training; replace it with yours.

TF_CONFIG comes from tfcompile's manifests; with one pod there is none and this trains alone.
"""

import argparse
import importlib.util
import os

# tf.keras must be Keras 2: TensorFlow 2.15's own, or from TensorFlow 2.16 on the tf-keras
# package, which TF_USE_LEGACY_KERAS=1 selects (set without tf-keras, it breaks tf.keras).
if importlib.util.find_spec("tf_keras") is not None:
    os.environ.setdefault("TF_USE_LEGACY_KERAS", "1")
else:
    os.environ.pop("TF_USE_LEGACY_KERAS", None)

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
