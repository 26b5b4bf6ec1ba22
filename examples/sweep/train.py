"""One trial of the workshop's sweep: a small network learns to paint a picture.

The TfJob workshop's model took an image and learnt, pixel by pixel, the colour at each (x, y):
a regression whose result is easy to see and whose quality depends visibly on the learning rate
and the depth of the network, the two values the sweep varies. The picture here is drawn by the
script (rings and a gradient, 32 x 32), so the example needs no download.

Every trial runs this script with its own `--learning-rate` and `--hidden-layers` (from the
trial's LEARNING_RATE and HIDDEN_LAYERS), writes TensorBoard logs under `--log-dir`, and at the
end writes `{"loss": <final mean squared error>}` at TFCOMPILE_RESULT_FILE when it is set, which
the launcher records as the trial's result.
"""

from __future__ import annotations

import argparse
import importlib.util
import json
import os

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
SIZE = 32


def picture() -> tuple[np.ndarray, np.ndarray]:
    """Pixel coordinates in [-1, 1] and their colours in [0, 1]."""
    axis = np.linspace(-1.0, 1.0, SIZE, dtype=np.float32)
    x, y = np.meshgrid(axis, axis)
    radius = np.sqrt(x * x + y * y)
    colours = np.stack([0.5 + 0.5 * np.sin(8.0 * radius), (x + 1.0) / 2.0,
                        (y + 1.0) / 2.0], axis=-1)
    return np.stack([x.ravel(), y.ravel()], axis=1), colours.reshape(-1, 3).astype(np.float32)


def model(hidden_layers: int, learning_rate: float) -> keras.Model:
    layers = [keras.layers.Input(shape=(2,))]
    layers.extend(keras.layers.Dense(20, activation="relu") for _ in range(hidden_layers))
    layers.append(keras.layers.Dense(3, activation="sigmoid"))
    network = keras.Sequential(layers)
    network.compile(optimizer=keras.optimizers.Adam(learning_rate=learning_rate), loss="mse")
    return network


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--learning-rate", type=float, required=True)
    parser.add_argument("--hidden-layers", type=int, required=True)
    parser.add_argument("--epochs", type=int, default=20)
    parser.add_argument("--log-dir", default="")
    arguments = parser.parse_args()
    tf.random.set_seed(SEED)
    inputs, colours = picture()
    network = model(arguments.hidden_layers, arguments.learning_rate)
    callbacks = ([keras.callbacks.TensorBoard(log_dir=arguments.log_dir)]
                 if arguments.log_dir else [])
    history = network.fit(inputs, colours, batch_size=64, epochs=arguments.epochs,
                          callbacks=callbacks, verbose=2)
    loss = float(history.history["loss"][-1])
    print(f"learning rate {arguments.learning_rate}, {arguments.hidden_layers} hidden layers: "
          f"loss {loss:.5f}", flush=True)
    result_file = os.environ.get("TFCOMPILE_RESULT_FILE")
    if result_file:
        with open(result_file, "w") as handle:
            json.dump({"loss": loss}, handle)


if __name__ == "__main__":
    main()
