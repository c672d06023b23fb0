"""``tfrun --python``'s default: which interpreter runs the plain tasks of a
run when none is given.

* Not shipped (no ``--ship``): the one running tfrun (``core.taskinfo``),
  with tfrun's ``sys.path``: the tasks share this machine's, or a shared,
  installation.
* Shipped (``--ship``, ``--detach``) to a master whose agents run on this
  machine, for this user (the embedded master; a ``tfmesos local-master``
  of this user, or root, on this host whose agents are on this host too:
  ``backends.local_agents``): the one running tfrun as well, so ``python``
  in the command is the interpreter tfrun runs with, its packages
  (TensorFlow) included, for the job's tasks and a detached run's scheduler
  task alike; what is shipped still comes first on their PYTHONPATH.
* Shipped anywhere else: ``python3`` from the agents' ``PATH``: a path of
  this machine means nothing on other hosts.

An image (``-I``) runs its own ``python3``; ``--python-env`` its archive's;
tasks of another user (``-u``) ``python3``, which that user can run.
"""

import os
import sys

from ..core import config


def default_python(args, master, image, ship):
    """``--python``, else the interpreter the run's plain tasks get by
    default when it ships (see the module), or None: ``python3`` on the
    agents when ``ship``, this interpreter otherwise (``core.taskinfo``).
    ``master``: the resolved ``--master``; ``ship``: the ``ShipSpec`` or None."""
    if args.python or image or ship is None or ship.python_env is not None:
        return args.python
    from ..core.taskinfo import another_user
    if another_user(args.user):
        return None
    if master == config.LOCAL:
        return sys.executable
    from ..backends.local_agents import agents_here
    here = agents_here(master, os.environ, verify=not args.no_verify, ca_bundle=args.ca_bundle,
                       scheme=args.master_scheme or "http")
    return sys.executable if here else None


__all__ = ["default_python"]
