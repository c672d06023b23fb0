"""``tfmesos.run``'s function, packed for the tasks: one zip, served with
the run's other shipped files and fetched into every task's sandbox
(``ShipSpec.extra_files``), holding

* ``function.pkl``: ``cloudpickle.dumps((fn, args))``: functions of
  ``__main__`` (a script, a notebook) by value, those of importable modules
  by reference (the shipped project, or the agents' packages);
* ``meta.json``: the Python (major, minor) that pickled it (code objects
  pickled by value load only in the same version) and cloudpickle's version;
* ``cloudpickle/``: the submitter's cloudpickle, which the runner
  (``task/function_runner.py``) puts first on its path, so that the agents
  need none and the pickles load with the version that made them.

Reproducible as the bundles are: the same function and arguments give the
same sha256, which names the file and which the runner checks.
"""

import dataclasses
import json
import os
import sys

from ..exceptions import SpecError
from ..task.function_runner import FUNCTION_MEMBER, META_MEMBER  # the runner reads them
from .bundle import human_size
from .reproducible_zip import write_zip


@dataclasses.dataclass(frozen=True)
class Payload:
    """The packed function: ``path`` here, ``name`` to serve it under, ``sha256``."""

    path: str
    name: str
    sha256: str
    size: int


def pack_function(fn, args, out_dir, max_size=None, python_version=None):
    """Pickle ``fn`` and ``args`` into a zip in ``out_dir``; the ``Payload``.
    SpecError when they cannot be pickled, or pickle to more than
    ``max_size`` bytes. ``python_version``: what ``meta.json`` says (tests)."""
    import cloudpickle

    try:
        pickled = cloudpickle.dumps((fn, tuple(args)))
    except Exception as exc:
        raise SpecError("tfmesos.run cannot pickle the function %s or its arguments with "
                        "cloudpickle: %s: %s" % (_name_of(fn), type(exc).__name__, exc)) \
            from exc
    if max_size is not None and len(pickled) > max_size:
        raise SpecError.about("the function %s and its arguments pickle to %s, over the %s the "
                              "run ships ({ship.max_size}): pass paths to data on shared "
                              "storage instead of the data", _name_of(fn),
                              human_size(len(pickled)), human_size(max_size))
    meta = {"python": list(python_version or sys.version_info[:2]),
            "cloudpickle": getattr(cloudpickle, "__version__", "")}
    members = [(META_MEMBER, json.dumps(meta, sort_keys=True).encode()),
               (FUNCTION_MEMBER, pickled)]
    package = os.path.dirname(os.path.abspath(cloudpickle.__file__))
    for name in sorted(os.listdir(package)):
        if name.endswith(".py"):
            with open(os.path.join(package, name), "rb") as handle:
                members.append(("cloudpickle/" + name, handle.read()))
    path, name, sha, size = write_zip(members, out_dir, "tfmesos-function")
    return Payload(path, name, sha, size)


def _name_of(fn):
    return getattr(fn, "__qualname__", None) or getattr(fn, "__name__", None) or repr(fn)


__all__ = ["Payload", "pack_function", "FUNCTION_MEMBER", "META_MEMBER"]
