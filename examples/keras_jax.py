"""Keras 3 on the JAX backend, trained as one job across tfrun's workers with
Keras' own multi-process API, ``keras.distribution``, on scikit-learn's
bundled digits (8x8 images, 10 classes).

    tfrun -w 2 -s 0 -- python examples/keras_jax.py

tfrun gives every worker the three variables ``keras.distribution.initialize()``
reads: ``KERAS_DISTRIBUTION_JOB_ADDRESSES`` (the coordinator: worker 0's host,
at a second port Mesos reserved in worker 0's offer),
``KERAS_DISTRIBUTION_NUM_PROCESSES`` (how many workers) and
``KERAS_DISTRIBUTION_PROCESS_ID`` (this worker's index). JAX then sees the
devices of every process as one set (its CPU collectives go over gloo), and
``DataParallel`` over ``keras.distribution.list_devices()`` keeps a copy of
the model on each and averages the gradients of every global batch, so all
workers hold the same weights after each step.

The data: NumPy arrays are not split by Keras, so each process feeds its own
slice of the training set (``auto_shard_dataset=False``); every slice has the
same length, so every process runs the same number of steps. (A global
``tf.data.Dataset`` is sharded by Keras itself with the default
``auto_shard_dataset=True``.)

Prints ``epoch N/M loss L accuracy A`` on every worker (the loss and accuracy
of the global batches: the same on every worker) and, on worker 0,
``trained in S s`` and ``final accuracy: X`` on the whole test split. Without
tfrun (no ``KERAS_DISTRIBUTION_*``) it trains alone. Needs JAX: ``pip install
".[keras-jax]"`` (CPU JAX). ``model.fit`` under TensorFlow's
``MultiWorkerMirroredStrategy`` does not work with Keras 3 (see the README,
"Which Keras?"); ``examples/keras_custom_loop.py`` is the TensorFlow-backend way.
"""

import argparse
import os
import time

# The backend is chosen when keras is first imported.
os.environ["KERAS_BACKEND"] = "jax"
os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")

import keras
import numpy as np
from digits import SEED, build_model, load_data

import tfmesos.keras


class EpochLog(keras.callbacks.Callback):
    def __init__(self, epochs):
        super().__init__()
        self.epochs = epochs

    def on_epoch_end(self, epoch, logs=None):
        logs = logs or {}
        print("epoch %d/%d loss %.4f accuracy %.4f"
              % (epoch + 1, self.epochs, logs.get("loss", float("nan")),
                 logs.get("accuracy", float("nan"))), flush=True)


def own_slice(x, y, process, processes):
    """This process's share of (x, y): every ``processes``-th sample, all
    shares of one length (a few samples at the end may be left out)."""
    size = len(x) // processes
    return x[process::processes][:size], y[process::processes][:size]


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--epochs", type=int, default=10)
    parser.add_argument("--batch-size", type=int, default=32, help="per worker (default 32)")
    parser.add_argument("--learning-rate", type=float, default=0.01)
    args = parser.parse_args(argv)

    started = time.perf_counter()
    if os.environ.get("KERAS_DISTRIBUTION_JOB_ADDRESSES"):
        keras.distribution.initialize()   # reads the KERAS_DISTRIBUTION_* variables
    import jax

    process, processes = jax.process_index(), jax.process_count()
    keras.utils.set_random_seed(SEED)   # the same initial weights in every process
    devices = keras.distribution.list_devices()
    keras.distribution.set_distribution(
        keras.distribution.DataParallel(devices=devices, auto_shard_dataset=False))
    (x_train, y_train), (x_test, y_test) = load_data()
    x_own, y_own = own_slice(x_train, y_train, process, processes)
    print("training as process %d of %d: %d devices, global batch %d, %d samples here"
          % (process, processes, len(devices), args.batch_size * processes, len(x_own)),
          flush=True)

    model = build_model(keras, args.learning_rate)
    model.fit(x_own, y_own, batch_size=args.batch_size, epochs=args.epochs, shuffle=True,
              verbose=0, callbacks=[EpochLog(args.epochs), tfmesos.keras.MetricsCallback()])
    trained = time.perf_counter() - started
    if process == 0:
        print("trained in %.1f s" % trained, flush=True)
        # The weights are the same in every process: test them here, alone.
        weights = model.get_weights()
        keras.distribution.set_distribution(None)
        local = build_model(keras, args.learning_rate)
        local.set_weights(weights)
        predictions = np.argmax(np.asarray(local.predict(x_test, verbose=0)), axis=1)
        print("final accuracy: %.4f" % np.mean(predictions == y_test), flush=True)


if __name__ == "__main__":
    main()
