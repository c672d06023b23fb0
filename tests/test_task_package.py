"""The task side is a package of its own (``python -m tfmesos.task``): a
task loads nothing of the scheduler side, and loads it fast; the former
entry ``python -m tfmesos.server`` still works."""

import json
import os
import subprocess
import sys

from processes import TASK_ENTRY
from tfrun_helpers import REPO

# What a task may import besides the standard library.
# The package's face (its __init__ and the lazy names it hands out) and the
# protocol both sides speak.
ALLOWED = {"tfmesos", "tfmesos.lazy_exports", "tfmesos.protocol", "tfmesos.protocol.wire",
           "tfmesos.protocol.hmac_sha256",
           "tfmesos.protocol.hostport", "tfmesos.protocol.task_env",
           "tfmesos.protocol.metric_points", "tfmesos.protocol.json_documents"}
PROBE = ("import json, sys; before = set(sys.modules); import tfmesos.task.__main__; "
         "print(json.dumps(sorted(set(sys.modules) - before)))")


def task_environment():
    """This checkout first on the path, and none of the scheduler's task variables."""
    env = {name: value for name, value in os.environ.items() if not name.startswith("TFMESOS_")}
    env["PYTHONPATH"] = os.pathsep.join(filter(None, [REPO, os.environ.get("PYTHONPATH")]))
    return env


def import_task_entry():
    """(modules the import added, ms of tfmesos' own modules' import self times)
    of one fresh interpreter importing the task entry, without ``site`` as a
    task whose path finds tfmesos starts (``core.taskinfo``): nothing that
    site's own imports loaded hides what the entry imports."""
    result = subprocess.run([sys.executable, "-S", "-X", "importtime", "-c", PROBE],
                            capture_output=True, text=True, env=task_environment(), timeout=60)
    assert result.returncode == 0, result.stderr
    own_us = 0
    for line in result.stderr.splitlines():
        # "import time:  self [us] | cumulative | imported package"
        if not line.startswith("import time:"):
            continue
        fields = line[len("import time:"):].split("|")
        name = fields[2].strip()
        if name.split(".")[0] == "tfmesos":
            own_us += int(fields[0])
    return json.loads(result.stdout), own_us / 1000.0


def is_task_side(name):
    return name in ALLOWED or name == "tfmesos.task" or name.startswith("tfmesos.task.")


def test_the_task_entry_imports_only_the_task_side_and_the_standard_library():
    modules, _ = import_task_entry()
    assert "tfmesos.task.entry" in modules
    foreign = [name for name in modules
               if name.split(".")[0] not in sys.stdlib_module_names and not is_task_side(name)]
    assert not foreign, "the task entry imports more than its own side: %s" % foreign


# Every task pays for what its entry imports: the standard library's heavy
# parts load only on the paths that need them (rediscover's HTTP client when a
# task lost its scheduler, tfmesos.run's result file; subprocess and its
# locale, ~2.5 ms, for nvidia-smi and a fine-grained task's log filter only:
# replica_guard forks; typing, for the type checkers only; shutil and its
# compressors for nvidia-smi's lookup; secrets, where os.urandom does). Not
# timed here (a loaded 2-core machine makes any budget flaky):
# benchmarks/startup.py measures.
HEAVY = ("http", "ssl", "urllib", "email", "asyncio", "multiprocessing", "concurrent",
         "xml", "zipfile", "tarfile", "logging", "argparse", "tfmesos.protocol.labels",
         "tfmesos.task.rediscover", "tfmesos.task.result_file", "subprocess", "locale",
         "encodings.idna", "typing", "shutil", "secrets")


def test_the_task_entry_leaves_the_heavy_parts_for_the_paths_that_need_them():
    modules, _ = import_task_entry()
    loaded = [name for name in modules
              if any(name == heavy or name.startswith(heavy + ".") for heavy in HEAVY)]
    assert loaded == [], "the task entry imports %s at once" % loaded


def run_by_hand(module):
    return subprocess.run([sys.executable, "-m", module], capture_output=True, text=True,
                          env=task_environment(), cwd=REPO, timeout=60)


def test_tfmesos_server_is_still_the_task_entry():
    entry, alias = run_by_hand(TASK_ENTRY), run_by_hand("tfmesos.server")
    lines = entry.stderr.splitlines()
    assert len(lines) == 1 and "TFMESOS_RENDEZVOUS" in lines[0] and "not set" in lines[0], \
        entry.stderr
    assert (entry.returncode, entry.stdout) == (1, "")
    assert (alias.returncode, alias.stdout, alias.stderr) == (1, "", entry.stderr)
