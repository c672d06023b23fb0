"""A task for the start-up benchmark: import TensorFlow, start the gRPC
server of the task TF_CONFIG names, record the moment it is ready, wait."""

import json
import os
import sys
import time

import tensorflow as tf

config = json.loads(os.environ["TF_CONFIG"])
task = config["task"]
server = tf.distribute.Server(tf.train.ClusterSpec(config["cluster"]), job_name=task["type"],
                              task_index=task["index"], protocol="grpc", start=True)
marker = os.path.join(sys.argv[1], "%s-%d" % (task["type"], task["index"]))
with open(marker + ".tmp", "w") as handle:
    handle.write(repr(time.time()))
os.rename(marker + ".tmp", marker)
print("ready", flush=True)
time.sleep(3600)
