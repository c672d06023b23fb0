"""In-graph replication in fine-grained mode, the original TFMesos ``mnist``
example ported to TensorFlow 2 (``tf.compat.v1`` graph mode), trained on
scikit-learn's bundled digits (8x8 images, 10 classes) instead of a download:

    python examples/mnist.py                       # embedded local master
    python examples/mnist.py -w 2 -s 1 mesos-master:5050

The ps and worker tasks only run TensorFlow servers. This script builds one
graph: the variables on the ps tasks, one training tower per worker on that
worker's device, and drives each worker from its own thread through
``c.targets['/job:worker/task:N']``. Prints ``final accuracy: X`` on the
digits test split.
"""

import argparse
import os
import sys
import threading

os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")

import numpy as np
import tensorflow as tf
from digits import SEED, load_data

from tfmesos import cluster

v1 = tf.compat.v1
def build_graph(nworker, nserver, learning_rate, hidden=64):
    """Variables on the ps tasks; a tower (inputs, loss, update) per worker."""
    graph = tf.Graph()
    with graph.as_default():
        with v1.device(v1.train.replica_device_setter(ps_tasks=nserver)):
            w1 = v1.Variable(v1.truncated_normal([64, hidden], stddev=1.0 / 8, seed=SEED))
            b1 = v1.Variable(tf.zeros([hidden]))
            w2 = v1.Variable(v1.truncated_normal([hidden, 10], stddev=1.0 / np.sqrt(hidden),
                                                 seed=SEED + 1))
            b2 = v1.Variable(tf.zeros([10]))
            global_step = v1.train.get_or_create_global_step()
            optimizer = v1.train.AdamOptimizer(learning_rate)

        def tower(device):
            with v1.device(device):
                x = v1.placeholder(tf.float32, [None, 64])
                y_ = v1.placeholder(tf.int64, [None])
                logits = tf.matmul(tf.nn.relu(tf.matmul(x, w1) + b1), w2) + b2
                loss = tf.reduce_mean(tf.nn.sparse_softmax_cross_entropy_with_logits(
                    labels=y_, logits=logits))
                accuracy = tf.reduce_mean(tf.cast(tf.equal(tf.argmax(logits, 1), y_),
                                                  tf.float32))
            return x, y_, loss, accuracy

        towers = []
        for i in range(nworker):
            x, y_, loss, accuracy = tower("/job:worker/task:%d" % i)
            with v1.device("/job:worker/task:%d" % i):
                grads = optimizer.compute_gradients(loss)
            train_op = optimizer.apply_gradients(grads, global_step=global_step)
            towers.append(dict(x=x, y_=y_, loss=loss, accuracy=accuracy, train_op=train_op))
        init_op = v1.global_variables_initializer()
    return graph, towers, global_step, init_op


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("master", nargs="?", help="Mesos master (default: $MESOS_MASTER, "
                        "else the embedded local master)")
    parser.add_argument("-w", "--nworker", type=int, default=2)
    parser.add_argument("-s", "--nserver", type=int, default=1)
    parser.add_argument("-Gw", "--worker-gpus", type=int, default=0)
    parser.add_argument("--steps", type=int, default=400, help="global training steps")
    parser.add_argument("--batch-size", type=int, default=32)
    parser.add_argument("--learning-rate", type=float, default=0.01)
    args = parser.parse_args(argv)

    v1.disable_eager_execution()
    (x_train, y_train), (x_test, y_test) = load_data()
    jobs = [{"name": "ps", "num": args.nserver, "cpus": 0.5, "mem": 1024},
            {"name": "worker", "num": args.nworker, "cpus": 0.5, "mem": 1024,
             "gpus": args.worker_gpus}]
    graph, towers, global_step, init_op = build_graph(args.nworker, args.nserver,
                                                      args.learning_rate)
    with cluster(jobs, master=args.master) as c:
        errors, steps_done = [], {}

        def train(i):
            tower = towers[i]
            rng = np.random.default_rng(SEED + i)
            local_steps = 0
            try:
                with v1.Session(c.targets["/job:worker/task:%d" % i], graph=graph) as session:
                    step = 0
                    while step < args.steps and not errors:
                        batch = rng.choice(len(x_train), args.batch_size, replace=False)
                        _, step = session.run([tower["train_op"], global_step], feed_dict={
                            tower["x"]: x_train[batch], tower["y_"]: y_train[batch]})
                        local_steps += 1
                steps_done[i] = local_steps
            except Exception as exc:  # re-raised in the main thread
                errors.append(exc)

        with v1.Session(c.targets["/job:worker/task:0"], graph=graph) as session:
            session.run(init_op)
            threads = [threading.Thread(target=train, args=(i,)) for i in range(args.nworker)]
            for thread in threads:
                thread.start()
            for thread in threads:
                thread.join()
            if errors:
                raise errors[0]
            for i in sorted(steps_done):   # printed here: threads' prints would interleave
                print("worker %d: %d steps" % (i, steps_done[i]), flush=True)
            accuracy = session.run(towers[0]["accuracy"], feed_dict={
                towers[0]["x"]: x_test, towers[0]["y_"]: y_test})
    print("final accuracy: %.4f" % accuracy, flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
