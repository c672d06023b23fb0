"""The pid a master's mesos_local cgroup directory is named for:
``<pid namespace>.<pid>.<start>-XXXXXXXX`` (an older mesos_local's:
``<pid>-<start>-XXXXXXXX``), else None."""

import glob
import os
import re

_NAMED = re.compile(r"\d+\.(\d+)\.\d+-|(\d+)-\d+-")


def cgroup_master_pid(name):
    found = _NAMED.match(name)
    return int(found.group(1) or found.group(2)) if found else None


def mesos_local_cgroups_of(pid):
    """The mesos_local cgroups of a master in process ``pid``."""
    return [path for pattern in ("/sys/fs/cgroup/*/mesos_local/*", "/sys/fs/cgroup/mesos_local/*")
            for path in glob.glob(pattern)
            if cgroup_master_pid(os.path.basename(path)) == pid]
