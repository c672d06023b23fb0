"""The pid a master's mesos_local cgroup directory is named for:
``<pid namespace>.<pid>.<start>-XXXXXXXX`` (an older mesos_local's:
``<pid>-<start>-XXXXXXXX``), else None."""

import re

_NAMED = re.compile(r"\d+\.(\d+)\.\d+-|(\d+)-\d+-")


def cgroup_master_pid(name):
    found = _NAMED.match(name)
    return int(found.group(1) or found.group(2)) if found else None
