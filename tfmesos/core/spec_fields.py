"""RunSpec's fields as given to their normal form, each checked on the way
(``spec.RunSpec.__post_init__``): environment pairs, secret variable
names, volumes."""

import os
from collections.abc import Collection, Iterable, Mapping, Sequence
from typing import Any, Optional, Union

from ..exceptions import SpecError
from ..protocol import task_env
from .inputs import ENV_NAME
from .volumes import parse_volume

# Linux's MAX_ARG_STRLEN (32 pages) less the NUL: the longest NAME=VALUE exec() takes.
MAX_ENV_ENTRY = 32 * 4096 - 1
# What exec() takes in all, arguments and environment (fs/exec.c,
# bprm_stack_limits): a quarter of the stack's limit (ulimit -s; glibc's
# sysconf(_SC_ARG_MAX)), at least 32 pages, at most 6 MiB (3/4 of _STK_LIM),
# each string counted with its NUL and a pointer to it.
MIN_EXEC_BYTES = 32 * 4096
MAX_EXEC_BYTES = 6 << 20
POINTER_BYTES = 8


def exec_limit() -> int:
    """How many bytes of arguments and environment exec() takes here."""
    try:
        limit = os.sysconf("SC_ARG_MAX")
    except (ValueError, OSError):
        limit = -1
    if limit <= 0:
        limit = 2 << 20   # an 8-MiB stack's
    return min(max(limit, MIN_EXEC_BYTES), MAX_EXEC_BYTES)


def exec_bytes(strings: Iterable[str]) -> int:
    """What ``strings`` (arguments or NAME=VALUE) count for in exec()'s bound."""
    return sum(len(text.encode("utf-8", "surrogateescape")) + 1 + POINTER_BYTES
               for text in strings)


def check_exec_size(env: Iterable[tuple[str, str]], command: str, owner: str) -> None:
    """SpecError when ``env`` (the pairs a task gets from the user) and
    ``command`` (run as ``sh -c COMMAND``) alone are more than exec() takes
    here: every launch of the task would fail with E2BIG ("Argument list
    too long"), before what tfmesos and Mesos add to its environment."""
    pairs = list(env)
    variables = exec_bytes("%s=%s" % pair for pair in pairs)
    size = variables + exec_bytes(["/bin/sh", "-c", command])
    limit = exec_limit()
    if size > limit:
        raise SpecError("%s: the environment (%d variables, %d bytes) and the command are %d "
                        "bytes in all, more than the %d Linux lets a task start with (ARG_MAX "
                        "here, a quarter of ulimit -s), before what tfmesos and Mesos add: "
                        "pass big values in a file (ship=...)"
                        % (owner, len(pairs), variables, size, limit))


def env_tuple(env: Union[Mapping[str, object], Iterable[Union[str, Sequence[object]]]],
               job: Optional[str] = None, own: Collection[str] = ()) -> tuple[tuple[str, str], ...]:
    """The run's ``env`` (a job's: ``job``, its name) as (name, value)
    pairs; ``own``: names tfmesos itself put there (``task_env.FUNCTION_RUN``)."""
    owner = "the run" if job is None else "job %r" % job
    items = env.items() if isinstance(env, Mapping) else env
    result = []
    for item in items:
        if isinstance(item, str):
            if "=" not in item:
                raise SpecError("%s: environment entry %r must look like NAME=VALUE" % (owner, item))
            item = item.split("=", 1)
        elif isinstance(item, (str, bytes)) or not isinstance(item, Sequence) or len(item) != 2:
            raise SpecError("%s: environment entry %r must be a NAME=VALUE string or a "
                            "(name, value) pair" % (owner, item))
        name, value = item
        if not ENV_NAME.match(str(name)):
            raise SpecError("%s: invalid environment variable name %r: use letters, digits and "
                            "_, not first a digit" % (owner, name))
        if name not in own:
            refuse_a_name_set_for_the_task(str(name), job)
        if not isinstance(value, str):
            fix = ("leave %s out to leave it unset" % name if value is None
                   else "give %r" % str(value))
            what = ": the value of %s must be a string, got %r (%s)"
            if job is None:
                raise SpecError.about("{env}" + what, name, value, fix)
            raise SpecError.about("job %r: env" + what, job, name, value, fix)
        # exec() refuses a value with a NUL, and one variable over MAX_ARG_STRLEN
        # (32 pages) with E2BIG: every launch of the task would fail.
        if "\0" in value:
            raise SpecError("%s: the value of %s holds a NUL character, which no environment "
                            "variable can" % (owner, name))
        if name == task_env.TASK_HOST:
            _check_task_host(value, job)
        if len(str(name)) + 1 + len(value.encode("utf-8", "surrogateescape")) > MAX_ENV_ENTRY:
            raise SpecError("%s: the value of %s is over %d KiB, more than an environment "
                            "variable may hold: pass it in a file (ship=...)"
                            % (owner, name, MAX_ENV_ENTRY // 1024))
        result.append((str(name), str(value)))
    return tuple(result)


def _check_task_host(value: str, job: Optional[str]) -> None:
    """SpecError unless ``value`` is a host ``TFMESOS_TASK_HOST`` may name
    (``hostport.host_name``): each task would refuse it, attempt after
    attempt."""
    from ..protocol.hostport import host_name  # (only where one is given)
    if host_name(value) is not None:
        return
    what = ": %s=%s " + task_env.NOT_A_HOST
    if job is None:
        raise SpecError.about("{env}" + what, task_env.TASK_HOST, value)
    raise SpecError.about("job %r: env" + what, job, task_env.TASK_HOST, value)


def refuse_a_name_set_for_the_task(name: str, job: Optional[str] = None) -> None:
    """SpecError for a user's variable that tfmesos or Mesos sets in every
    task: tfmesos' value replaced the user's without a word, or the user's
    broke the task (``MESOS_SANDBOX``: every launch failed)."""
    setter = ("tfmesos" if name in task_env.SET_BY_TFMESOS else
              "Mesos" if name in task_env.SET_BY_MESOS else None)
    if setter is None:
        return
    what = ": %s is a name %s sets in every task: give your variable another name"
    if job is None:
        raise SpecError.about("{env}" + what, name, setter)
    raise SpecError.about("job %r: env" + what, job, name, setter)


def refuse_function_run_names(env: Iterable[object]) -> None:
    """``refuse_a_name_set_for_the_task`` for the names only ``tfmesos.run``
    sets (``task_env.FUNCTION_RUN``), which a ``RunSpec``'s env may hold:
    for what a user gives (tfrun's -E, ``cluster(env=)``, ``tfmesos.run(env=)``)."""
    for item in env:
        name = (item.split("=", 1)[0] if isinstance(item, str) else
                item[0] if isinstance(item, (tuple, list)) and item else None)
        if name in task_env.FUNCTION_RUN:
            refuse_a_name_set_for_the_task(name)


def user_env(env: Any) -> list:
    """``env_given``, none of it a name only ``tfmesos.run`` sets."""
    given = env_given(env)
    refuse_function_run_names(given)
    return given


def env_given(env: Any) -> list:
    """What ``cluster()`` and ``tfmesos.run()`` take as ``env``, as
    ``env_tuple`` reads it: any mapping (``os.environ``, a mapping proxy),
    or NAME=VALUE strings or (name, value) pairs; None: none. A string
    alone was read a character at a time ("environment entry 'A' must look
    like NAME=VALUE" of env="A=1"), a mapping that is no dict as its
    names alone, a list by cluster() as a mapping (a traceback)."""
    if env is None:
        return []
    if isinstance(env, Mapping):
        return list(env.items())
    if isinstance(env, (str, bytes)) or not isinstance(env, Iterable):
        raise SpecError.about("{env} takes a mapping of variable names to values, or a list of "
                              "NAME=VALUE strings; got %r", env)
    return list(env)


def volumes_given(volumes: Any) -> tuple:
    """What ``cluster()`` and ``tfmesos.run()`` take as ``volumes``: a list
    of ``HOST:CONTAINER[:ro|rw]`` strings (or (host, container, mode)
    triples), or a mapping of host paths to container paths; None: none.
    A string alone was read a character at a time ("invalid volume '/'")."""
    if volumes is None:
        return ()
    if isinstance(volumes, Mapping):
        return tuple("%s:%s" % item for item in volumes.items())
    if isinstance(volumes, (str, bytes)) or not isinstance(volumes, Iterable):
        raise SpecError.about("{volumes} takes a list of HOST:CONTAINER[:ro|rw] strings (or a "
                              "mapping of host paths to container paths); got %r", volumes)
    return tuple(volumes)


def pairs(value: Any) -> tuple:
    """``(name, value)`` pairs of a mapping, or of pairs given as such (None: none)."""
    if value is None:
        return ()
    if isinstance(value, Mapping):
        return tuple(value.items())
    found = tuple(value) if isinstance(value, Iterable) and not isinstance(value, (str, bytes)) \
        else None
    if found is None or any(not isinstance(pair, (tuple, list)) or len(pair) != 2
                            for pair in found):
        raise SpecError.about("{local_master} takes a mapping of option names to "
                              "values; got %r", value)
    return found


def local_master_pairs(value: Any) -> tuple:
    """``pairs`` of ``local_master_options``, each the name of a keyword of
    the embedded master (``LocalMaster``): an unknown one is refused here,
    before anything starts, not a TypeError deep in the run's start."""
    found = pairs(value)
    if found:
        import inspect

        from mesos_local import LocalMaster
        known = [name for name in inspect.signature(LocalMaster.__init__).parameters
                 if name != "self"]
        for name, _ in found:
            if name not in known:
                raise SpecError.about("{local_master} has no option %r: the embedded master "
                                      "takes %s", name, ", ".join(known))
    return found


def secret_names(names: Union[str, Iterable[str]], plain: Collection[str]) -> tuple[str, ...]:
    """``secret_env``: distinct variable names, none of them also a plain
    setting (``plain``) nor one tfmesos sets itself."""
    if isinstance(names, str):
        names = (names,)
    if not isinstance(names, Iterable) or isinstance(names, bytes):
        raise SpecError.about("{secret_env} takes variable names (a list of strings); got %r",
                              names)
    result = []
    for name in names:
        if not isinstance(name, str) or not ENV_NAME.match(name):
            raise SpecError.about("{secret_env}: invalid environment variable name %r: use "
                                  "letters, digits and _, not first a digit", name)
        if name.startswith(("TFMESOS_", "MESOS_")):
            raise SpecError.about("{secret_env}: %s is a name tfmesos or Mesos sets itself: give "
                                  "your secret another name", name)
        if name in plain:
            raise SpecError.about("{secret_env}: %s is also a plain setting ({env}): give it once",
                                  name)
        if name not in result:
            result.append(name)
    return tuple(result)


def volume_tuple(volume: Sequence[str]) -> tuple[str, str, str]:
    if isinstance(volume, (tuple, list)) and len(volume) == 3 \
            and all(isinstance(part, (str, os.PathLike)) for part in volume):
        host, container, mode = (os.fspath(part) for part in volume)
        return parse_volume("%s:%s:%s" % (host, container, mode.lower()))
    raise SpecError("volumes: each is a HOST:CONTAINER[:ro|rw] string (or a (host, container, "
                    "mode) triple); got %r" % (volume,))


__all__ = ["check_exec_size", "env_given", "env_tuple", "pairs", "secret_names", "volume_tuple",
           "volumes_given"]
