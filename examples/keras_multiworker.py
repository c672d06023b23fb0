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
worker takes part). An ``evaluator`` task trains nothing: it evaluates every
checkpoint of this run, in order, and stops after the last epoch's.

Runs are told apart by ``TFMESOS_RUN_ID`` (tfrun sets it in every task): the
chief removes an earlier run's checkpoints, then writes the run id to
``checkpoints/RUN``; the evaluator reads checkpoints only while ``RUN`` names
its own run. It announces itself in ``checkpoints/evaluated-<run id>``, and the
chief waits (``--eval-timeout`` at most) until it has evaluated the last
checkpoint, since tfrun stops the evaluator when the chief ends. On a real
cluster ``--model-dir`` must be storage that every task sees: an HDFS/S3/GCS
path TensorFlow can write, an NFS mount, or a volume (``tfrun -V
/nfs/model:/nfs/model ...``).

With ``--model-dir``, every worker also keeps ``BackupAndRestore``'s backup
in ``<model-dir>/backup`` (TensorFlow's pattern for MultiWorkerMirroredStrategy):
after a whole restart (``tfrun --max-restarts 1``) training goes on from the
epoch after the last backup (``training from epoch N/M``), not from the first.

Every worker logs its loss and accuracy per epoch with
``tfmesos.keras.MetricsCallback`` (tfrun's status line, run.json, ``tfmesos
show``, ``tfmesos report``), and prints ``epoch N/M loss L accuracy A``,
``steps/s: R`` (epochs after the first) and, on the chief, ``final accuracy: X``
on the digits test split; the evaluator prints ``evaluation: epoch N accuracy X``.
Needs ``tf_keras`` (``pip install tf-keras``): Keras 3 does not train under
``MultiWorkerMirroredStrategy``.
"""

import argparse
import json
import os
import re
import shutil
import sys
import tempfile
import time

os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")

import numpy as np
import tensorflow as tf
from digits import SEED, build_model, load_data

import tfmesos.keras

try:
    import tf_keras as keras
except ImportError:  # pragma: no cover - a message for users
    sys.exit("this example needs Keras 2: pip install tf-keras")

CHECKPOINT = re.compile(r"ckpt-(\d+)\.index$")
POLL = 0.5  # seconds between looks at the checkpoint directory


def role():
    task = json.loads(os.environ.get("TF_CONFIG") or "{}").get("task", {})
    return task.get("type"), task.get("index", 0)


def run_id():
    """This run's id, the same in every task (``local`` outside tfrun)."""
    return os.environ.get("TFMESOS_RUN_ID") or "local"


def read_text(path):
    """The content of ``path``, or None when there is no such file."""
    try:
        with tf.io.gfile.GFile(path) as handle:
            return handle.read().strip()
    except tf.errors.NotFoundError:
        return None


def write_text(path, text):
    """Replace ``path`` at once (readers never see half of it)."""
    with tf.io.gfile.GFile(path + ".tmp", "w") as handle:
        handle.write(text)
    tf.io.gfile.rename(path + ".tmp", path, overwrite=True)


def claim_checkpoints(directory, run):
    """The chief, before training: remove an earlier run's checkpoints (and
    evaluator marks), then mark ``directory`` as this run's."""
    tf.io.gfile.makedirs(directory)
    for name in tf.io.gfile.listdir(directory):
        path = os.path.join(directory, name.rstrip("/"))
        if name.startswith(("ckpt-", "checkpoint", "RUN", "evaluated-")) \
                and not name.startswith("evaluated-" + run):
            if tf.io.gfile.isdir(path):
                tf.io.gfile.rmtree(path)
            else:
                tf.io.gfile.remove(path)
    write_text(os.path.join(directory, "RUN"), run)


def wait_for_evaluator(directory, run, epochs, timeout):
    """The chief, at the end: give an evaluator of this run the time to
    evaluate the last checkpoint (tfrun stops it when the chief ends)."""
    mark = os.path.join(directory, "evaluated-" + run)
    if read_text(mark) is None:
        return
    deadline = time.monotonic() + timeout
    while read_text(mark) not in ("done", str(epochs)) and time.monotonic() < deadline:
        time.sleep(POLL)


class EpochLog(keras.callbacks.Callback):
    """One line per epoch, so every worker shows that it trains, and where
    training starts (after a restart: the epoch after the last backup)."""

    def __init__(self, epochs):
        super().__init__()
        self.epochs = epochs
        self._started = False

    def on_epoch_begin(self, epoch, logs=None):
        if not self._started:
            self._started = True
            print("training from epoch %d/%d" % (epoch + 1, self.epochs), flush=True)

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
        self._warm = False   # the first epoch of this process is warm-up

    def on_epoch_begin(self, epoch, logs=None):
        self._start, self._batches = time.perf_counter(), 0

    def on_train_batch_end(self, batch, logs=None):
        self._batches += 1

    def on_epoch_end(self, epoch, logs=None):
        if not self._warm:
            self._warm = True
        else:
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
        model = build_model(keras, args.learning_rate)

    rate = StepRate()
    callbacks = [rate, EpochLog(args.epochs), tfmesos.keras.MetricsCallback()]
    checkpoints = os.path.join(args.model_dir or "", "checkpoints")
    if args.model_dir:
        if is_chief:
            claim_checkpoints(checkpoints, run_id())
        # On workers other than the chief, Keras writes to a temporary directory
        # and deletes it again.
        callbacks.append(keras.callbacks.ModelCheckpoint(
            os.path.join(checkpoints, "ckpt-{epoch}"), save_weights_only=True))
        # After a restart (tfrun --max-restarts) fit() goes on from the epoch
        # after the last backup; the backup is deleted once fit() completes.
        callbacks.append(keras.callbacks.BackupAndRestore(os.path.join(args.model_dir,
                                                                       "backup")))
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
            # fit() removed its backup; the directory is left (every worker is past fit()).
            if tf.io.gfile.exists(os.path.join(args.model_dir, "backup")):
                tf.io.gfile.rmtree(os.path.join(args.model_dir, "backup"))
        else:
            shutil.rmtree(target, ignore_errors=True)
    if is_chief:
        predictions = np.argmax(model(x_test, training=False), axis=1)
        print("final accuracy: %.4f" % np.mean(predictions == y_test), flush=True)
        if args.model_dir:
            wait_for_evaluator(checkpoints, run_id(), args.epochs, args.eval_timeout)


def evaluate(args):
    """The evaluator: every checkpoint of this run, in order, until the last
    epoch's."""
    if not args.model_dir:
        sys.exit("the evaluator needs --model-dir (where the chief writes checkpoints)")
    directory = os.path.join(args.model_dir, "checkpoints")
    run = run_id()
    mark = os.path.join(directory, "evaluated-" + run)
    tf.io.gfile.makedirs(directory)
    write_text(mark, "0")   # the chief waits for us
    _, (x_test, y_test) = load_data()
    model = build_model(keras, args.learning_rate)
    print("evaluator: following the checkpoints of run %s in %s" % (run, directory), flush=True)
    evaluated = []
    deadline = time.monotonic() + args.eval_timeout
    try:
        while evaluated[-1:] != [args.epochs]:
            if time.monotonic() > deadline:
                print("evaluator: no new checkpoint for %.0f s; stopping" % args.eval_timeout,
                      flush=True)
                return
            for epoch in new_checkpoints(directory, run, evaluated):
                if not evaluate_checkpoint(model, directory, epoch, x_test, y_test):
                    break   # still being written: next time
                evaluated.append(epoch)
                write_text(mark, str(epoch))
                deadline = time.monotonic() + args.eval_timeout
            if evaluated[-1:] != [args.epochs]:
                time.sleep(POLL)
    finally:
        write_text(mark, "done")
    print("evaluator: evaluated epochs %s" % ", ".join(map(str, evaluated)), flush=True)


def new_checkpoints(directory, run, evaluated):
    """Epochs of this run's checkpoints not evaluated yet, in order (none
    while ``RUN`` names another run: the chief has not cleared it yet)."""
    if read_text(os.path.join(directory, "RUN")) != run:
        return []
    epochs = [int(match.group(1)) for match in map(CHECKPOINT.match,
                                                   tf.io.gfile.listdir(directory)) if match]
    return sorted(set(epochs) - set(evaluated))


def evaluate_checkpoint(model, directory, epoch, x_test, y_test):
    """Print the test accuracy of checkpoint ``epoch``; False if it cannot
    be read yet."""
    try:
        model.load_weights(os.path.join(directory, "ckpt-%d" % epoch)).expect_partial()
    except (tf.errors.NotFoundError, tf.errors.DataLossError):
        return False
    _, accuracy = model.evaluate(x_test, y_test, verbose=0)
    print("evaluation: epoch %d accuracy %.4f" % (epoch, accuracy), flush=True)
    tfmesos.log_metrics(step=epoch, eval_accuracy=accuracy)
    return True


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--model-dir", help="where the chief writes checkpoints and the model "
                        "(shared storage on a real cluster); default: save nothing")
    parser.add_argument("--epochs", type=int, default=10)
    parser.add_argument("--batch-size", type=int, default=32, help="per worker (default 32)")
    parser.add_argument("--learning-rate", type=float, default=0.01)
    parser.add_argument("--eval-timeout", type=float, default=600.0,
                        help="the evaluator stops after this long without a new checkpoint; "
                        "the chief waits this long at most for the evaluator")
    args = parser.parse_args(argv)
    tf.random.set_seed(SEED)
    if role()[0] == "evaluator":
        evaluate(args)
    else:
        train(args)


if __name__ == "__main__":
    main()
