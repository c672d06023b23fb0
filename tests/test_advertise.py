"""The address tasks reach tfmesos at: never loopback for a master on
another host (its tasks run elsewhere). No packet leaves this machine: the
remote master's address is only looked at, never contacted."""

import pytest

from tfmesos.backends import advertise
from tfmesos.core import launch
from tfmesos.core.spec import Job, RunSpec
from tfmesos.exceptions import TFMesosError

REMOTE = "http://192.0.2.10:5050"   # TEST-NET-1: documentation only, never routed


@pytest.mark.parametrize("explicit", ["127.0.0.1", "localhost", "127.0.1.1", "::1"])
def test_loopback_for_a_remote_master_is_refused(explicit):
    with pytest.raises(TFMesosError, match="cannot reach tfmesos at %s, a loopback address, "
                                           "while the Mesos master 192.0.2.10 is on another "
                                           "host: pass --advertise-address" % explicit):
        advertise.advertise_address(explicit, REMOTE, {})


def test_environment_setting_is_checked_too():
    with pytest.raises(TFMesosError, match="loopback"):
        advertise.advertise_address(None, REMOTE, {"TFMESOS_ADVERTISE_ADDRESS": "127.0.0.1"})


def test_reachable_or_local_choices_pass():
    assert advertise.advertise_address("198.51.100.7", REMOTE, {}) == "198.51.100.7"
    assert advertise.advertise_address(None, "http://127.0.0.1:5050", {}) == "127.0.0.1"
    assert advertise.advertise_address("localhost", "http://localhost:5050", {}) == "localhost"
    assert advertise.advertise_address("::1", "http://[::1]:5050", {}) == "::1"


def test_a_run_with_a_remote_master_and_a_loopback_address_never_starts(monkeypatch):
    def no_driver(*args, **kwargs):
        raise AssertionError("the driver must not be started")
    monkeypatch.setattr(launch, "MesosSchedulerDriver", no_driver)
    run = launch.ClusterRun(RunSpec(jobs=[Job("worker")], master="192.0.2.10:5050",
                                    advertise_address="127.0.0.1"), environ={})
    with pytest.raises(TFMesosError, match="pass --advertise-address"):
        run.start()
    assert run.phase == "stopped"


def test_tasks_reach_an_ipv6_advertise_address():
    run = launch.ClusterRun(RunSpec(jobs=[Job("worker", cpus=0.1, mem=64)], launch_timeout=60,
                                    mode="replica", command="true", master="local",
                                    advertise_address="::1"), environ={})
    try:
        run.start()
        spec = run.wait_ready()
        assert run.wait_finished() == 0
        assert run.rendezvous.port and spec["worker"][0].startswith("127.0.0.1:")
    finally:
        run.stop()


def test_an_unresolvable_master_names_the_fix():
    with pytest.raises(TFMesosError, match="host name 'no-such-host.invalid' does not resolve "
                                           ".*: fix the master address"):
        advertise.advertise_address(None, "http://no-such-host.invalid:5050", {})
