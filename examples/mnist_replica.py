"""Between-graph replication, the original TFMesos ``mnist_replica`` example
ported to TensorFlow 2 (``tf.compat.v1`` graph mode), trained on
scikit-learn's bundled digits (8x8 images, 10 classes) instead of a download:

    tfrun -w 2 -s 1 -- python examples/mnist_replica.py \\
        --ps_hosts {ps_hosts} --worker_hosts {worker_hosts} \\
        --job_name {job_name} --task_index {task_index}

Every task runs this script. The ps tasks serve the variables
(``replica_device_setter`` places them there) until tfrun stops them once
every worker has finished. Each worker builds the same graph, computes on its
own device and updates the shared variables asynchronously; worker 0 (the
chief) initializes them, the others wait for that. Training stops when the
shared global step reaches ``--train_steps``; worker 0 then prints
``final accuracy: X`` on the digits test split.
"""

import argparse
import os
import sys

os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")

import numpy as np
import tensorflow as tf
from digits import SEED, load_data

import tfmesos

v1 = tf.compat.v1
def hosts(text):
    return [host for host in text.split(",") if host]


def build_graph(args, cluster):
    """The model, with its variables on the ps tasks and its ops on this worker."""
    device = v1.train.replica_device_setter(
        worker_device="/job:worker/task:%d" % args.task_index, cluster=cluster)
    with v1.device(device):
        global_step = v1.train.get_or_create_global_step()
        hid_w = v1.Variable(v1.truncated_normal([64, args.hidden_units], stddev=1.0 / 8,
                                                seed=SEED), name="hid_w")
        hid_b = v1.Variable(tf.zeros([args.hidden_units]), name="hid_b")
        sm_w = v1.Variable(v1.truncated_normal([args.hidden_units, 10],
                                               stddev=1.0 / np.sqrt(args.hidden_units),
                                               seed=SEED + 1), name="sm_w")
        sm_b = v1.Variable(tf.zeros([10]), name="sm_b")

        x = v1.placeholder(tf.float32, [None, 64], name="x")
        y_ = v1.placeholder(tf.int64, [None], name="y_")
        hidden = tf.nn.relu(v1.nn.xw_plus_b(x, hid_w, hid_b))
        logits = v1.nn.xw_plus_b(hidden, sm_w, sm_b)
        loss = tf.reduce_mean(tf.nn.sparse_softmax_cross_entropy_with_logits(
            labels=y_, logits=logits))
        train_op = v1.train.AdamOptimizer(args.learning_rate).minimize(
            loss, global_step=global_step)
        accuracy = tf.reduce_mean(tf.cast(tf.equal(tf.argmax(logits, 1), y_), tf.float32))
    return dict(x=x, y_=y_, loss=loss, train_op=train_op, accuracy=accuracy,
                global_step=global_step, init_op=v1.global_variables_initializer(),
                ready_op=v1.report_uninitialized_variables())


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--ps_hosts", type=hosts, required=True,
                        help="comma-separated host:port pairs")
    parser.add_argument("--worker_hosts", type=hosts, required=True,
                        help="comma-separated host:port pairs")
    parser.add_argument("--job_name", choices=["ps", "worker"], required=True)
    parser.add_argument("--task_index", type=int, required=True)
    parser.add_argument("--train_steps", type=int, default=400,
                        help="global training steps (default 400)")
    parser.add_argument("--batch_size", type=int, default=32)
    parser.add_argument("--hidden_units", type=int, default=64)
    parser.add_argument("--learning_rate", type=float, default=0.01)
    args = parser.parse_args(argv)

    v1.disable_eager_execution()
    cluster = tf.train.ClusterSpec({"ps": args.ps_hosts, "worker": args.worker_hosts})
    server = tf.distribute.Server(cluster, job_name=args.job_name, task_index=args.task_index)
    if args.job_name == "ps":
        print("ps %d: serving variables at %s" % (args.task_index, server.target), flush=True)
        server.join()  # until tfrun stops this task
        return 0

    is_chief = args.task_index == 0
    (x_train, y_train), (x_test, y_test) = load_data()
    graph = build_graph(args, cluster)
    manager = v1.train.SessionManager(ready_op=graph["ready_op"], recovery_wait_secs=0.5)
    config = v1.ConfigProto(device_filters=["/job:ps", "/job:worker/task:%d" % args.task_index])
    if is_chief:
        print("worker %d: initializing the variables" % args.task_index, flush=True)
        session = manager.prepare_session(server.target, init_op=graph["init_op"], config=config)
    else:
        print("worker %d: waiting for worker 0 to initialize the variables" % args.task_index,
              flush=True)
        session = manager.wait_for_session(server.target, config=config, max_wait_secs=300)
    if session is None:
        sys.exit("worker %d: the variables were not initialized in time" % args.task_index)

    rng = np.random.default_rng(SEED + args.task_index)
    local_step, step = 0, 0
    with session:
        while step < args.train_steps:
            batch = rng.choice(len(x_train), args.batch_size, replace=False)
            _, loss, step = session.run(
                [graph["train_op"], graph["loss"], graph["global_step"]],
                feed_dict={graph["x"]: x_train[batch], graph["y_"]: y_train[batch]})
            local_step += 1
            if local_step % 100 == 0:
                print("worker %d: local step %d, global step %d, loss %.4f"
                      % (args.task_index, local_step, step, loss), flush=True)
                tfmesos.log_metrics(step=int(step), loss=loss)
        print("worker %d: done after %d local steps (global step %d)"
              % (args.task_index, local_step, step), flush=True)
        if is_chief:
            accuracy = session.run(graph["accuracy"],
                                   feed_dict={graph["x"]: x_test, graph["y_"]: y_test})
            print("final accuracy: %.4f" % accuracy, flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
