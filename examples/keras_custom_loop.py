"""Keras 3 on the TensorFlow backend under ``MultiWorkerMirroredStrategy``,
with a custom training loop, on scikit-learn's bundled digits (8x8 images,
10 classes).

    tfrun -w 2 -s 0 -- python examples/keras_custom_loop.py

Keras 3's ``model.fit`` fails under ``MultiWorkerMirroredStrategy`` (it
cannot convert the strategy's ``PerReplica`` values: keras-team/keras#20585),
but its models, layers, losses and optimizers work in a loop of your own: the
model and optimizer are built in ``strategy.scope()`` (mirrored variables),
each step runs ``strategy.run`` on every worker's share of the global batch,
scales the loss with ``tf.nn.compute_average_loss`` (by the global batch
size) and lets the optimizer apply the gradients, which the strategy sums
across the workers. The role comes from ``TF_CONFIG``, which tfrun sets in
every task (``-s 0``: this strategy has no ps tasks).

Prints ``epoch N/M loss L accuracy A`` on every worker and, on the chief
(worker 0 without a chief task), ``trained in S s`` and ``final accuracy: X``
on the test split. Without tfrun it trains alone. For ``model.fit`` across
workers use ``tf_keras`` (``examples/keras_multiworker.py``) or the JAX
backend (``examples/keras_jax.py``); the README's "Which Keras?" says which
works where.
"""

import argparse
import os
import time

# The backend is chosen when keras is first imported.
os.environ["KERAS_BACKEND"] = "tensorflow"
os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")

import keras
import numpy as np
import tensorflow as tf
from digits import SEED, load_data

import tfmesos


def build_model():
    return keras.Sequential([
        keras.layers.Input(shape=(64,)),
        keras.layers.Dense(64, activation="relu"),
        keras.layers.Dense(10),
    ])


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--epochs", type=int, default=10)
    parser.add_argument("--batch-size", type=int, default=32, help="per worker (default 32)")
    parser.add_argument("--learning-rate", type=float, default=0.01)
    args = parser.parse_args(argv)

    started = time.perf_counter()
    strategy = tf.distribute.MultiWorkerMirroredStrategy()
    keras.utils.set_random_seed(SEED)
    workers = strategy.num_replicas_in_sync
    (x_train, y_train), (x_test, y_test) = load_data()
    global_batch = args.batch_size * workers
    steps_per_epoch = len(x_train) // global_batch
    options = tf.data.Options()
    options.experimental_distribute.auto_shard_policy = tf.data.experimental.AutoShardPolicy.DATA
    dataset = (tf.data.Dataset.from_tensor_slices((x_train, y_train))
               .shuffle(len(x_train), seed=SEED).repeat().batch(global_batch)
               .with_options(options))
    batches = iter(strategy.experimental_distribute_dataset(dataset))

    with strategy.scope():
        model = build_model()
        optimizer = keras.optimizers.Adam(args.learning_rate)
        optimizer.build(model.trainable_variables)
    per_sample_loss = keras.losses.SparseCategoricalCrossentropy(from_logits=True,
                                                                 reduction=None)

    def replica_step(x, y):
        with tf.GradientTape() as tape:
            logits = model(x, training=True)
            loss = tf.nn.compute_average_loss(per_sample_loss(y, logits),
                                              global_batch_size=global_batch)
        gradients = tape.gradient(loss, model.trainable_variables)
        optimizer.apply_gradients(zip(gradients, model.trainable_variables))
        correct = tf.reduce_sum(tf.cast(tf.equal(tf.argmax(logits, axis=1), y), tf.float32))
        return loss, correct

    @tf.function
    def train_step(iterator):
        x, y = next(iterator)
        loss, correct = strategy.run(replica_step, args=(x, y))
        return (strategy.reduce(tf.distribute.ReduceOp.SUM, loss, axis=None),
                strategy.reduce(tf.distribute.ReduceOp.SUM, correct, axis=None))

    is_chief = strategy.extended.should_checkpoint
    print("training as %s: %d worker(s), global batch %d, %d steps per epoch"
          % ("chief" if is_chief else "worker", workers, global_batch, steps_per_epoch),
          flush=True)
    for epoch in range(args.epochs):
        loss_sum = correct_sum = 0.0
        for _ in range(steps_per_epoch):
            loss, correct = train_step(batches)
            loss_sum += float(loss)
            correct_sum += float(correct)
        loss, accuracy = loss_sum / steps_per_epoch, correct_sum / (steps_per_epoch
                                                                     * global_batch)
        print("epoch %d/%d loss %.4f accuracy %.4f" % (epoch + 1, args.epochs, loss, accuracy),
              flush=True)
        tfmesos.log_metrics(step=(epoch + 1) * steps_per_epoch, loss=loss, accuracy=accuracy)
    if is_chief:
        print("trained in %.1f s" % (time.perf_counter() - started), flush=True)
        predictions = np.argmax(model(x_test, training=False), axis=1)
        print("final accuracy: %.4f" % np.mean(predictions == y_test), flush=True)


if __name__ == "__main__":
    main()
