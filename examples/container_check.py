"""A replica-mode task that says where it runs: the image (from the marker
file /etc/tfmesos-image that only the tfmesos image has), the interpreter and
the user, and checks that what tfrun substituted into its command line agrees
with TF_CONFIG. With --tensorflow the ps task serves a TensorFlow gRPC server
and the worker adds 10 (on the ps) and 32 (on itself) through it.

    tfrun -I tfmesos/tfmesos -V $PWD/examples:/examples:ro -w 1 -s 1 -- \\
        python3 /examples/container_check.py --ps_hosts {ps_hosts} \\
        --worker_hosts {worker_hosts} --job_name {job_name} --task_index {task_index}

Exits 1 when the placeholders and TF_CONFIG disagree. Standard library only,
unless --tensorflow.
"""

import json
import os
import sys

from replica_hello import placeholder_parser, problems_with, report  # examples/replica_hello.py

MARKER = "/etc/tfmesos-image"


def image_name():
    try:
        with open(MARKER, encoding="utf-8") as handle:
            return handle.read().strip()
    except OSError:
        return "none (%s is missing: not in the tfmesos image)" % MARKER


def plus(args, config):
    """10 on ps:0 plus 32 on worker:0, in-graph through the worker's server."""
    import tensorflow as tf

    tf.compat.v1.disable_eager_execution()
    spec = tf.train.ClusterSpec(config["cluster"])
    server = tf.distribute.Server(spec, job_name=args.job_name, task_index=args.task_index,
                                  start=True)
    if args.job_name == "ps":
        print("ps serving on %s" % args.ps_hosts[args.task_index], flush=True)
        server.join()   # until tfrun stops the run
        return
    with tf.device("/job:ps/task:0"):
        a = tf.constant(10)
    with tf.device("/job:worker/task:%d" % args.task_index):
        b = tf.constant(32)
        total = tf.add(a, b)
    with tf.compat.v1.Session(server.target) as session:
        print("10 + 32 = %d (TensorFlow %s)" % (session.run(total), tf.__version__))


def main(argv=None):
    parser = placeholder_parser(__doc__.splitlines()[0])
    parser.add_argument("--tensorflow", action="store_true",
                        help="ps serves, the worker computes 10 + 32 across both")
    args = parser.parse_args(argv)
    config = json.loads(os.environ["TF_CONFIG"])
    print("%s:%d image: %s" % (args.job_name, args.task_index, image_name()))
    print("%s:%d python: %s" % (args.job_name, args.task_index, sys.executable))
    print("%s:%d user: %d:%d" % (args.job_name, args.task_index, os.getuid(), os.getgid()))
    problems = problems_with(args, config)
    report(problems)
    if problems:
        return 1
    if args.tensorflow:
        plus(args, config)
    return 0


if __name__ == "__main__":
    sys.exit(main())
