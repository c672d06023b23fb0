"""The command line: ``tfrun`` (``tfrun``), ``tfmesos`` (``main``: ``runs``,
``show``, ``logs``, ``report`` in ``runs``; ``local-master``; ``docker`` in
``docker_wrapper``), the status line while a run forms (``progress``) and
``tfrun --tensorboard`` (``tensorboard``), a run's default name
(``run_name``). A thin boundary: one-line errors, exit codes, no
abbreviated options (``common``). The console scripts are ``tfrun_script``
and ``tfmesos_script`` here: they import and run the command inside one
``try``, so a Ctrl-C it does not handle, even one while its modules load,
ends it in one line."""

import importlib
import os
import sys


def _script(module: str, function: str, name: str) -> object:
    """The console script ``name``: ``module.function()``, where a Ctrl-C
    that the command does not handle itself, above all one while its modules
    load (its first tens of ms), ends it with one line and 130, not a
    traceback."""
    try:
        return getattr(importlib.import_module(module, __name__), function)()
    except KeyboardInterrupt:
        sys.stderr.write("%s: interrupted\n" % name)
        sys.stderr.flush()
        os._exit(130)


def tfrun_script() -> object:
    """The ``tfrun`` script (``tfrun.run``); SIGTERM and SIGHUP (a terminal
    gone) end it as a Ctrl-C does from its first line on, its modules'
    loading included (``core.signals``, which tfrun imports anyway): one
    line and 130, not a silent death by the signal. ``tfrun.run`` puts its
    own in place over these, and ``execute`` its own over those."""
    from ..core.signals import interrupt_on_signals
    with interrupt_on_signals():
        return _script(".tfrun", "run", "tfrun")


def tfmesos_script() -> object:
    """The ``tfmesos`` script (``main.main``)."""
    return _script(".main", "main", "tfmesos")
