"""The environment a task starts with, as a Mesos agent gives it.

A Mesos agent does not hand its own environment to tasks: a task gets the
agent's ``--executor_environment_variables`` (a JSON object of strings; by
default none, "Users have to define executor environment explicitly",
src/slave/flags.cpp), the variables the agent sets itself (``MESOS_*``,
``executorEnvironment`` in src/slave/slave.cpp, ``MESOS_SANDBOX`` in
src/slave/containerizer/mesos/containerizer.cpp) and its TaskInfo's
``command.environment``. When ``PATH`` is still unset the launcher adds
``os::host_default_path()`` (src/slave/containerizer/mesos/launch.cpp,
3rdparty/stout/include/stout/posix/os.hpp). Nothing else: no ``HOME``,
``LANG`` or ``TMPDIR`` (Python then takes the home directory from the
password database, UTF-8 from PEP 538 and ``/tmp``).
"""

import json

# os::host_default_path() (3rdparty/stout/include/stout/posix/os.hpp).
DEFAULT_PATH = "/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin"


def executor_environment(variables, where="LocalMaster(executor_environment=...)"):
    """The base environment of every task: ``variables`` (a mapping of
    strings, or None for none) plus ``PATH`` when it does not set one."""
    base = {}
    if variables is not None:
        if not hasattr(variables, "items"):
            raise ValueError("%s: expected a mapping of variable names to strings, got %r"
                             % (where, variables))
        for name, value in variables.items():
            if not isinstance(name, str) or not name or "=" in name or "\0" in name:
                raise ValueError("%s: %r is not a valid variable name" % (where, name))
            if not isinstance(value, str) or "\0" in value:
                # Mesos: "`executor_environment_variables` must only contain string values"
                raise ValueError("%s: the value of %s must be a string, got %r"
                                 % (where, name, value))
            base[name] = value
    base.setdefault("PATH", DEFAULT_PATH)
    return base


def parse_environment_json(text):
    """``--executor-environment-variables``: a JSON object of strings, given
    inline or as ``file:///path`` (as Mesos' flags take JSON)."""
    source = "--executor-environment-variables"
    if text.startswith("file://"):
        path = text[len("file://"):]
        try:
            with open(path, encoding="utf-8") as handle:
                text = handle.read()
        except OSError as exc:
            raise ValueError("%s: cannot read %s: %s" % (source, path, exc.strerror)) from exc
    try:
        document = json.loads(text)
    except ValueError as exc:
        raise ValueError("%s: invalid JSON (%s); expected an object like "
                         "'{\"PATH\": \"/usr/bin:/bin\"}'" % (source, exc)) from None
    if not isinstance(document, dict):
        raise ValueError("%s: expected a JSON object like '{\"PATH\": \"/usr/bin:/bin\"}'"
                         % source)
    return executor_environment(document, source)


__all__ = ["DEFAULT_PATH", "executor_environment", "parse_environment_json"]
