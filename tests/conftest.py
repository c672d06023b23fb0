"""Suite-wide guards: every process a test starts carries a marker in its
environment, and the session fails if any such process outlives it; every
embedded master the suite starts (fixtures, tfrun/cluster() runs, ``tfmesos
local-master`` subprocesses) reads calls strictly, so that tfmesos' own
driver stays exactly valid: tests of the tolerant default ask for it
explicitly (``LocalMaster(strict=False)``, ``--no-strict``); every run.json
the suite's runs write is valid against docs/run.schema.json."""

import json
import os
import shutil
import signal
import sys
import tempfile
import time
import uuid

import pytest
from fixtures_keras_example import keras_example  # one run for the session
from run_dirs import schema_errors

from mesos_local.cleanup import remove_stale_work_dirs
from mesos_local.containerizer.cgroup_limits import ISOLATORS
from mesos_local.containerizer.cgroups import IsolationError, Layout
from mesos_local.containerizer.cgroups import remove_stale as remove_stale_cgroups
from tfmesos.backends.sizing import PORTS_ENV, local_ports
from tfmesos.record.run_dirs import RUNS_DIR

MARKER = "TFMESOS_TEST_SESSION"
os.environ[MARKER] = uuid.uuid4().hex  # inherited by every task, container or not
# Every run keeps a run directory: the tests' go to a temporary place, not
# into the checkout (tfrun and cluster() read this, as users may set it).
_RUNS = tempfile.TemporaryDirectory(prefix="tfmesos-test-runs-")
os.environ["TFMESOS_RUNS_DIR"] = _RUNS.name
# And the keys of --failover and detached runs: not into the user's ~/.tfmesos.
os.environ["TFMESOS_KEYS_DIR"] = os.path.join(_RUNS.name, "keys")
# Every Python process the suite starts skips the garbage collections at its
# exit, and sees no JAX unless its test is marked ``jax``, no IPython unless
# it is marked ``notebook`` (tests/process_site/sitecustomize.py: ~3 s of
# CPU a TensorFlow process). On sys.path too: the plain tasks of a
# ``cluster()`` in a test's own process get its sys.path as their PYTHONPATH
# (core.taskinfo.submitter_pythonpath).
# The checkout comes next, as an install's site-packages is on a user's
# path: tfrun then finds its package on the tasks' PYTHONPATH and starts
# their entries without ``site`` (core.taskinfo.package_on_path), as from
# a pip install; from an editable install's finder alone, every task entry
# ran ``site`` (~30 ms of CPU each here).
_PROCESS_SITE = os.path.join(os.path.dirname(os.path.abspath(__file__)), "process_site")
_CHECKOUT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
os.environ["PYTHONPATH"] = os.pathsep.join(
    [_PROCESS_SITE, _CHECKOUT] + [p for p in os.environ.get("PYTHONPATH", "").split(os.pathsep)
                                  if p and p != _CHECKOUT])
if _PROCESS_SITE not in sys.path:
    sys.path.insert(0, _PROCESS_SITE)
HIDDEN_ENV = "TFMESOS_TEST_HIDDEN_PACKAGES"
# The packages the suite installs for some of its tests only, hidden from
# the processes of the others, each unhidden by its marker.
HIDDEN_BY_MARKER = {"jax": ("jax", "jaxlib"), "notebook": ("IPython",)}


def hidden_packages(marked=lambda marker: False):
    """$TFMESOS_TEST_HIDDEN_PACKAGES for a test whose markers ``marked`` says."""
    return ",".join(name for marker, names in HIDDEN_BY_MARKER.items() if not marked(marker)
                    for name in names)


os.environ[HIDDEN_ENV] = hidden_packages()
STRICT_ENV = "MESOS_LOCAL_STRICT"   # mesos_local.api.stout.STRICT_ENV
os.environ[STRICT_ENV] = "1"
# A lane scripts/test.sh starts in the background inherits SIGINT ignored
# (a shell without job control ignores it for an asynchronous command,
# POSIX XCU 2.11), and an ignored signal stays ignored across exec: every
# process the tests start (tfrun, `tfmesos runs --watch`) would ignore the
# Ctrl-C a test sends it, and the lane the Ctrl-C of stop_lanes.
if signal.getsignal(signal.SIGINT) is signal.SIG_IGN:
    signal.signal(signal.SIGINT, signal.default_int_handler)


# pytest-xdist (scripts/test.sh runs the integration tier's tests but the
# training ones on 2 workers, --dist loadgroup): tests that share one server
# of the session (the Docker engine the session may start and stop; one
# ZooKeeper) run on one worker; so do the tests that start TensorFlow
# clusters, where they run with xdist: on 2 cores, two clusters at once
# starve each other's tasks (TensorFlow's import holds a task's interpreter
# past the rendezvous' 30-s stall check) and take as long as one after the
# other.
SHARED_SERVERS = (("docker", frozenset({"docker_engine", "tfmesos_image",
                                        "no_leaked_containers"})),
                  ("zookeeper", frozenset({"zookeeper"})),
                  # one MLflow server a module (~25 s to start): on one xdist worker
                  ("mlflow_server", frozenset({"mlflow_server"})))


# Modules whose tests import a framework into the pytest process itself, by
# framework: on one pytest-xdist worker, which imports it once (TensorFlow
# ~8 s of CPU a process, torch ~2 s); group "<framework>-in-process".
IN_PROCESS = {"tensorflow": frozenset({"test_clusterspec"}),
              "torch": frozenset({"test_metrics_torch", "test_process_group"})}


# What no test imports into pytest's own process unless its module is one of
# those, nor any module as pytest collects it (test_process_site): each costs
# the worker or lane its import (seconds of CPU) and its objects for the rest
# of the session (CI's runs took 4.5-7 CPU-minutes less once none did, stop
# 68, only partly for this reason as far as measured).
FRAMEWORKS = frozenset({"tensorflow", "tf_keras", "keras", "torch", "lightning",
                        "pytorch_lightning", "jax", "sklearn"})


def frameworks_imported(before, module):
    """The failure to report when the test of ``module`` imported a
    framework into pytest's process (``before``: those imported then), or
    None."""
    new = sorted(name for name in FRAMEWORKS if name in sys.modules and name not in before)
    if not new or any(module in modules for modules in IN_PROCESS.values()):
        return None
    return ("this test imported %s into pytest's own process: import it in the processes the "
            "test starts (tests/installed.require to skip without it), or name the module in "
            "tests/conftest.py's IN_PROCESS" % ", ".join(new))


# The two tiers (scripts/test.sh runs the fast one first): ``integration``
# marks every test that starts a master, an agent, TensorFlow, a container,
# ZooKeeper or tfrun and its tasks (by the fixtures it uses, its markers, or
# its module's running tfrun, a local master or other processes itself);
# ``pytest -m "not integration"`` is pure logic, the mock transport and
# fakes, in under two minutes.
INTEGRATION_FIXTURES = frozenset({"make_local_master", "local_master", "clients", "silent_agent",
                                  "docker_engine", "tfmesos_image", "no_leaked_containers",
                                  "namespaces", "zookeeper"})
INTEGRATION_MARKERS = ("tensorflow", "docker", "zookeeper")
INTEGRATION_MODULES = frozenset((
    "test_bad_input", "test_cli_help", "test_clusterspec", "test_driver_auth_tls",
    "test_driver_timeouts", "test_hints", "test_import_graph", "test_launch_faults",
    "test_metrics_runs", "test_mlflow", "test_recovery", "test_rendezvous_fuzz",
    "test_rendezvous_hardening", "test_report", "test_run_dir", "test_run_function",
    "test_run_outcomes", "test_run_submit", "test_sandbox_tails", "test_ship", "test_ship_packed",
    "test_sticky", "test_task_failover", "test_task_orphans", "test_task_users", "test_tfrun",
    "test_usage", "test_warm_tasks", "test_benchmarks", "test_leftovers", "test_readme_detach",
    "test_framework_runs", "test_run_frameworks", "test_torch_elastic", "test_operator_follow",
    "test_torch_detached", "test_agent_endpoints", "test_lightning_runs", "test_protobuf_api",
    "test_custom_executors", "test_mesos_local_package", "test_pymesos_framework",
    "test_npm_mesos_client", "test_master_cleanup", "test_master_death", "test_runs_dir_owner",
    "test_full_sandbox", "test_thread_limit"))
# The embedded master's own tests (``pytest -m mesos_local``): mesos_local
# through its API, raw HTTP and clients this project did not write, with
# nothing of tfmesos but its TensorFlow-free Mesos client and wire names
# (test_import_graph checks that, test_mesos_local_package that they are
# collected with TensorFlow, PyTorch and JAX absent).
MESOS_LOCAL_MODULES = frozenset((
    "test_agent_endpoints", "test_avmesos", "test_custom_executors", "test_fetch_cache",
    "test_fetcher", "test_local_endpoints", "test_local_files", "test_local_filters",
    "test_local_master", "test_local_schema", "test_master_http_bounds",
    "test_mesos_local_package", "test_master_cleanup", "test_master_death",
    "test_npm_mesos_client", "test_operator_api", "test_operator_events",
    "test_operator_routing", "test_proto_codec", "test_protobuf_api", "test_pymesos_framework",
    "test_task_exit"))


def _loadgroup_broken():
    """Why this pytest would ignore the node ids pytest-xdist's --dist
    loadgroup renames to put a test in its group (pytest 9.2 with xdist 3.8
    and older: every xdist_group lost), or None."""
    try:
        import xdist
    except ImportError:
        return None

    def version(text):
        return tuple(int(part) for part in text.split(".")[:3] if part.isdigit())
    if version(pytest.__version__) >= (9, 2) and version(xdist.__version__) <= (3, 8, 0):
        return ("pytest %s breaks --dist loadgroup of pytest-xdist %s (the tests of one Docker "
                "engine would run on two workers at once): pip install 'pytest>=7,<9.2'"
                % (pytest.__version__, xdist.__version__))
    return None


def pytest_configure(config):
    broken = _loadgroup_broken() if getattr(config.option, "dist", "no") == "loadgroup" else None
    if broken:
        raise pytest.UsageError(broken)
    _lane_ports()


_AT_ONCE = 5   # pytest processes of scripts/test.sh at once: rest gw0/gw1, training, waiting gw0/gw1


def _lane_ports():
    """Processes that run at once (scripts/test.sh: the rest lane's two
    xdist workers, the training lane, the waiting lane's two workers) draw
    the embedded masters' port windows from ranges of their own
    (TFMESOS_LOCAL_PORTS), so that two tests' tasks never bind one port
    (once: a torch group's port EADDRINUSE)."""
    if os.environ.get(PORTS_ENV):
        return
    worker = os.environ.get("PYTEST_XDIST_WORKER", "")
    lane = os.environ.get("TFMESOS_TEST_LANE", "")   # scripts/test.sh names its lanes
    index = int(worker[2:]) % 2 if worker.startswith("gw") and worker[2:].isdigit() else 0
    if lane == "training":
        slot = 2
    elif lane == "waiting":
        slot = 3 + index
    elif worker:
        slot = index
    else:
        return
    # The embedded master's own range (20000-31000) in five: 2,200 ports
    # each, a window for up to 1,099 tasks (1,000 at most)
    low, high = local_ports(0, environ={})
    size = (high - low) // _AT_ONCE
    os.environ[PORTS_ENV] = "%d-%d" % (low + size * slot, low + size * (slot + 1) - 1)


def pytest_ignore_collect(collection_path, config):
    """``-m mesos_local`` (or ``-m "mesos_local and ..."``) imports only the
    embedded master's own test modules: the others may import TensorFlow or
    PyTorch as they load."""
    expression = config.getoption("markexpr") or ""
    if ((expression == "mesos_local" or expression.startswith("mesos_local and "))
            and collection_path.suffix == ".py" and collection_path.name.startswith("test_")
            and collection_path.stem not in MESOS_LOCAL_MODULES):
        return True
    return None


@pytest.hookimpl(tryfirst=True)   # before xdist reads the groups
def pytest_collection_modifyitems(config, items):
    for item in items:
        fixtures = set(getattr(item, "fixturenames", ()))
        module = getattr(getattr(item, "module", None), "__name__", "")
        if (fixtures & INTEGRATION_FIXTURES or module in INTEGRATION_MODULES
                or any(item.get_closest_marker(name) for name in INTEGRATION_MARKERS)):
            item.add_marker(pytest.mark.integration)
        if module in MESOS_LOCAL_MODULES:
            item.add_marker(pytest.mark.mesos_local)
        group = next((name for name, needs in SHARED_SERVERS
                      if fixtures & needs or item.get_closest_marker(name) is not None), None)
        if group is None and item.get_closest_marker("tensorflow") is not None:
            group = "tensorflow"
        if group is None:
            group = next(("%s-in-process" % framework for framework, modules
                          in IN_PROCESS.items() if module in modules), None)
        if group is not None:
            item.add_marker(pytest.mark.xdist_group(group))


_FRAMEWORKS_BEFORE = pytest.StashKey[frozenset]()


@pytest.hookimpl(tryfirst=True)   # before any fixture is set up
def pytest_runtest_setup(item):
    item.stash[_FRAMEWORKS_BEFORE] = frozenset(name for name in FRAMEWORKS if name in sys.modules)


@pytest.hookimpl(wrapper=True)
def pytest_runtest_teardown(item, nextitem):
    """After every fixture's teardown (monkeypatch's stand-ins undone):
    a failure of this test's teardown where it imported a framework."""
    result = yield
    failure = frameworks_imported(item.stash.get(_FRAMEWORKS_BEFORE, frozenset()),
                                  getattr(getattr(item, "module", None), "__name__", ""))
    if failure:
        pytest.fail(failure, pytrace=False)
    return result


@pytest.fixture(autouse=True)
def _marked_packages_visible(request, monkeypatch):
    """A test marked ``jax`` starts processes that may import JAX; one
    marked ``notebook``, IPython."""
    hidden = hidden_packages(lambda marker: request.node.get_closest_marker(marker) is not None)
    if hidden:
        monkeypatch.setenv(HIDDEN_ENV, hidden)
    else:
        monkeypatch.delenv(HIDDEN_ENV, raising=False)


LEAK_GRACE = 10.0   # seconds


def marked_processes():
    token = ("%s=%s" % (MARKER, os.environ[MARKER])).encode()
    found = []
    for pid in os.listdir("/proc"):
        if not pid.isdigit() or int(pid) == os.getpid():
            continue
        try:
            with open("/proc/%s/environ" % pid, "rb") as handle:
                if token not in handle.read().split(b"\0"):
                    continue
            with open("/proc/%s/cmdline" % pid, "rb") as handle:
                cmdline = handle.read().replace(b"\0", b" ").decode(errors="replace").strip()
            with open("/proc/%s/stat" % pid) as handle:
                if handle.read().rsplit(")", 1)[1].split()[0] == "Z":
                    continue  # a zombie waiting for its parent: already dead
        except OSError:
            continue
        found.append((int(pid), cmdline))
    return found


def remove_what_killed_masters_left():
    """What a SIGKILLed embedded master (a test kills tfrun) leaves until the
    next master's start removes it, removed as that start would: its work
    directory and task cgroups (network namespaces: tests/fixtures_netns.py).
    Only those whose master's process is gone: another lane's live masters
    keep theirs."""
    remove_stale_work_dirs()
    try:
        remove_stale_cgroups(Layout.detect(ISOLATORS))
    except IsolationError:
        pass   # no writable cgroup hierarchies: no master made any


@pytest.fixture(scope="session", autouse=True)
def no_leaked_processes():
    yield
    try:
        check_no_leaked_processes()
    finally:
        # After the check (which would count a killed master's tasks as
        # left behind), whatever it found.
        remove_what_killed_masters_left()


def check_no_leaked_processes():
    # A run's last process may still be ending as the session does: the
    # embedded master's detached cleaner (mesos_local/cleanup.py) removes its
    # cgroups and sandboxes after tfrun exits, in milliseconds. Anything
    # still there after LEAK_GRACE seconds was left behind.
    deadline = time.monotonic() + LEAK_GRACE
    leaked = marked_processes()
    while leaked and time.monotonic() < deadline:
        time.sleep(0.05)
        leaked = marked_processes()
    for pid, _ in leaked:
        try:
            os.kill(pid, signal.SIGKILL)
        except OSError:
            pass
    assert not leaked, "processes left behind by the tests: %s" % leaked


def run_json_errors(root, strict):
    """What docs/run.schema.json rejects in the run.json files under ``root``,
    one line each. Not ``strict``: only files that are run records (JSON
    objects with tasks) of this version are checked; the others are files
    tests made up (test_ship's projects) or copies of the version 1 run
    directory ("format": 1) that tests read on purpose."""
    errors = []
    for directory, _, files in os.walk(root):
        if "run.json" not in files:
            continue
        path = os.path.join(directory, "run.json")
        if not os.path.isfile(path):   # a FIFO test_history plants: never waited on
            continue
        try:
            with open(path, encoding="utf-8") as handle:
                data = json.load(handle)
        except (OSError, ValueError, RecursionError) as exc:   # (test_history plants one)
            if strict:
                errors.append("%s: %s" % (path, exc))
            continue
        if strict or (isinstance(data, dict) and "tasks" in data and data.get("format") != 1):
            errors.extend("%s: %s" % (path, error) for error in schema_errors(data)[:5])
    return errors


# Where a run given no $TFMESOS_RUNS_DIR (a test's ``environ={}``) would keep
# its record: the checkout the suite runs in.
_CHECKOUT_RUNS = os.path.abspath(RUNS_DIR)


def _checkout_runs():
    try:
        return set(os.listdir(_CHECKOUT_RUNS))
    except OSError:
        return set()


@pytest.fixture(autouse=True)
def no_run_record_in_the_checkout():
    """A test's runs keep their records in the tests' runs directory (or
    its tmp_path), never in ./tfmesos-runs of the checkout: a test that
    hands a run an environment without $TFMESOS_RUNS_DIR gives it one."""
    before = _checkout_runs()
    yield
    made = sorted(_checkout_runs() - before)
    for name in made:
        shutil.rmtree(os.path.join(_CHECKOUT_RUNS, name), ignore_errors=True)
    assert not made, "run directories written into %s: %s" % (_CHECKOUT_RUNS, made)


@pytest.fixture(scope="session", autouse=True)
def every_run_json_is_valid(tmp_path_factory):
    """At the end, every run.json the suite's runs wrote is valid against
    docs/run.schema.json: those under $TFMESOS_RUNS_DIR, and the run records
    in the tests' temporary directories (tmp_path run directories, --run-dir,
    a runs directory of their own)."""
    yield
    errors = run_json_errors(_RUNS.name, strict=True) + run_json_errors(
        str(tmp_path_factory.getbasetemp()), strict=False)
    assert not errors, "run.json files that docs/run.schema.json rejects:\n%s" % "\n".join(
        errors)


@pytest.fixture(autouse=True)
def tensorflow_log_level_as_given():
    """With JAX installed (the keras-jax extra), ``import tensorflow`` imports
    it (tensorflow/lite/python/util.py), and JAX's ``__init__`` sets
    ``TF_CPP_MIN_LOG_LEVEL=1`` in ``os.environ``: a test that imports
    TensorFlow here would change what every later tfrun and task inherits."""
    before = os.environ.get("TF_CPP_MIN_LOG_LEVEL")
    yield
    if before is None:
        os.environ.pop("TF_CPP_MIN_LOG_LEVEL", None)
    else:
        os.environ["TF_CPP_MIN_LOG_LEVEL"] = before
