"""A data-parallel JAX training step across tfrun's workers, one JAX
process each, with a cross-process ``psum``, on scikit-learn's bundled
digits (8x8 images, 10 classes).

    tfrun --jax -w 2 -- python examples/jax_multiprocess.py

``tfrun --jax`` makes ``jax.distributed.initialize()`` work with no
arguments in every worker: it sets ``JAX_COORDINATOR_ADDRESS`` (worker 0's
host, at a port Mesos reserved in its offer), which JAX reads, and the
process count and id as Open MPI's ``mpirun`` would, which JAX detects
(README, "PyTorch and JAX"). JAX then sees the devices of every process
as one set; on CPUs its cross-process collectives go over gloo (JAX's
default ``jax_cpu_collectives_implementation``).

First every process adds its own number (process index + 1) to a ``psum``
over all devices of all processes and prints ``psum: S of N processes``
(S = N (N + 1) / 2 with one device a process). Then a two-layer network
trains with plain SGD: each step's global batch (``--batch-size`` samples
a process, drawn alike in every process) is split across the devices, each
computes the gradients of its share, and a ``psum`` averages them, so
every process holds the same weights after each step. Prints ``epoch N/M
loss L`` (the mean loss of the epoch's global batches: the same in every
process) and ``final loss: L`` (on the whole training set), and in process
0 ``final accuracy: X`` on the test split. Without tfrun it trains alone.
A process that fails prints its traceback and ends at once (``os._exit``):
JAX's exit function would wait in ``jax.distributed.shutdown()``'s barrier
for the other processes (up to ``shutdown_timeout_seconds``, 300 s).
Needs JAX: ``pip install ".[jax,examples]"``.
"""

import argparse
import os
import sys
import time
import traceback

import jax

if os.environ.get("JAX_COORDINATOR_ADDRESS"):
    jax.distributed.initialize()   # before any computation: tfrun --jax's variables

import jax.numpy as jnp
import numpy as np
from digits import SEED, load_data
from jax.experimental import multihost_utils
from jax.sharding import Mesh
from jax.sharding import PartitionSpec as P

AXIS = "data"


def global_array(local, mesh, spec):
    """This process's ``local`` part of an array laid out by ``spec`` over ``mesh``."""
    return multihost_utils.host_local_array_to_global_array(local, mesh, spec)


def local_value(array):
    """A replicated array's value, as NumPy (from this process's first device)."""
    return np.asarray(array.addressable_data(0))


def psum_check(mesh):
    """Every process adds its index + 1 (on each of its devices): the sum over all."""
    mine = np.full((jax.local_device_count(),), jax.process_index() + 1.0, np.float32)
    total = jax.jit(jax.shard_map(lambda part: jax.lax.psum(part, AXIS), mesh=mesh,
                                  in_specs=P(AXIS), out_specs=P()))(
        global_array(mine, mesh, P(AXIS)))
    return float(local_value(total)[0])


def init_params():
    first, second = jax.random.split(jax.random.PRNGKey(SEED))
    return {"w1": jax.random.normal(first, (64, 64)) * 0.1, "b1": jnp.zeros(64),
            "w2": jax.random.normal(second, (64, 10)) * 0.1, "b2": jnp.zeros(10)}


def loss_fn(params, x, y):
    hidden = jax.nn.relu(x @ params["w1"] + params["b1"])
    logits = hidden @ params["w2"] + params["b2"]
    return -jnp.mean(jnp.take_along_axis(jax.nn.log_softmax(logits), y[:, None], axis=1))


def make_epoch(mesh, learning_rate):
    """One epoch's steps, compiled once: ``(params, xs, ys) -> (params,
    losses)``, ``xs``/``ys`` holding every step's global batch (steps first)
    split across the devices."""
    devices = mesh.size

    def step(params, batch):
        x, y = batch
        loss, grads = jax.value_and_grad(loss_fn)(params, x, y)   # this device's share
        grads = jax.tree.map(lambda g: jax.lax.psum(g, AXIS) / devices, grads)
        params = jax.tree.map(lambda p, g: p - learning_rate * g, params, grads)
        return params, jax.lax.psum(loss, AXIS) / devices

    def epoch(params, xs, ys):
        return jax.lax.scan(step, params, (xs, ys))

    return jax.jit(jax.shard_map(epoch, mesh=mesh, in_specs=(P(), P(None, AXIS), P(None, AXIS)),
                                 out_specs=(P(), P())))


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--epochs", type=int, default=10)
    parser.add_argument("--batch-size", type=int, default=32, help="per process (default 32)")
    parser.add_argument("--learning-rate", type=float, default=0.5)
    args = parser.parse_args(argv)

    started = time.perf_counter()
    process, processes = jax.process_index(), jax.process_count()
    mesh = Mesh(np.array(jax.devices()), (AXIS,))
    print("psum: %g of %d processes" % (psum_check(mesh), processes), flush=True)
    if args.batch_size % jax.local_device_count():
        parser.error("--batch-size must be a multiple of this process's %d devices"
                     % jax.local_device_count())

    (x_train, y_train), (x_test, y_test) = load_data()
    batch = args.batch_size * processes
    steps = len(x_train) // batch
    print("training as process %d of %d: %d devices, global batch %d, %d steps per epoch"
          % (process, processes, mesh.size, batch, steps), flush=True)
    train = make_epoch(mesh, args.learning_rate)
    params = global_array(init_params(), mesh, P())
    for epoch in range(args.epochs):
        order = np.random.RandomState(SEED + epoch).permutation(len(x_train))
        # [step, this process's share of the step's global batch]
        own = order[:steps * batch].reshape(steps, processes, args.batch_size)[:, process]
        xs = global_array(x_train[own], mesh, P(None, AXIS))
        ys = global_array(y_train[own].astype(np.int32), mesh, P(None, AXIS))
        params, losses = train(params, xs, ys)
        print("epoch %d/%d loss %.6f" % (epoch + 1, args.epochs, local_value(losses).mean()),
              flush=True)

    weights = {name: jnp.asarray(local_value(value)) for name, value in params.items()}
    print("final loss: %.6f" % float(loss_fn(weights, x_train, y_train.astype(np.int32))),
          flush=True)
    if process == 0:
        hidden = jax.nn.relu(x_test @ weights["w1"] + weights["b1"])
        predicted = np.argmax(np.asarray(hidden @ weights["w2"] + weights["b2"]), axis=1)
        print("trained in %.1f s" % (time.perf_counter() - started), flush=True)
        print("final accuracy: %.4f" % (predicted == y_test).mean(), flush=True)
    if processes > 1:
        jax.distributed.shutdown()


if __name__ == "__main__":
    try:
        main()
    except Exception:
        # End now: at a normal exit JAX's exit function would wait at the
        # shutdown barrier for the other processes (up to 300 s)
        traceback.print_exc()
        sys.stdout.flush()
        sys.stderr.flush()
        os._exit(1)
