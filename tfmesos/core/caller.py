"""What a run made from Python is called (pure): ``cluster()`` and
``tfmesos.run()`` runs are named after the script that made them, as
``tfrun`` names its runs after the script its command runs
(``cli/run_name``), so that ``tfmesos runs``, the run directories, the
report and the Mesos framework tell them apart; their ``command`` (in
run.json and the master's labels) says what the script called:
``tfmesos.run(train_fn)``, ``tfmesos.cluster(worker:2,ps:1)``.
"""

import os
import re
import sys
import types
from collections.abc import Iterable, Mapping, Sequence
from typing import Optional

from .inputs import MAX_NAME

NOTEBOOK = "notebook"
_CONTROL = re.compile(r"[\x00-\x1f\x7f]+")


def _fit(text: str) -> str:
    """``text`` as a run's name takes it: no control character, at most MAX_NAME."""
    return _CONTROL.sub(" ", text).strip()[:MAX_NAME] or "python"


def script_name(modules: Optional[Mapping[str, types.ModuleType]] = None,
                argv: Optional[Sequence[str]] = None) -> str:
    """The name of the program this process runs: its script's basename
    (``train.py``), the module of ``python -m pkg.mod`` (``pkg.mod``),
    ``python -c`` for inline code, ``notebook`` in a Jupyter kernel,
    ``python`` at the interactive prompt (``modules``, ``argv``: this
    process's ``sys.modules`` and ``sys.argv`` by default)."""
    modules = sys.modules if modules is None else modules
    argv = sys.argv if argv is None else argv
    if "ipykernel" in modules:
        return NOTEBOOK
    main = modules.get("__main__")
    spec = getattr(main, "__spec__", None)
    module = getattr(spec, "name", None)
    if isinstance(module, str) and module and module != "__main__":
        # python -m pkg runs pkg.__main__: named pkg, as tfrun names it
        return _fit(module[:-len(".__main__")] if module.endswith(".__main__") else module)
    path = getattr(main, "__file__", None)
    if isinstance(path, str) and path:
        return _fit(os.path.basename(path))
    first = argv[0] if argv else ""
    if first in ("-c", "-"):
        return "python %s" % first
    return "IPython" if "IPython" in modules else "python"


def callable_name(fn: object) -> str:
    """``fn``'s qualified name (``train``, ``Trainer.fit``,
    ``main.<locals>.step``); a callable object's class's, a
    ``functools.partial``'s function's."""
    inner = getattr(fn, "func", None)     # functools.partial
    if inner is not None and callable(inner) and not hasattr(fn, "__qualname__"):
        return callable_name(inner)
    name = getattr(fn, "__qualname__", None)
    if not isinstance(name, str) or not name:
        name = type(fn).__qualname__
    return _fit(name)


def run_command(fn: object) -> str:
    """run.json's ``command`` of ``tfmesos.run(fn, ...)``."""
    return "tfmesos.run(%s)" % callable_name(fn)


def cluster_command(jobs: Iterable[object]) -> str:
    """run.json's ``command`` of ``cluster(jobs)``: ``tfmesos.cluster(worker:2,ps:1)``."""
    return "tfmesos.cluster(%s)" % ",".join("%s:%s" % (getattr(job, "name", "?"),
                                                        getattr(job, "num", "?"))
                                            for job in jobs)


__all__ = ["NOTEBOOK", "script_name", "callable_name", "run_command", "cluster_command"]
