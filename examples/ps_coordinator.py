"""``ParameterServerStrategy`` with this script as the coordinator: two
workers and one ps run as Mesos tasks (TensorFlow servers), the script
schedules training steps on them with a ``ClusterCoordinator``, on
scikit-learn's bundled digits (8x8 images, 10 classes).

    python examples/ps_coordinator.py                      # embedded local master
    MESOS_MASTER=mesos-master:5050 python examples/ps_coordinator.py

``cluster(..., coordinator=True)`` reserves the ``chief`` address of the
cluster for this process and ``c.cluster_resolver()`` hands it to the
strategy. The model's variables live on the ps task; each worker reads its
own copy of the dataset. Prints ``final accuracy: X`` on the digits test split.

Training survives a worker's death: the coordinator gives its steps to the
other workers, tfmesos relaunches the worker at the same address (same agent
and port, the same cluster spec), and TensorFlow takes it back, which this
script reports as ``coordinator: Worker /job:worker/replica:0/task:0 has been
recovered.`` A lost ps cannot be recovered this way (the variables live there).
"""

import argparse
import gc
import logging
import os
import sys

os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")

import numpy as np
import tensorflow as tf
from digits import SEED, load_data

from tfmesos import cluster, log_metrics


class WorkerNotes(logging.Filter):
    """On TensorFlow's logger: lets WARNING and up through as before, and
    prints its INFO note that a failed worker is back."""

    def filter(self, record):
        if record.levelno >= logging.WARNING:
            return True
        if "has been recovered" in record.getMessage():
            print("coordinator: %s" % record.getMessage(), flush=True)
        return False


class MLP(tf.Module):
    """64 -> hidden (relu) -> 10 logits, plain TensorFlow variables (created
    under the strategy's scope, they are placed on the ps tasks)."""

    def __init__(self, hidden=64):
        super().__init__()
        init = tf.random.stateless_normal
        self.w1 = tf.Variable(init([64, hidden], seed=[SEED, 1]) * 0.1, name="w1")
        self.b1 = tf.Variable(tf.zeros([hidden]), name="b1")
        self.w2 = tf.Variable(init([hidden, 10], seed=[SEED, 2]) * 0.1, name="w2")
        self.b2 = tf.Variable(tf.zeros([10]), name="b2")

    def __call__(self, x):
        return tf.matmul(tf.nn.relu(tf.matmul(x, self.w1) + self.b1), self.w2) + self.b2


def train(resolver, args):
    """Train on the cluster of ``resolver``; returns the test accuracy."""
    (x_train, y_train), (x_test, y_test) = load_data()
    tf.get_logger().setLevel(logging.INFO)
    tf.get_logger().addFilter(WorkerNotes())
    strategy = tf.distribute.ParameterServerStrategy(resolver)
    coordinator = tf.distribute.coordinator.ClusterCoordinator(strategy)
    with strategy.scope():
        model = MLP()

    def dataset_fn():
        return (tf.data.Dataset.from_tensor_slices((x_train, y_train))
                .shuffle(len(x_train), seed=SEED).repeat().batch(args.batch_size))

    @tf.function
    def per_worker_dataset_fn():
        return strategy.distribute_datasets_from_function(lambda _: dataset_fn())

    iterator = iter(coordinator.create_per_worker_dataset(per_worker_dataset_fn))

    @tf.function
    def train_step(iterator):
        def replica_fn(x, y):
            with tf.GradientTape() as tape:
                loss = tf.reduce_mean(tf.nn.sparse_softmax_cross_entropy_with_logits(
                    labels=y, logits=model(x)))
            grads = tape.gradient(loss, model.trainable_variables)
            for variable, grad in zip(model.trainable_variables, grads):
                variable.assign_sub(args.learning_rate * grad)
            return loss
        x, y = next(iterator)
        return strategy.reduce(tf.distribute.ReduceOp.MEAN,
                               strategy.run(replica_fn, args=(x, y)), axis=None)

    for step in range(args.steps):
        loss = coordinator.schedule(train_step, args=(iterator,))
        if (step + 1) % 100 == 0:
            coordinator.join()
            print("step %d loss %.4f" % (step + 1, loss.fetch()), flush=True)
            log_metrics(step=step + 1, loss=loss.fetch())   # run.json, as chief:0
    coordinator.join()
    predictions = np.argmax(model(tf.constant(x_test)).numpy(), axis=1)
    return float(np.mean(predictions == y_test))


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("master", nargs="?", help="Mesos master (default: $MESOS_MASTER, "
                        "else the embedded local master)")
    parser.add_argument("--steps", type=int, default=400, help="training steps (default 400)")
    parser.add_argument("--batch-size", type=int, default=32)
    # 0.5 trained a little faster but now and then diverged (async updates).
    parser.add_argument("--learning-rate", type=float, default=0.2)
    args = parser.parse_args(argv)

    jobs = [{"name": "worker", "num": 2, "cpus": 0.5, "mem": 1024},
            {"name": "ps", "num": 1, "cpus": 0.5, "mem": 1024}]
    with cluster(jobs, master=args.master, coordinator=True) as c:
        print("cluster: %s" % c.spec, flush=True)
        accuracy = train(c.cluster_resolver(), args)
        # Free the strategy's remote functions while the servers still run
        # (else TensorFlow complains about each one at exit).
        gc.collect()
    print("final accuracy: %.4f" % accuracy, flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
