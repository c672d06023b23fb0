"""Keras with ``MultiWorkerMirroredStrategy`` on scikit-learn's bundled digits
(8x8 images, 10 classes): every worker trains in step; the chief saves the
model; an optional evaluator follows the chief's checkpoints.

    tfrun -w 2 -s 0 -- python examples/keras_multiworker.py --model-dir /tmp/model
    tfrun -c -w 1 -s 0 --evaluator -- python examples/keras_multiworker.py --model-dir /tmp/model

The role comes from ``TF_CONFIG``, which tfrun sets in every task: without a
``chief`` task, worker 0 is the chief. The chief writes a checkpoint per epoch
to ``<model-dir>/checkpoints`` and the final model (a SavedModel) to
``<model-dir>/model``; the other workers save to a temporary directory, as
TensorFlow's multi-worker guide says (saving runs collective ops, so every
worker takes part). An ``evaluator`` task trains nothing: it evaluates each
checkpoint as it appears and stops after the last epoch's (or is stopped by
tfrun when the chief ends). On a real cluster ``--model-dir`` must be storage
that every task sees: an HDFS/S3/GCS path TensorFlow can write, an NFS mount,
or a volume (``tfrun -V /nfs/model:/nfs/model ...``).

Prints ``epoch N/M loss L accuracy A`` on every worker,
``steps/s: R`` (epochs after the first) and, on the chief, ``final accuracy: X``
on the digits test split; the evaluator prints ``evaluation: epoch N accuracy X``.
Needs ``tf_keras`` (``pip install tf-keras``): Keras 3 does not train under
``MultiWorkerMirroredStrategy``.
"""

import argparse
import json
import os
import shutil
import sys
import tempfile
import time

os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")

import numpy as np  # noqa: E402
import tensorflow as tf  # noqa: E402
from digits import SEED, load_data  # noqa: E402  (examples/digits.py)

try:
    import tf_keras as keras  # noqa: E402
except ImportError:  # pragma: no cover - a message for users
    sys.exit("this example needs Keras 2: pip install tf-keras")

def build_model(learning_rate):
    model = keras.Sequential([
        keras.layers.Input(shape=(64,)),
        keras.layers.Dense(64, activation="relu"),
        keras.layers.Dense(10),
    ])
    model.compile(optimizer=keras.optimizers.Adam(learning_rate),
                  loss=keras.losses.SparseCategoricalCrossentropy(from_logits=True),
                  metrics=["accuracy"])
    return model


def role():
    task = json.loads(os.environ.get("TF_CONFIG") or "{}").get("task", {})
    return task.get("type"), task.get("index", 0)


class EpochLog(keras.callbacks.Callback):
    """One line per epoch, so every worker shows that it trains."""

    def __init__(self, epochs):
        super().__init__()
        self.epochs = epochs

    def on_epoch_end(self, epoch, logs=None):
        logs = logs or {}
        print("epoch %d/%d loss %.4f accuracy %.4f"
              % (epoch + 1, self.epochs, logs.get("loss", float("nan")),
                 logs.get("accuracy", float("nan"))), flush=True)


class StepRate(keras.callbacks.Callback):
    """Training steps per second over every epoch but the first (tracing and
    the workers' first collective are warm-up). Put it first in the list so
    that other callbacks' epoch-end work (checkpoints) is not timed."""

    def __init__(self):
        super().__init__()
        self.steps = 0
        self.seconds = 0.0
        self._start = None
        self._batches = 0

    def on_epoch_begin(self, epoch, logs=None):
        self._start, self._batches = time.perf_counter(), 0

    def on_train_batch_end(self, batch, logs=None):
        self._batches += 1

    def on_epoch_end(self, epoch, logs=None):
        if epoch > 0:
            self.steps += self._batches
            self.seconds += time.perf_counter() - self._start

    def rate(self):
        return self.steps / self.seconds if self.seconds else None


def train(args):
    strategy = tf.distribute.MultiWorkerMirroredStrategy()
    task_type, task_id = role()
    name = "%s:%d" % (task_type, task_id) if task_type else "local"
    is_chief = strategy.extended.should_checkpoint
    workers = strategy.num_replicas_in_sync
    (x_train, y_train), (x_test, y_test) = load_data()

    global_batch = args.batch_size * workers
    steps_per_epoch = len(x_train) // global_batch
    options = tf.data.Options()
    options.experimental_distribute.auto_shard_policy = tf.data.experimental.AutoShardPolicy.DATA
    dataset = (tf.data.Dataset.from_tensor_slices((x_train, y_train))
               .shuffle(len(x_train), seed=SEED).repeat().batch(global_batch)
               .with_options(options))
    with strategy.scope():
        model = build_model(args.learning_rate)

    rate = StepRate()
    callbacks = [rate, EpochLog(args.epochs)]
    if args.model_dir:
        # On workers other than the chief, Keras writes to a temporary directory
        # and deletes it again.
        callbacks.append(keras.callbacks.ModelCheckpoint(
            os.path.join(args.model_dir, "checkpoints", "ckpt-{epoch}"), save_weights_only=True))
    chief_note = " (chief)" if is_chief and task_type != "chief" else ""
    print("training as %s%s: %d worker(s), global batch %d, %d steps per epoch"
          % (name, chief_note, workers, global_batch, steps_per_epoch), flush=True)
    model.fit(dataset, epochs=args.epochs, steps_per_epoch=steps_per_epoch, verbose=0,
              callbacks=callbacks)
    if rate.rate():
        print("steps/s: %.1f" % rate.rate(), flush=True)

    if args.model_dir:
        # Every worker saves (it runs collective ops); only the chief's copy stays.
        target = os.path.join(args.model_dir, "model") if is_chief else \
            tempfile.mkdtemp(prefix="keras-worker-%d-" % task_id)
        model.save(target)
        if is_chief:
            print("saved the model to %s" % target, flush=True)
        else:
            shutil.rmtree(target, ignore_errors=True)
    if is_chief:
        predictions = np.argmax(model(x_test, training=False), axis=1)
        print("final accuracy: %.4f" % np.mean(predictions == y_test), flush=True)


def evaluate(args):
    """The evaluator: follow the chief's checkpoints until the last epoch's."""
    if not args.model_dir:
        sys.exit("the evaluator needs --model-dir (where the chief writes checkpoints)")
    _, (x_test, y_test) = load_data()
    model = build_model(args.learning_rate)
    directory = os.path.join(args.model_dir, "checkpoints")
    print("evaluator: following checkpoints in %s" % directory, flush=True)
    for path in tf.train.checkpoints_iterator(directory, timeout=args.eval_timeout):
        epoch = int(path.rsplit("-", 1)[1])
        try:
            model.load_weights(path).expect_partial()
        except (tf.errors.NotFoundError, tf.errors.DataLossError):
            continue  # overwritten while we read it; the next one comes
        _, accuracy = model.evaluate(x_test, y_test, verbose=0)
        print("evaluation: epoch %d accuracy %.4f" % (epoch, accuracy), flush=True)
        if epoch >= args.epochs:
            return
    print("evaluator: no new checkpoint for %.0f s; stopping" % args.eval_timeout, flush=True)


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--model-dir", help="where the chief writes checkpoints and the model "
                        "(shared storage on a real cluster); default: save nothing")
    parser.add_argument("--epochs", type=int, default=10)
    parser.add_argument("--batch-size", type=int, default=32, help="per worker (default 32)")
    parser.add_argument("--learning-rate", type=float, default=0.01)
    parser.add_argument("--eval-timeout", type=float, default=600.0,
                        help="the evaluator stops after this long without a new checkpoint")
    args = parser.parse_args(argv)
    tf.random.set_seed(SEED)
    if role()[0] == "evaluator":
        evaluate(args)
    else:
        train(args)


if __name__ == "__main__":
    main()
