"""A task whose tfmesos speaks another rendezvous protocol than its
scheduler's: the scheduler's challenge names its protocol, a task of
another one tells an authentic challenge of that protocol from a forged
one, and says so in one line and exits at once with ``wire.MISMATCH_EXIT``,
which tfrun does not relaunch. Nothing of such a connection is used: a
forged or tampered challenge is the bad MAC it always was (retried)."""

import json
import os
import sys

import pytest
from tfrun_helpers import SMALL, run_tfrun

from tfmesos.core.task_ends import protocol_mismatch
from tfmesos.protocol import wire

SECRET = b"s" * 32
NONCE = b"n" * wire.NONCE_SIZE
OTHER = wire.PROTOCOL + 1
FIRST = wire.Context(wire.TO_TASK, NONCE, 0)   # where a challenge is


def challenge(protocol=OTHER, signed_as=OTHER, secret=SECRET, **fields):
    message = {"type": "challenge", "nonce": NONCE.hex(), **fields}
    if protocol is not None:
        message["protocol"] = protocol
    return wire.encode(secret, FIRST, message, signed_as)[4:]


def test_the_schedulers_challenge_names_its_protocol():
    frame = wire.Channel.for_scheduler(SECRET).challenge()[4:]
    assert wire.parse(frame[wire.MAC_SIZE:])["protocol"] == wire.PROTOCOL


def test_an_authentic_challenge_of_another_protocol_is_a_mismatch_naming_both():
    with pytest.raises(wire.ProtocolMismatch) as mismatch:
        wire.Channel.from_challenge(SECRET, challenge())
    assert (mismatch.value.scheduler, mismatch.value.task) == (OTHER, wire.PROTOCOL)
    assert str(mismatch.value) == (
        "the scheduler speaks rendezvous protocol %d and this task's tfmesos speaks %d: "
        "install the same tfmesos where the tasks run, or use --ship" % (OTHER, wire.PROTOCOL))


@pytest.mark.parametrize("frame", [
    challenge(secret=b"t" * 32),                             # another key: forged
    challenge(signed_as=wire.PROTOCOL),                      # its protocol changed on the way
    challenge(protocol=wire.PROTOCOL, signed_as=OTHER),      # this protocol, the MAC of another
    challenge(protocol="3", signed_as=3),                    # no protocol number: not checked as one
    challenge(protocol=True, signed_as=1),
    challenge(protocol=1 << 40, signed_as=1 << 40),
], ids=["other-key", "protocol-edited", "this-protocol-other-mac", "text", "bool", "huge"])
def test_a_challenge_that_is_not_authentic_stays_a_bad_mac_whatever_protocol_it_names(frame):
    with pytest.raises(wire.WireError, match="bad message authentication code") as refused:
        wire.Channel.from_challenge(SECRET, frame)
    assert not isinstance(refused.value, wire.ProtocolMismatch)


def test_a_challenge_naming_no_protocol_is_protocol_2s(monkeypatch):
    # What a scheduler before the field sends: this protocol's task takes it
    # as before; a task of a later protocol checks it as protocol 2's.
    old = challenge(protocol=None, signed_as=wire.UNNAMED_PROTOCOL)
    assert wire.PROTOCOL == wire.UNNAMED_PROTOCOL == 2
    assert wire.Channel.from_challenge(SECRET, old).nonce == NONCE
    monkeypatch.setattr(wire, "PROTOCOL", 3)
    monkeypatch.setattr(wire, "_LABEL", wire.label(3))
    with pytest.raises(wire.ProtocolMismatch, match="speaks rendezvous protocol 2 and this "
                                                    "task's tfmesos speaks 3"):
        wire.Channel.from_challenge(SECRET, old)
    with pytest.raises(wire.WireError, match="authentication"):
        wire.Channel.from_challenge(b"t" * 32, old)


def test_tfrun_reads_a_mismatch_from_the_tasks_exit_status_and_line():
    line = ("tfmesos task error: cannot register with the tfmesos scheduler at 127.0.0.1:1: the "
            "scheduler speaks rendezvous protocol 2 and this task's tfmesos speaks 3: install "
            "the same tfmesos where the tasks run, or use --ship")
    assert protocol_mismatch(wire.MISMATCH_EXIT, ["x", line]) == line.split(": ", 2)[2]
    assert protocol_mismatch(1, [line]) is None
    assert protocol_mismatch(wire.MISMATCH_EXIT, ["something else"]) is None


# The task entry of another tfmesos: its rendezvous protocol only differs.
OTHER_ENTRY = """\
import runpy
from tfmesos.protocol import wire
wire.PROTOCOL = %d
wire._LABEL = wire.label(%d)
runpy.run_module("tfmesos.task", run_name="__main__", alter_sys=True)
""" % (OTHER, OTHER)


@pytest.mark.integration
def test_a_task_of_another_protocol_fails_the_run_at_once_in_one_line(tmp_path):
    entry = tmp_path / "other_task.py"
    entry.write_text(OTHER_ENTRY)
    python = tmp_path / "python"   # (tfrun runs the task entry as PYTHON [-S] -m tfmesos.task)
    python.write_text('#!/bin/sh\ncase "$*" in *"-m tfmesos.task"*) exec %s -S %s;; esac\n'
                      'exec %s "$@"\n' % (sys.executable, entry, sys.executable))
    python.chmod(0o755)
    run_dir = tmp_path / "run"
    result = run_tfrun("-w", "1", "-s", "0", *SMALL, "--python", str(python),
                       "--run-dir", str(run_dir), "--", "true", timeout=300)
    assert result.returncode != 0
    # (then, as for any task that failed, the last lines it wrote: its own line)
    said = [line for line in result.stderr.splitlines()
            if line.startswith("tfrun: worker:0 cannot be launched")]
    assert len(said) == 1, result.stderr
    assert ("the scheduler speaks rendezvous protocol %d and this task's tfmesos speaks %d: "
            "install the same tfmesos where the tasks run, or use --ship"
            % (wire.PROTOCOL, OTHER)) in said[0], said[0]
    assert "retrying cannot help" in said[0] and "relaunching" not in result.stderr, \
        result.stderr
    with open(os.path.join(run_dir, "run.json"), encoding="utf-8") as handle:
        record = json.load(handle)
    [worker] = [task for task in record["tasks"] if task["name"] == "worker:0"]
    assert [attempt["exit_code"] for attempt in worker["attempts"]] == [wire.MISMATCH_EXIT]
