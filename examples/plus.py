"""The original TFMesos smoke test, for TensorFlow 2: 10 on a ps task plus
32 on a worker task, added in-graph through the worker's gRPC target.

    python examples/plus.py                 # embedded local master
    python examples/plus.py mesos-master:5050
Prints 42.
"""

import sys

import tensorflow as tf

from tfmesos import cluster


def main(argv):
    master = argv[1] if len(argv) > 1 else None
    jobs = [{"name": "ps", "num": 1, "cpus": 0.5, "mem": 1024},
            {"name": "worker", "num": 1, "cpus": 0.5, "mem": 1024}]
    tf.compat.v1.disable_eager_execution()
    with cluster(jobs, master=master) as c:
        with tf.device("/job:ps/task:0"):
            a = tf.constant(10)
        with tf.device("/job:worker/task:0"):
            b = tf.constant(32)
            total = tf.add(a, b)
        with tf.compat.v1.Session(c.targets["/job:worker/task:0"]) as session:
            print(session.run(total))


if __name__ == "__main__":
    main(sys.argv)
