"""``tfmesos.run(fn, framework=...)``: the framework's distributed
environment around ``fn`` in each task (``function_runner``), from what
the task was told (``core/training_frameworks.py``: tfrun ``--torch``'s and
``--jax``'s variables):

* "torch": ``torch.distributed.init_process_group(init_method="env://")``
  before ``fn`` (it reads ``MASTER_ADDR``, ``MASTER_PORT``, ``RANK``,
  ``WORLD_SIZE``: torch/distributed/rendezvous.py ``_env_rendezvous_handler``),
  backend "nccl" where the task has GPUs (``TFMESOS_GPUS``) and CUDA is
  available (its device ``LOCAL_RANK``), else "gloo";
  ``destroy_process_group()`` after (unless ``fn`` destroyed it itself).
* "jax": ``jax.distributed.initialize()`` before (no arguments: it reads
  ``JAX_COORDINATOR_ADDRESS`` and the process count and id,
  jax/_src/distributed.py), ``jax.distributed.shutdown()`` after.

A task whose ``fn`` raised leaves without the teardown, once its outcome is
written (``function_runner``): the teardown would break its peers'
connections, and their errors reach tfmesos before the cause. Under JAX
that includes JAX's own exit function (``jax._src.api.clean_up``, taken
off ``atexit``: ``function_runner.without_jax_shutdown``), whose
``jax.distributed.shutdown()`` would wait at the shutdown barrier for the
peers (up to ``shutdown_timeout_seconds``, 300 s).
* "tensorflow" (or unset): nothing; ``fn`` reads ``TF_CONFIG`` itself.

Neither package is imported unless its run asks for it."""

import contextlib
import os
import sys

from ..protocol import task_env

TENSORFLOW, TORCH, JAX = "tensorflow", "torch", "jax"   # training_frameworks.FRAMEWORKS


class GroupError(Exception):
    """The framework's distributed environment could not be set up."""


def torch_backend(torch, environ):
    """"nccl" for a task with GPUs (``TFMESOS_GPUS``) where CUDA is
    available, else "gloo" (NCCL needs GPUs: ProcessGroupNCCL refuses a
    process without any)."""
    try:
        gpus = int(environ.get(task_env.GPUS) or 0)
    except ValueError:
        gpus = 0
    return "nccl" if gpus > 0 and torch.cuda.is_available() else "gloo"


def torch_setup(environ):
    import torch
    import torch.distributed as dist
    backend = torch_backend(torch, environ)
    if backend == "nccl":   # one GPU a process: its LOCAL_RANK's of the task's own
        torch.cuda.set_device(int(environ.get("LOCAL_RANK") or 0))
    dist.init_process_group(backend, init_method="env://")


def torch_teardown():
    import torch.distributed as dist
    if dist.is_initialized():   # fn may have destroyed it itself
        dist.destroy_process_group()


def jax_setup(environ):
    import jax
    jax.distributed.initialize()


def jax_teardown():
    import jax
    jax.distributed.shutdown()


GROUPS = {TORCH: (torch_setup, torch_teardown), JAX: (jax_setup, jax_teardown)}


@contextlib.contextmanager
def framework_group(environ=None):
    """The distributed environment of the run's framework
    (``TFMESOS_FRAMEWORK``) around the block; ``GroupError`` (its
    ``__cause__`` the framework's exception) when it cannot be set up. The teardown
    runs however the block ends; its own error is printed, not raised:
    the block's value or exception is the task's outcome."""
    environ = os.environ if environ is None else environ
    framework = environ.get(task_env.FRAMEWORK) or TENSORFLOW
    if framework == TENSORFLOW:
        yield
        return
    if framework not in GROUPS:
        raise GroupError("cannot set up the distributed environment") from ValueError(
            "unknown framework %r (%s): use tensorflow, torch or jax"
            % (framework, task_env.FRAMEWORK))
    setup, teardown = GROUPS[framework]
    try:
        setup(environ)
    except Exception as exc:
        raise GroupError("cannot set up %s's distributed environment" % framework) from exc
    try:
        yield
    finally:
        try:
            teardown()
        except Exception as exc:
            print("tfmesos: tearing down %s's distributed environment failed: %s: %s"
                  % (framework, type(exc).__name__, exc), file=sys.stderr, flush=True)
