"""``python -m tfmesos.task.function_runner``: the command of every task of
``tfmesos.run``. It loads the function and its arguments from the payload
the run shipped into the sandbox (``TFMESOS_FUNCTION``, its sha256 checked by
the task's command before anything ran, ``ship/fetch_check.py``;
``ship/function_payload.py`` made it), calls ``fn(*args)`` with the task's
``TF_CONFIG`` and ``TFMESOS_*`` variables set (and for ``framework="torch"``
or ``"jax"`` in its distributed environment: ``process_group``; an ``async
def`` fn's coroutine run by ``asyncio.run``), and writes
the outcome to ``TFMESOS_RESULT_FILE`` (``result_file``), which the task entry sends to the
scheduler: every task's return value, or the exception and its traceback
(a failure's before this process exits: ``outcome_channel``).
Exit status 0 when ``fn`` returned, 1 when it raised, or when the value of
the task that returns the call's ``.value`` (the chief, else worker 0)
cannot come back (not picklable, over its bound); another task's that
cannot is said in its outcome instead (status "ok", no value), exit 0:
the caller's ``.missing`` names it.

The payload's cloudpickle comes first on the path: the agents need none,
and the pickle loads with the version that made it.
"""

import atexit
import json
import os
import sys
import traceback
import types
import zipfile

from ..protocol import task_env
from .outcome_channel import RunnerEnd
from .process_group import GroupError, framework_group
from .result_file import (
    MAX_ERROR,
    MAX_OTHER_RESULTS,
    OutcomeNotWritten,
    clip_traceback,
    other_limit,
    result_limit,
    write_outcome,
)

FUNCTION_MEMBER = "function.pkl"
META_MEMBER = "meta.json"


class LoadError(Exception):
    """The payload is missing, altered or from another Python."""


def returns_value(environ):
    """Whether this task's return value is the call's ``.value``, which must
    come back: the chief's when the run has one, else worker 0's."""
    job = environ.get(task_env.JOB_NAME)
    if environ.get(task_env.CHIEF_HOSTS):
        return job == "chief"
    return job == "worker" and environ.get(task_env.TASK_INDEX) == "0"


def load(environ):
    """``(fn, args)`` from the shipped payload."""
    name = environ.get(task_env.FUNCTION, "")
    sandbox = environ.get("MESOS_SANDBOX") or os.getcwd()
    path = os.path.join(sandbox, name)
    try:
        with zipfile.ZipFile(path) as archive:
            meta = json.loads(archive.read(META_MEMBER))
            pickled = archive.read(FUNCTION_MEMBER)
    except OSError as exc:
        raise LoadError("the function's payload %s is not in the sandbox %s (%s): the agent's "
                        "fetcher did not put it there" % (name, sandbox, exc.strerror or exc)) \
            from None
    made_by, here = tuple(meta.get("python") or ()), tuple(sys.version_info[:2])
    if made_by != here:
        raise LoadError("the function was pickled by Python %s and this task runs Python %s "
                        "(%s): cloudpickle needs the same version on both sides; give "
                        "tfmesos.run a python= or python_env= of Python %s"
                        % (".".join(map(str, made_by)), ".".join(map(str, here)),
                           sys.executable, ".".join(map(str, made_by))))
    sys.path.insert(0, path)   # its cloudpickle first
    import pickle
    fn, args = pickle.loads(pickled)
    return fn, args


def _error(out, exc, tb, limit, what="raised "):
    """Write (and print) ``exc`` with its traceback ``tb``, ``what`` saying
    what happened before its ``Type: message`` ("raised ", "cannot ...: "); 1."""
    text = "".join(traceback.format_exception(type(exc), exc, tb))
    sys.stderr.write(text)
    sys.stderr.flush()
    line = "".join(traceback.format_exception_only(type(exc), exc)).strip()
    data = b""
    try:
        import pickle

        import cloudpickle
        data = cloudpickle.dumps(exc)
        pickle.loads(data)          # an exception that does not load again goes as text
        if len(data) > limit:
            data = b""
    except Exception:
        data = b""
    write_outcome(out, {"status": "error", "error": (what + line)[:MAX_ERROR],
                        "traceback": clip_traceback(text)}, data)
    return 1


# asyncio's folder, in the standard library's (asyncio and inspect are
# imported only by an ``async def`` fn's task: 27 ms against 7 ms for
# this runner's imports).
_ASYNCIO = os.path.join(os.path.dirname(os.__file__), "asyncio") + os.sep


def _from_fn(tb):
    """``tb`` from ``fn``'s own frame on: without this runner's frame and,
    for an ``async def`` fn, asyncio's that ran it."""
    while tb is not None and (tb.tb_frame.f_code is _run.__code__
                              or tb.tb_frame.f_code.co_filename.startswith(_ASYNCIO)):
        tb = tb.tb_next
    return tb


def main(environ=None):
    environ = os.environ if environ is None else environ
    entry = RunnerEnd.take(environ)   # before fn, which may close descriptors
    try:
        code = _run(environ, entry)
    except OutcomeNotWritten as exc:   # fn's own traceback was printed first
        print(exc, file=sys.stderr, flush=True)
        leave(1)
    if code:
        # A failure's outcome goes before this process exits: here for those
        # _run returns (fn's own exception announces and leaves within it).
        entry.announce()
    return code


def _run(environ, entry):
    out = environ.get(task_env.RESULT_FILE)
    if not out:
        print("tfmesos: %s not set: this runner is started by tfmesos.run's tasks"
              % task_env.RESULT_FILE, file=sys.stderr)
        return 2
    limit = result_limit(environ)
    try:
        fn, args = load(environ)
    except Exception as exc:
        return _error(out, exc, exc.__traceback__, limit, "cannot load the function: ")
    try:
        with framework_group(environ):
            try:
                value = fn(*args)
                if isinstance(value, types.CoroutineType):   # ``async def`` fn: a loop of its own
                    import asyncio
                    value = asyncio.run(value)
            except BaseException as exc:   # SystemExit too: fn did not return
                # Written, sent to the scheduler, and the task gone, before
                # the group's teardown or anything else closes the peers'
                # connections: their errors ("closed by peer") would reach
                # tfmesos before this, the cause.
                code = _error(out, exc, _from_fn(exc.__traceback__), limit)
                entry.announce()
                without_jax_shutdown()
                leave(code)
    except GroupError as exc:   # before fn: the framework's own error
        cause = exc.__cause__ or exc
        return _error(out, cause, cause.__traceback__, limit, "%s: " % exc)
    returning = returns_value(environ)
    bound = limit if returning else other_limit(environ)
    try:
        import cloudpickle
        data = cloudpickle.dumps(value)
    except Exception as exc:
        if returning:
            return _error(out, exc, exc.__traceback__, limit,
                          "returned a value that cannot be pickled: ")
        line = "".join(traceback.format_exception_only(type(exc), exc)).strip()
        return _dropped(out, "returned a value that cannot be pickled: %s" % line)
    if len(data) > bound:
        text = ("returned a value that pickles to %s, over the %s bound of tfmesos.run's "
                "results%s: return less, and write large results to shared storage"
                % (mib(len(data)), mib(bound), "" if returning else
                   " for each task but the chief (else worker 0), which share %s"
                   % mib(MAX_OTHER_RESULTS)))
        if not returning:
            return _dropped(out, text)
        print("tfmesos: %s" % text, file=sys.stderr, flush=True)
        write_outcome(out, {"status": "error", "error": text})
        return 1
    write_outcome(out, {"status": "ok"}, data)
    return 0


def _dropped(out, text):
    """The value of a task whose value is not ``.value`` cannot come back:
    said (the caller's ``.missing``), not a failure; 0."""
    print("tfmesos: its value does not come back: %s" % text, file=sys.stderr, flush=True)
    write_outcome(out, {"status": "ok", "error": text[:MAX_ERROR]})
    return 0


def mib(size):
    return "%.1f MiB" % (size / float(1 << 20))


def without_jax_shutdown():
    """Take JAX's exit function (``jax._src.api.clean_up``) off ``atexit``
    for a task whose ``fn`` raised, when JAX is imported: it runs
    ``jax.distributed.shutdown()``, which waits at the group's shutdown
    barrier for every other process (``shutdown_timeout_seconds``, 300 s by
    default), and the failed task would run on, its error unseen, until
    its peers end too."""
    api = sys.modules.get("jax._src.api")
    clean_up = getattr(api, "clean_up", None)
    if clean_up is not None:
        atexit.unregister(clean_up)


def leave(code):
    """End the runner with ``code`` once the outcome is written, waiting for
    nothing ``fn`` left running: the interpreter's shutdown would join its
    non-daemon threads and multiprocessing children, and hold the run as
    long as they run. ``atexit`` handlers still run, but without
    multiprocessing's join; the guard kills what is left in the task's
    process group."""
    process = sys.modules.get("multiprocessing.process")
    children = getattr(process, "_children", None)
    if isinstance(children, set):
        children.clear()
    try:
        atexit._run_exitfuncs()
    finally:
        for stream in (sys.stdout, sys.stderr):
            try:
                stream.flush()
            except Exception:
                pass
        os._exit(code)


if __name__ == "__main__":
    leave(main())
