"""The scheduler side of tfmesos, packed for ``tfrun --detach``: the run's
scheduler (tfrun itself) runs as a Mesos task on an agent that has a Python
>= 3.9 and nothing else of ours, sharing no files with the submitter.

``pack_scheduler_side`` makes one zip (``compiled_zip``)
that the agent's fetcher puts in that task's sandbox as it is, not
extracted; every member is under ``SCHEDULER_DIR``, and ``scheduler_command``
puts ``<the zip>/SCHEDULER_DIR`` first on ``PYTHONPATH``: Python imports it
from the zip (``zipimport``). Extracting its ~500 files took 0.13-0.4 s of
every scheduler task's start (the fetcher's; ``unzip`` alone 0.13 s here),
on the path of a detached run's first step and of ``tfmesos attach``; the
file imported is the very one whose sha256 the task's command checked.

* ``tfmesos`` and ``mesos_local``, whole (their ``.py`` files: neither reads
  a data file of its own at run time), but for what the embedded master's
  protobuf encoding needs (``google.protobuf``, which a scheduler never uses);
* ``addict`` (decoded Mesos messages), pure Python, no dependencies;
* ``kazoo`` (``zk://`` masters) when it is installed: pure Python, standard
  library only once its ``tests``/``testing`` packages (pytest, pyjks) and
  its gevent and eventlet handlers (never chosen by tfmesos) are left out;
  SASL (``puresasl``) is optional in kazoo and is not shipped.

Each module comes with its bytecode for the Python packing it
(``compiled_zip``: ``NAME.pyc`` beside ``NAME.py``): an agent with that
Python imports it as compiled instead of compiling ~2 MB of source at every
scheduler start (0.25-0.4 s of a detached run's start and of each
``attach``); another Python compiles. The zip is kept in the user's cache
(``$XDG_CACHE_HOME/tfmesos/scheduler-side``) under the hash of what went
in, and a submit of the same code copies it from there.

Not shipped, as an agent may lack them anyway: ``cloudpickle`` (only
``tfmesos.run``'s submitter pickles; its function payload carries its own),
``docker``/``requests`` (the embedded master's Docker), ``mlflow``,
``tensorflow``, ``keras``. Everything else is the standard library
(tests/test_scheduler_side.py runs the unzipped tree with ``python3 -S``).
"""

import importlib.util
import os
import posixpath
import shlex
import sys

from .bundle import Bundle
from .compiled_zip import pack_compiled
from .contents import ShipError
from .shipping import SANDBOX, interpreter_and_path

SCHEDULER_DIR = "tfmesos-scheduler"   # the zip's one top directory, in the sandbox
PREFIX = "tfmesos-scheduler"          # the zip's name: PREFIX-<sha256[:16]>.zip
DETACHED_SPEC = "detached.json"       # what the detached scheduler reads, in the sandbox
# (package, required, paths in it left out: a directory or a module, "/"-separated)
PACKAGES = (
    ("tfmesos", True, ()),
    # proto_parser: the embedded master's protobuf encoding (google.protobuf,
    # which an agent may lack); a scheduler never serves it
    ("mesos_local", True, ("api/proto_parser.py",)),
    ("addict", True, ()),
    ("kazoo", False, ("tests", "testing", "handlers/gevent.py", "handlers/eventlet.py")),
)
CACHE_KIND = "scheduler-side"   # its cache: $XDG_CACHE_HOME/tfmesos/scheduler-side
# The tfmesos running this: the one shipped, wherever else one is installed.
_OWN_PACKAGE = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))


def package_directory(name):
    """The directory of the installed package ``name`` (found, not imported),
    or None when it is not installed or is not a plain directory package."""
    try:
        spec = importlib.util.find_spec(name)
    except (ImportError, ValueError):
        return None
    locations = list(spec.submodule_search_locations or ()) if spec is not None else []
    if len(locations) != 1 or not os.path.isfile(os.path.join(locations[0], "__init__.py")):
        return None
    return os.path.abspath(locations[0])


def packages():
    """``[(package, its directory, paths left out)]`` that the scheduler side
    ships; ShipError naming a required one that is not installed."""
    found = []
    for name, required, left_out in PACKAGES:
        directory = _OWN_PACKAGE if name == "tfmesos" else package_directory(name)
        if directory is None:
            if required:
                raise ShipError("tfrun --detach: cannot ship the scheduler: the package %r "
                                "is not installed here as a directory" % name)
            continue
        found.append((name, directory, left_out))
    return found


def _members(name, directory, left_out):
    """``[(zip member, bytes)]`` of the ``.py`` files of package ``name``."""
    members = []
    for root, dirs, files in os.walk(directory):
        relative = os.path.relpath(root, directory).replace(os.sep, "/")
        relative = "" if relative == "." else relative
        dirs[:] = sorted(d for d in dirs if d != "__pycache__"
                         and posixpath.join(relative, d) not in left_out)
        for file_name in sorted(files):
            path = posixpath.join(relative, file_name)
            if file_name.endswith(".py") and path not in left_out:
                with open(os.path.join(root, file_name), "rb") as handle:
                    members.append(("%s/%s/%s" % (SCHEDULER_DIR, name, path), handle.read()))
    return members


def pack_scheduler_side(out_dir):
    """The scheduler side as ``PREFIX-<sha256[:16]>.zip`` in ``out_dir``: a
    ``Bundle`` (``files``: modules, ``size``: their bytes, ``source``: the
    directory of ``tfmesos``). The same installed code gives the same sha256
    (the zip is built once per code and Python, then taken from the cache)."""
    sources = []
    shipped = packages()
    for name, directory, left_out in shipped:
        sources.extend(_members(name, directory, left_out))
    sources.sort()
    path, zip_name, sha = pack_compiled(sources, out_dir, PREFIX, CACHE_KIND)
    return Bundle(path, zip_name, sha, len(sources), sum(len(data) for _, data in sources),
                  shipped[0][1])


def scheduler_command(side, python=None, image=None, python_env=False, site=False):
    """The detached scheduler task's shell command: the scheduler side's
    zip in the sandbox (its file name ``side``) first on ``PYTHONPATH``,
    imported from there, then ``python -m
    tfmesos.cli.detached_scheduler`` on the sandbox's ``DETACHED_SPEC``, run
    by the interpreter ``Shipment.command`` would choose (``python``; else, with ``python_env``, the extracted
    environment's ``bin/python3``: its archive must then be fetched with
    ``extract: true``, which keeps the archive too; else ``python3``; with
    an ``image``, its ``python3``). An interpreter tfmesos chose starts
    without ``site`` (``-S``) unless ``site`` (a zk:// master: kazoo's own
    optional imports, puresasl for SASL, may come from the agent's
    packages): the zip holds every package the scheduler imports otherwise
    (``PACKAGES``; --detach refuses --mlflow, the one other), and site's
    .pth files cost the scheduler's start tens of ms on hosts that have
    many (here about 5 ms: the scheduler imports most of what this host's
    two .pth files do anyway). ``python``, the user's ``--python``, may be a
    wrapper that takes no flags; this interpreter (``sys.executable``, the
    default where the agents are this machine's: ``cli.tfrun_python``) is
    none."""
    interpreter, path = interpreter_and_path(image, python, python_env)
    a_users = python and not image and python != sys.executable
    flags = "" if site or a_users else "-S "
    # exec: Mesos' SIGTERM must reach tfrun itself, not a shell.
    return ('%sPYTHONPATH=%s/%s"${PYTHONPATH:+:$PYTHONPATH}" exec %s %s-m '
            'tfmesos.cli.detached_scheduler %s/%s'
            % (path, SANDBOX, shlex.quote(posixpath.join(side, SCHEDULER_DIR)), interpreter,
               flags, SANDBOX, shlex.quote(DETACHED_SPEC)))


__all__ = ["SCHEDULER_DIR", "DETACHED_SPEC", "PACKAGES", "CACHE_KIND", "pack_scheduler_side",
           "scheduler_command", "packages", "package_directory"]
