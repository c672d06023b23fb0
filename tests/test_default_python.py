"""``tfrun --python``'s default (issue 35, item 1): the interpreter running
tfrun where the master's agents run on this machine, for this user (the
embedded master; a local master here), shipped and detached runs
included; ``python3`` from the agents' PATH for a shipped run anywhere
else (``cli.tfrun_python``, ``backends.local_agents``)."""

import sys

from fixtures_master import make_local_master, small_agent

from tfmesos.backends.local_agents import agents_here, listener_uids
from tfmesos.cli.tfrun_options import build_parser, read_options


def python_of(*argv):
    args = build_parser().parse_options(list(argv), None)
    return read_options(args, "python train.py").python


def test_without_a_master_here_a_shipped_run_keeps_python3_and_the_rest_this_one():
    # An address of another host, a zk:// master: nothing is asked of them.
    assert python_of("--ship", "-m", "10.0.0.9:5050") is None          # python3 on the agents
    assert python_of("--ship", "--detach", "-m", "zk://10.0.0.9:2181/mesos") is None
    assert python_of("-m", "10.0.0.9:5050") is None   # not shipped: this one (core.taskinfo)
    assert python_of("--ship", "-m", "10.0.0.9:5050", "--python", "/opt/py/bin/python") \
        == "/opt/py/bin/python"


def test_on_the_embedded_master_a_shipped_run_gets_this_interpreter():
    assert python_of("--ship", "-m", "local") == sys.executable
    assert python_of("--ship", "-m", "local", "--python", "/opt/py/bin/python") \
        == "/opt/py/bin/python"
    # An image runs its own python3, an environment its own, another user python3.
    assert python_of("--ship", "-m", "local", "-I", "tfmesos/tfmesos") is None
    assert python_of("--ship", "-m", "local", "--python-env", "https://example.com/e.tar.gz") \
        is None
    assert python_of("--ship", "-m", "local", "-u", "nobody") is None


def test_a_local_master_whose_agents_are_here_gives_this_interpreter(make_local_master):
    here = make_local_master()
    assert agents_here(here.url)
    assert python_of("--ship", "--detach", "-m", here.url) == sys.executable
    assert python_of("--ship", "-m", here.url, "--tensorboard", "/tmp/logs") == sys.executable
    # Agents that name another host (as --netns agents have addresses of
    # their own): python3 on the agents.
    elsewhere = make_local_master(agents=[small_agent(hostname="node1.invalid")])
    assert not agents_here(elsewhere.url)
    assert python_of("--ship", "--detach", "-m", elsewhere.url) is None
    # Nothing listens there: nothing to ask.
    stopped = make_local_master()
    url = stopped.url
    stopped.stop()
    assert not agents_here(url)


def test_who_listens_on_a_port_is_read_from_proc_net_tcp(tmp_path):
    table = tmp_path / "tcp"
    table.write_text(
        "  sl  local_address rem_address   st tx_queue rx_queue tr tm->when retrnsmt   uid\n"
        "   0: 0100007F:13BA 00000000:0000 0A 00000000:00000000 00:00000000 00000000  1000\n"
        "   1: 00000000:13BA 00000000:0000 0A 00000000:00000000 00:00000000 00000000     0\n"
        "   2: 0100007F:13BA 0100007F:9C40 01 00000000:00000000 00:00000000 00000000  1001\n"
        "   3: 0100007F:1F90 00000000:0000 0A 00000000:00000000 00:00000000 00000000  1002\n")
    # Listening on 5050 (0x13BA): uids 1000 and 0; an established one is no listener.
    assert listener_uids(5050, (str(table),)) == {1000, 0}
    assert listener_uids(5051, (str(table),)) == set()
    assert listener_uids(5050, (str(tmp_path / "none"),)) is None    # not Linux: unknown
