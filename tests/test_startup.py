"""tfrun starts quickly: importing it takes what parsing options needs, a run
imports only what it uses, and nothing waits on a fixed poll at the end
(benchmarks/startup.py measures the whole; these check the parts robustly:
the import set, no poll loops)."""

import json
import ssl
import subprocess
import sys
import threading

import pytest
from tfrun_helpers import RARE_PATHS

from tfmesos.mesos import MesosSchedulerDriver, Scheduler
from tfmesos.mesos.detector import StaticDetector
from tfmesos.mesos.http_transport import TLSContext
from tfmesos.mesos.subscription import Subscription


def modules_after(code):
    """The modules ``code`` adds to a fresh interpreter's sys.modules."""
    script = ("import sys; before = set(sys.modules); %s; "
              "import json; print(json.dumps(sorted(set(sys.modules) - before)))" % code)
    result = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True,
                            timeout=60)
    assert result.returncode == 0, result.stderr
    return set(json.loads(result.stdout.splitlines()[-1]))


def heavy(modules, names):
    return sorted(m for m in modules if any(m == n or m.startswith(n + ".") for n in names))


def test_importing_tfrun_leaves_the_run_machinery_for_later():
    # --help and usage errors need none of it; main() imports it.
    modules = modules_after("import tfmesos.cli.tfrun")
    assert heavy(modules, ["tfmesos.core.launch", "tfmesos.mesos.driver", "mesos_local",
                           "tfmesos.mesos.zookeeper", "http.client", "ssl", "urllib.request",
                           "kazoo", "docker", "tensorboard", "tensorflow", "mlflow",
                           "tfmesos.record.mlflow_logger"]) == []


def test_the_warm_task_interpreter_starts_before_the_master_s_imports():
    # tfrun starts it first thing, so that its start-up overlaps tfrun's imports.
    modules = modules_after("import tfmesos.core.taskinfo, tfmesos.backends.warm_runner")
    assert heavy(modules, ["mesos_local.master", "mesos_local.api.http_server",
                           "tfmesos.core.launch", "tfmesos.mesos.driver", "http.client",
                           "http.server", "ssl"]) == []


def test_a_run_on_a_remote_master_imports_no_embedded_master_zookeeper_docker_or_tensorboard():
    modules = modules_after("import tfmesos.cli.tfrun, tfmesos.core.launch, tfmesos.cli.progress")
    assert "tfmesos.mesos.driver" in modules
    assert heavy(modules, ["mesos_local", "tfmesos.mesos.zookeeper", "kazoo", "docker",
                           "urllib.request", "tensorboard", "tensorflow", "mlflow",
                           "tfmesos.record.mlflow_logger"]) == []


# What `import tfmesos.cli.tfrun` loads (--help and usage errors need no
# more): a module added here is a start-up cost every tfrun pays; measure it
# with benchmarks/startup.py before adding it (the time itself is not judged
# here: a loaded 2-core machine makes any budget flaky).
TFRUN_IMPORTS = {
    "tfmesos", "tfmesos.cli", "tfmesos.cli.common", "tfmesos.cli.run_name",
    "tfmesos.cli.tensorboard", "tfmesos.cli.tfrun", "tfmesos.cli.tfrun_options",
    "tfmesos.cli.tfrun_jobs", "tfmesos.cli.tfrun_checks",   # split out of tfrun_options
    "tfmesos.cli.tfrun_report",   # split out of tfrun (only sys: what tfrun.py held)
    "tfmesos.cli.tfrun_values",                            # split out of tfrun_options too
    "tfmesos.core", "tfmesos.core.config", "tfmesos.core.inputs", "tfmesos.core.restarts",
    "tfmesos.core.training_frameworks",   # --torch, --jax: their names (what tasks are told: later)
    "tfmesos.core.signals", "tfmesos.core.jobs", "tfmesos.core.spec", "tfmesos.core.spec_fields",
    "tfmesos.core.taskinfo",
    "tfmesos.core.unused_settings",   # options that would do nothing: tfrun's and the APIs' rule
    "tfmesos.core.volumes", "tfmesos.exceptions", "tfmesos.lazy_exports", "tfmesos.mesos",
    "tfmesos.mesos.master_address", "tfmesos.mesos.roles", "tfmesos.protocol",
    "tfmesos.protocol.labels", "tfmesos.protocol.task_env",
    "tfmesos.field_methods",   # the dataclasses' __eq__/__hash__/__repr__, written once
    # the standard library's, beyond what site loads (difflib: a usage error's suggestion only)
    "argparse", "ast", "copy", "dataclasses", "dis", "getpass", "gettext",
    "inspect", "json", "json.decoder", "json.encoder", "json.scanner", "linecache",
    "logging", "opcode", "pwd", "shlex", "signal", "string", "termios", "textwrap", "token",
    "tokenize", "traceback",
    # what site loads in some environments only (a .pth file that imports
    # typing, as an editable install's finder or a CA bundle's does): cheap
    "atexit", "collections.abc", "math", "threading", "typing", "typing.io", "typing.re",
    "weakref",
}


def test_importing_tfrun_loads_only_what_parsing_options_needs():
    modules = {m for m in modules_after("import tfmesos.cli.tfrun") if not m.startswith("_")}
    assert sorted(modules - TFRUN_IMPORTS) == []


def test_an_http_master_loads_no_certificates_an_https_one_at_once(tmp_path):
    driver = MesosSchedulerDriver(Scheduler(), {"user": "u", "name": "n"}, "127.0.0.1:5050")
    assert isinstance(driver._transport._context, TLSContext)
    assert driver._transport._context._context is None
    bundle = tmp_path / "ca.pem"
    bundle.write_text("not a certificate")
    with pytest.raises(ssl.SSLError):   # a bad CA bundle is an error when the driver is made
        MesosSchedulerDriver(Scheduler(), {"user": "u", "name": "n"}, "https://m:5050",
                             ca_bundle=str(bundle))


def test_no_leader_watch_for_a_static_list_of_masters():
    # It polled every 0.5 s until the driver stopped: stop() then waited for it.
    stopping = threading.Event()
    subscription = Subscription({}, StaticDetector(["http://127.0.0.1:5050"]), "m", None,
                                stopping, timeout=1, ssl=None, auth=None, heartbeat_misses=3,
                                backoff_cap=1, connect_timeout=1)
    watcher = threading.Thread(target=subscription.watch_leader, daemon=True)
    watcher.start()
    watcher.join(30)
    assert not watcher.is_alive()


def test_the_embedded_master_looks_up_no_name_for_an_address():
    # socket.gethostbyname("127.0.0.1") loaded the idna codec (and stringprep,
    # unicodedata) at every tfrun's start; a name is still resolved.
    code = ("from mesos_local.api.state_json import render_master_info as info; "
            "assert info('m', '127.0.0.1', 5050)['address']['ip'] == '127.0.0.1'")
    assert heavy(modules_after(code), ["encodings.idna", "stringprep", "unicodedata"]) == []
    from mesos_local.api.state_json import render_master_info
    assert render_master_info("m", "localhost", 5050)["pid"] == "master@127.0.0.1:5050"


# The modules of a run (tfrun, its launcher and embedded master): their
# imports at the top, run by importing them.
RUN_MODULES = ("tfmesos.cli.tfrun, tfmesos.core.launch, tfmesos.backends.sizing, "
               "tfmesos.backends.embedded, tfmesos.core.runtime, tfmesos.record.run_record, "
               "tfmesos.backends.warm_runner, mesos_local.master")


def test_the_modules_of_a_run_import_none_of_the_rare_paths():
    # tests/test_import_graph.py runs a whole tfrun for what its functions import
    assert heavy(modules_after("import %s" % RUN_MODULES), RARE_PATHS) == []


def test_checking_a_local_run_s_options_imports_none_of_the_master():
    # tfrun checks them before it starts its warm task interpreters: these
    # start while it imports the master, not after.
    code = ("from tfmesos.backends.sizing import check_local; "
            "from tfmesos.core.spec import Job; "
            "check_local([Job('worker', 2, cpus=0.1, mem=32)], {})")
    assert heavy(modules_after(code), ["mesos_local.master", "mesos_local.containerizer.cgroups",
                                       "mesos_local.api", "http.server", "http.client"]) == []


def test_an_address_is_looked_up_without_the_idna_codec():
    # socket.getaddrinfo encodes a str host with the idna codec (and its
    # stringprep, unicodedata); the driver's connection to an address and
    # the task's to its rendezvous give the host as bytes.
    code = ("import socket, threading, time; "
            "from tfmesos.mesos.http_transport import resolve; "
            "resolve('127.0.0.1', 5050, 5); "
            "from tfmesos.task.connection import Connection; from tfmesos.task.task_environ import TaskEnv; "
            "server = socket.create_server(('127.0.0.1', 0)); "
            "threading.Thread(target=lambda: server.accept()[0].close(), daemon=True).start(); "
            "env = TaskEnv(server.getsockname(), b'k', 't', '127.0.0.1', 0)\n"
            "try:\n    Connection(env)._handshake(time.monotonic() + 30)\n"
            "except Exception:\n    pass\n"
            "else:\n    raise AssertionError('a closed connection registered')\n"
            "server.close()")
    assert heavy(modules_after(code), ["encodings.idna", "stringprep", "unicodedata"]) == []


@pytest.mark.parametrize("host", ["127.0.0.1", "::1", "localhost", "mesos-master.example.com.",
                                  "a" * 63 + ".example"])
def test_a_plain_ascii_host_is_looked_up_as_bytes(host):
    from tfmesos.protocol.hostport import lookup_host
    found = lookup_host(host)
    assert isinstance(found, bytes), found
    assert found == host.encode("idna")


@pytest.mark.parametrize("host", ["a" * 64 + ".example", "a..b", ".a", "a" * 64,
                                  "bücher.example", ""])
def test_a_host_looked_up_as_bytes_is_what_the_idna_codec_makes_of_it(host):
    from tfmesos.protocol.hostport import lookup_host
    found = lookup_host(host)
    if isinstance(found, bytes):
        assert found == host.encode("idna")
    else:
        assert found == host   # the codec encodes or refuses it, as before


def test_the_dataclasses_of_a_run_compile_no_methods_of_their_own():
    # @dataclasses.dataclass compiles __eq__, __repr__ (frozen: __hash__)
    # anew for each class at each start; tfmesos' classes inherit them from
    # field_methods instead (@dataclasses.dataclass(eq=False, repr=False)).
    code = ("import %s, dataclasses, inspect; "
            "print(sorted('%%s.%%s' %% (m.__name__, c.__qualname__) "
            "for m in list(sys.modules.values()) if m.__name__.startswith('tfmesos') "
            "for _, c in inspect.getmembers(m, inspect.isclass) "
            "if c.__module__ == m.__name__ and dataclasses.is_dataclass(c) "
            "and {'__eq__', '__repr__', '__hash__'} & set(vars(c))))" % RUN_MODULES)
    result = subprocess.run([sys.executable, "-c", "import sys; " + code], capture_output=True,
                            text=True, timeout=60)
    assert result.returncode == 0, result.stderr
    assert result.stdout.strip() == "[]"
