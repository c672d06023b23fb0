"""``tfrun --ship``: what a run sends to every task, and how each task gets it.

A ``Shipment`` is made when the run starts (``ClusterRun.start``): it packs
the user's directory (``bundle.pack``) and the task side of tfmesos
(``bundle.pack_task_side``), and serves both, with a local ``--python-env``
archive, from a ``BundleServer`` until the run stops. Each TaskInfo then
carries them as ``CommandInfo.uris`` (apache/mesos docs/fetcher.md): the
agent's fetcher puts them in the task's sandbox before the command starts,
for every launch, relaunch and restart alike:

* the bundle, ``extract: true``, not cached: extracted into the sandbox
  (``project/``, the task's working directory), the archive kept beside it
  for the task entry to check its sha256 (``task/bundle_check.py``);
* the task side, a zip, ``extract: false``: put on ``PYTHONPATH``, so an
  agent needs only a Python >= 3.9, not tfmesos at the submitter's paths;
* ``extra_files`` (``tfmesos.run``'s function), ``extract: false``, not
  cached: put in the sandbox as they are;
* ``--python-env``, ``cache: true``: the fetcher cache keeps it per agent
  (keyed by URI), extracted into the sandbox, whose ``bin/python3`` then
  runs the task.

Inside containers the sandbox is ``$MESOS_SANDBOX``; the command finds
everything there.
"""

import logging
import os
import shlex
import shutil
import tempfile

from ..protocol import task_env
from .bundle import TOP, WARN_SIZE, human_size, pack, pack_task_side
from .bundle_server import BundleServer

logger = logging.getLogger(__name__)

SANDBOX = '"${MESOS_SANDBOX:-$PWD}"'   # the sandbox, in the task's shell command
ENV_PYTHON = "bin/python3"             # the interpreter of a --python-env archive


class Shipment:
    """The packed files of one run and the server that hands them out.
    ``say(text)`` tells the user what was shipped; ``leave_out``:
    directories never packed (run directories)."""

    def __init__(self, spec, bind_host=None, say=None, leave_out=()):
        self.spec = spec
        say = say or logger.info
        self._work = tempfile.mkdtemp(prefix="tfmesos-ship-")
        self.server = None
        try:
            self.bundle = None
            if spec.directory is not None:
                self.bundle = pack(spec.directory, self._work, spec.exclude, spec.max_size,
                                   follow_links=spec.follow_links,
                                   allow_secrets=spec.allow_secrets, leave_out=leave_out)
                say(self.bundle.summary())
                if self.bundle.size > WARN_SIZE:
                    say("warning: the bundle is %s and every task downloads it: keep data out "
                        "of it (--ship-exclude, .gitignore) and read it from shared storage"
                        % human_size(self.bundle.size))
            self.task_side = pack_task_side(self._work)
            self.server = BundleServer(bind_host=bind_host)
            if self.bundle is not None:
                self.server.add(self.bundle.name, self.bundle.path)
            self.server.add(self.task_side.name, self.task_side.path)
            for name, path in spec.extra_files:
                self.server.add(name, path)
            self.env_name = None
            if spec.python_env is not None and "://" not in spec.python_env:
                self.env_name = os.path.basename(spec.python_env)
                self.server.add(self.env_name, spec.python_env)
        except BaseException:
            self.stop()
            raise

    def uris(self, host):
        """The TaskInfo's ``CommandInfo.uris``; ``host``: this machine's
        address as the agents reach it."""
        uris = []
        if self.bundle is not None:
            uris.append({"value": self.server.url(host, self.bundle.name), "extract": True,
                         "cache": False})
        uris.append({"value": self.server.url(host, self.task_side.name), "extract": False,
                     "cache": False})
        uris.extend({"value": self.server.url(host, name), "extract": False, "cache": False}
                    for name, _ in self.spec.extra_files)
        if self.spec.python_env is not None:
            value = self.server.url(host, self.env_name) if self.env_name \
                else self.spec.python_env
            uris.append({"value": value, "extract": True, "cache": True})
        return uris

    def environment(self):
        """The task environment's part: what the task entry checks."""
        if self.bundle is None:
            return {}
        return {task_env.BUNDLE: self.bundle.name, task_env.BUNDLE_SHA256: self.bundle.sha256,
                task_env.BUNDLE_DIR: TOP}

    def command(self, image=None, python=None):
        """The task entry's command line: the shipped task side first on
        ``PYTHONPATH``, run by ``python`` (a relative path is in the sandbox
        with ``--python-env``), else the environment's ``bin/python3``, else
        ``python3`` from the agent's (or image's) ``PATH``. The directory of
        the interpreter chosen, then the environment's ``bin/``, come first
        on ``PATH``: ``python`` and ``python3`` in the command are its."""
        first = []      # directories put first on PATH, the first first
        if image:
            interpreter = "python3"
        elif self.spec.python_env is not None:
            chosen = python or ENV_PYTHON
            interpreter = shlex.quote(chosen) if os.path.isabs(chosen) \
                else "%s/%s" % (SANDBOX, shlex.quote(chosen))
            first = [_directory(chosen), "%s/bin" % SANDBOX]
        elif python:
            interpreter = shlex.quote(python)
            first = [_directory(python)]
        else:
            interpreter = "python3"
        first = [d for i, d in enumerate(first) if d and d not in first[:i]]
        path = 'PATH=%s"${PATH:+:$PATH}" ' % ":".join(first) if first else ""
        # exec: Mesos' SIGTERM must reach the entry point itself, not a shell.
        return ('%sPYTHONPATH=%s/%s"${PYTHONPATH:+:$PYTHONPATH}" exec %s -m tfmesos.task'
                % (path, SANDBOX, shlex.quote(self.task_side.name), interpreter))

    def record(self):
        """run.json's ``shipped``."""
        what = {"bundle": self.bundle.record() if self.bundle else None,
                "task_side": self.task_side.name}
        if self.spec.python_env is not None:
            what["python_env"] = self.spec.python_env
        return what

    def stop(self):
        """Stop serving and remove the packed files (idempotent)."""
        if self.server is not None:
            self.server.stop()
        shutil.rmtree(self._work, ignore_errors=True)


def _directory(python):
    """The directory of ``python`` as the task's shell names it (a relative
    one is in the sandbox), or None for a name looked up on PATH."""
    directory = os.path.dirname(python)
    if not directory:
        return None
    return shlex.quote(directory) if os.path.isabs(directory) \
        else "%s/%s" % (SANDBOX, shlex.quote(directory))


__all__ = ["Shipment", "SANDBOX", "ENV_PYTHON"]
