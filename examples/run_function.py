"""``tfmesos.run``: a Python function in every task of a cluster. ``train``
below trains a small Keras model on scikit-learn's bundled digits with
``MultiWorkerMirroredStrategy`` (every worker in step, data sharded) and
returns what it measured on the test split; the calling script gets every
worker's value back (a ``RunResult``), the chief's (here worker 0's) as
``.value``.

    python examples/run_function.py                    # 2 workers, embedded master
    python examples/run_function.py --workers 3 --epochs 20
    MESOS_MASTER=zk://zk1:2181/mesos python examples/run_function.py

``train`` travels by value (cloudpickle: it is in ``__main__``); the
examples directory is shipped with it, so ``digits`` imports in every task,
on agents that share no files with this machine too. Needs ``tf_keras``
(``pip install tf-keras``): Keras 3 does not train under
``MultiWorkerMirroredStrategy``.
"""

import argparse
import os

import tfmesos

HERE = os.path.dirname(os.path.abspath(__file__))


def train(epochs, batch_size, learning_rate):
    """One worker's part; every worker returns its own measures."""
    import json
    import os
    os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")
    import tensorflow as tf
    import tf_keras as keras
    from digits import SEED, build_model, load_data  # shipped with this directory

    strategy = tf.distribute.MultiWorkerMirroredStrategy()
    task = json.loads(os.environ["TF_CONFIG"])["task"]
    (x_train, y_train), (x_test, y_test) = load_data()
    workers = strategy.num_replicas_in_sync
    global_batch = batch_size * workers
    options = tf.data.Options()
    options.experimental_distribute.auto_shard_policy = tf.data.experimental.AutoShardPolicy.DATA
    dataset = (tf.data.Dataset.from_tensor_slices((x_train, y_train))
               .shuffle(len(x_train), seed=SEED).repeat().batch(global_batch)
               .with_options(options))
    with strategy.scope():
        model = build_model(keras, learning_rate)
    history = model.fit(dataset, epochs=epochs, steps_per_epoch=len(x_train) // global_batch,
                        verbose=0)
    # Every worker evaluates (collective ops need them all); each prints its part.
    loss, accuracy = model.evaluate(x_test, y_test, batch_size=256, verbose=0)
    print("%s:%d trained %d epochs: loss %.4f, test accuracy %.4f"
          % (task["type"], task["index"], epochs, loss, accuracy), flush=True)
    return {"accuracy": float(accuracy), "loss": float(loss), "workers": workers,
            "train_accuracy": [float(a) for a in history.history["accuracy"]]}


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--workers", type=int, default=2)
    parser.add_argument("--epochs", type=int, default=10)
    parser.add_argument("--batch-size", type=int, default=32)
    parser.add_argument("--learning-rate", type=float, default=0.01)
    parser.add_argument("--master", help="Mesos master (default: $MESOS_MASTER, else the "
                        "embedded local master)")
    args = parser.parse_args()
    result = tfmesos.run(train, args.epochs, args.batch_size, args.learning_rate,
                         workers=args.workers, ship=HERE, master=args.master,
                         cpus=1, mem=1500)
    chief = result.value   # worker 0's: this run has no chief
    print("final accuracy: %.4f (%d workers, train accuracy per epoch: %s)"
          % (chief["accuracy"], chief["workers"],
             " ".join("%.2f" % a for a in chief["train_accuracy"])))
    print("test accuracy per worker: %s" % ", ".join(
        "%s %.4f" % (task, value["accuracy"]) for task, value in result.items()))


if __name__ == "__main__":
    main()
