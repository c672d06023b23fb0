"""tfmesos runs / show / logs: the run history under the runs directory
(run directories written by hand, and real tfrun runs for --follow)."""

import dataclasses
import json
import os
import pwd
import re
import shutil
import stat
import subprocess
import sys
import time

import pytest
from local_users import nobody
from run_dirs import BASE, attempt, copy_format_1, write_run
from tfrun_helpers import REPO, start_tfrun

from tfmesos.cli.main import main
from tfmesos.record import liveness
from tfmesos.record.schema import Restart, Takeover

TFMESOS = [sys.executable, "-m", "tfmesos.cli.main"]


@pytest.fixture
def runs_dir(tmp_path, monkeypatch):
    root = tmp_path / "tfmesos-runs"
    root.mkdir()
    monkeypatch.setenv("TFMESOS_RUNS_DIR", str(root))
    return root


def tfmesos(capsys, *argv):
    """(exit code, stdout, stderr) of ``tfmesos ARGV`` in this process."""
    try:
        code = main(list(argv))
    except SystemExit as exc:   # usage errors
        code = exc.code
    captured = capsys.readouterr()
    return code, captured.out, captured.err


def test_runs_lists_the_most_recent_first_with_outcome_and_exit_code(runs_dir, capsys):
    write_run(runs_dir, "aaaa1111", start=0, took=2.5)
    write_run(runs_dir, "bbbb2222", name="train", status="failed", exit_code=3, start=60,
              took=95)
    write_run(runs_dir, "cccc3333", status="running", exit_code=None, start=120)
    (runs_dir / "not-a-run").mkdir()
    code, out, err = tfmesos(capsys, "runs")
    assert code == 0 and err == ""
    lines = out.splitlines()
    assert lines[0].split() == ["ID", "NAME", "MODE", "START", "DURATION", "OUTCOME", "EXIT",
                                "COMMAND"]
    assert [line.split()[0] for line in lines[1:]] == ["cccc3333", "bbbb2222", "aaaa1111"]
    assert re.match(r"^bbbb2222  train  replica  \d{4}-\d\d-\d\d \d\d:\d\d:\d\d  1m35s\s+"
                    r"failed\s+3\s+python train.py$", lines[2]), lines[2]
    assert lines[3].split()[-6:] == ["2.5", "s", "succeeded", "0", "python", "train.py"]
    assert lines[1].split()[-4:] == ["running", "-", "python", "train.py"]


def test_runs_shows_the_command_shortened_to_the_terminal(runs_dir, capsys, monkeypatch):
    long = "python train.py " + " ".join("--hosts%d {worker_hosts}" % i for i in range(20))
    write_run(runs_dir, "aaaa1111", name="train.py", command=long)
    write_run(runs_dir, "bbbb2222", name="echo", command="echo {job_name}", start=1)
    write_run(runs_dir, "cccc3333", name="tfmesos", command=None, start=2, mode="fine")
    monkeypatch.setenv("COLUMNS", "120")
    code, out, _ = tfmesos(capsys, "runs")
    lines = out.splitlines()
    at = lines[0].index("COMMAND")
    assert [line.split()[1] for line in lines[1:]] == ["tfmesos", "echo", "train.py"]
    assert [line[at:] for line in lines[1:3]] == ["-", "echo {job_name}"]
    assert len(lines[3]) == 120 and lines[3].endswith("...")
    assert long.startswith(lines[3][at:-3])
    monkeypatch.setenv("COLUMNS", "1000")
    assert tfmesos(capsys, "runs")[1].splitlines()[3][at:] == long


def test_runs_limit_and_an_empty_directory(runs_dir, capsys):
    # Notes go to stderr: `tfmesos runs | awk 'NR>1{print $1}'` read "(1" as a run id.
    code, out, err = tfmesos(capsys, "runs")
    assert code == 0 and out == "" and err == "no runs in %s\n" % runs_dir
    for number in range(3):
        write_run(runs_dir, "%08d" % number, start=number)
    code, out, err = tfmesos(capsys, "runs", "-n", "2")
    assert [line.split()[0] for line in out.splitlines()[1:]] == ["00000002", "00000001"]
    assert err == "(1 older runs in %s: --all shows them)\n" % runs_dir


def test_runs_decodes_only_the_runs_it_shows_in_list_runs_order(runs_dir, capsys, monkeypatch):
    # Decoding every record to show 20 of 500 was half of tfmesos runs' time.
    from tfmesos.record import history
    for number in range(6):
        write_run(runs_dir, "%08d" % number, start=number)
    write_run(runs_dir, "notimes0", start=3)
    data = json.loads((runs_dir / "tfrun-notimes0" / "run.json").read_text())
    data["timings"] = {"submitted": "not a time"}   # sorted as list_runs sorts it: last
    (runs_dir / "tfrun-notimes0" / "run.json").write_text(json.dumps(data))
    data = json.loads((runs_dir / "tfrun-00000004" / "run.json").read_text())
    data["tasks"] = 42   # the newest but one: damaged, so skipped
    (runs_dir / "tfrun-00000004" / "run.json").write_text(json.dumps(data))
    try:
        assert [run.run_id for run in history.list_runs(str(runs_dir))] == [
            "00000005", "00000003", "00000002", "00000001", "00000000", "notimes0"]
        decoded = []
        real = history.Run.decode.__func__
        monkeypatch.setattr(history.Run, "decode", classmethod(
            lambda cls, directory, found: decoded.append(os.path.basename(directory))
            or real(cls, directory, found)))
        code, out, err = tfmesos(capsys, "runs", "-n", "2")
        assert [line.split()[0] for line in out.splitlines()[1:3]] == ["00000005", "00000003"]
        assert decoded == ["tfrun-00000005", "tfrun-00000004", "tfrun-00000003"]
        assert err.splitlines()[-1] == "(4 older runs in %s: --all shows them)" % runs_dir
        decoded.clear()
        code, out, _ = tfmesos(capsys, "runs", "--all")
        assert [line.split()[0] for line in out.splitlines()[1:]] == [
            "00000005", "00000003", "00000002", "00000001", "00000000", "notimes0"]
        assert len(decoded) == 7
    finally:   # (the suite's schema check at its end)
        for name in ("tfrun-notimes0", "tfrun-00000004"):
            (runs_dir / name / "run.json").unlink()


def test_prune_keeps_the_most_recent_and_the_running(runs_dir, capsys):
    for number in range(4):
        write_run(runs_dir, "%08d" % number, start=number)
    write_run(runs_dir, "running0", status="running", exit_code=None, start=-10)
    code, out, _ = tfmesos(capsys, "runs", "--prune", "--keep", "2")
    assert code == 0
    assert out == "removed 2 runs from %s; kept 1 still running: tfrun-running0\n" % runs_dir
    assert sorted(os.listdir(runs_dir)) == ["tfrun-00000002", "tfrun-00000003",
                                            "tfrun-running0"]
    code, _, err = tfmesos(capsys, "runs", "--prune")
    assert code == 2 and "--prune needs --keep N" in err


def test_prune_keeps_a_run_with_its_outcome_not_yet_its_end_while_its_process_runs(
        runs_dir, capsys):
    # A cluster() whose task failed records "failed" at once, while its
    # block runs on (its end comes when the block ends).
    for run_id, scheduler in (("ending00", liveness.this_process()),
                              ("killed00", a_gone_process())):
        directory = write_run(runs_dir, run_id, status="failed", exit_code=1, start=-10,
                              scheduler=scheduler)
        path = os.path.join(directory, "run.json")
        with open(path, encoding="utf-8") as handle:
            record = json.load(handle)
        record["timings"]["finished"] = None
        with open(path, "w", encoding="utf-8") as handle:
            json.dump(record, handle)
    code, out, _ = tfmesos(capsys, "runs", "--prune", "--keep", "0")
    assert code == 0, out
    assert os.listdir(runs_dir) == ["tfrun-ending00"], out


def test_prune_removes_a_key_only_on_the_word_of_the_callers_own_record(runs_dir, capsys,
                                                                       tmp_path, monkeypatch):
    # In a shared runs directory another user planted a record that says
    # the caller's run (still going: its key in the keys directory) ended:
    # prune removed the key, and the run could not be attached again.
    other = nobody("giving a file to another user needs root")
    keys = tmp_path / "keys"
    keys.mkdir(mode=0o700)
    (keys / "cafe0123").write_text("00" * 32 + "\n")
    (keys / "cafe0123").chmod(0o600)
    monkeypatch.setenv("TFMESOS_KEYS_DIR", str(keys))
    runs_dir.chmod(0o1777)
    write_run(runs_dir, "cafe0123", name="innocent")   # it says: succeeded
    planted = runs_dir / "innocent-cafe0123"
    for path in (planted, planted / "run.json"):
        os.chown(path, other.pw_uid, other.pw_gid)
    code, out, err = tfmesos(capsys, "runs", "--prune", "--keep", "10")
    assert (code, err) == (0, "") and "keys" not in out, out
    assert (keys / "cafe0123").exists()
    for path in (planted, planted / "run.json"):   # the control: the caller's record
        os.chown(path, os.geteuid(), os.getegid())
    code, out, _ = tfmesos(capsys, "runs", "--prune", "--keep", "10")
    assert code == 0 and "removed the keys of 1 ended run" in out, out
    assert not (keys / "cafe0123").exists()


def a_gone_process():
    """The ``scheduler`` of a process that ran here and has ended."""
    child = subprocess.Popen(["true"])
    child.wait()
    return dataclasses.replace(liveness.this_process(), pid=child.pid, start_ticks=1)


def test_liveness_tells_a_gone_process_only_where_it_can():
    here = liveness.this_process()
    assert not liveness.gone(here) and not liveness.gone(None)
    assert liveness.gone(a_gone_process())
    # Another host, or another pid namespace: nothing can be told.
    assert not liveness.gone(dataclasses.replace(a_gone_process(), host=here.host + "-x"))
    assert not liveness.gone(dataclasses.replace(a_gone_process(), pid_namespace="pid:[1]"))


def test_a_running_run_whose_tfrun_is_gone_shows_gone_and_is_pruned(runs_dir, capsys):
    write_run(runs_dir, "gone0001", status="running", exit_code=None, start=0,
              scheduler=a_gone_process())
    write_run(runs_dir, "live0001", status="running", exit_code=None, start=1,
              scheduler=liveness.this_process())
    code, out, _ = tfmesos(capsys, "runs")
    assert code == 0 and re.search(r"gone0001 .* gone ", out) and re.search(r"live0001 .* "
                                                                               r"running ", out)
    code, out, _ = tfmesos(capsys, "runs", "--prune", "--keep", "0")
    assert code == 0 and os.listdir(runs_dir) == ["tfrun-live0001"]


def test_a_gone_runs_duration_ends_at_its_last_record_not_now(runs_dir, capsys):
    # A run whose tfrun was SIGKILLed 0.3 s in showed a duration that grew
    # with the clock (10m40s ten minutes later, in runs and show alike).
    directory = write_run(runs_dir, "gone0002", status="running", exit_code=None, start=0,
                          scheduler=a_gone_process())
    last = BASE.timestamp() + 12.5            # when its tfrun last wrote the record
    os.utime(os.path.join(directory, "run.json"), (last, last))
    code, out, _ = tfmesos(capsys, "runs")
    assert code == 0 and re.search(r"gone0002 .* 12\.5 s +gone ", out), out
    code, out, _ = tfmesos(capsys, "show", "gone0002")
    assert code == 0 and "took at least 12.5 s (its tfrun is gone)" in out, out


def failover_file(directory, run_id, timeout):
    """A failover.json of the caller's in ``directory``: ``timeout``
    seconds of failover timeout."""
    from tfmesos.core.identity import RunIdentity
    from tfmesos.core.jobs import Job
    from tfmesos.core.spec import RunSpec
    from tfmesos.core.spec_codec import spec_to_dict
    from tfmesos.record.takeover_files import FailoverFile, save_failover
    identity = RunIdentity(run_id=run_id, key=b"k" * 32, user="u", framework_id="fw-0000")
    spec = RunSpec(name="t", mode="replica", command="true", jobs=(Job("worker", 1),),
                   master="127.0.0.1:5050", failover_timeout=timeout)
    save_failover(directory, FailoverFile(identity.public(), spec_to_dict(spec), {}, directory))


def test_a_failover_run_past_its_failover_timeout_is_gone_not_left(runs_dir, capsys):
    # Mesos removed its framework when the timeout passed: "left to its
    # tasks" and "tfmesos attach takes it over" said so for good (found by a
    # review helper reading 43f6d24).
    directory = write_run(runs_dir, "1ef70002", status="running", exit_code=None, start=0,
                          scheduler=a_gone_process(), master="127.0.0.1:5050")
    failover_file(directory, "1ef70002", timeout=60)
    last = BASE.timestamp() + 4.5    # its record's last write: days before now
    os.utime(os.path.join(directory, "run.json"), (last, last))
    code, out, _ = tfmesos(capsys, "runs")
    assert code == 0 and re.search(r"1ef70002 .* gone ", out), out
    code, out, _ = tfmesos(capsys, "show", "1ef70002")
    assert code == 0 and "(its tfrun is gone)" in out and "attach" not in out, out


def test_a_failover_run_whose_tfrun_left_shows_it_left_the_run_to_its_tasks(runs_dir, capsys):
    # tfrun --failover, its terminal gone (SIGHUP: "detached: the tasks go
    # on without a scheduler"), or SIGKILLed: its tasks run on, yet tfmesos
    # runs and show said "gone", and tfmesos logs --follow said "run X is
    # over" while they ran (found by a review helper).
    directory = write_run(runs_dir, "1ef70001", status="running", exit_code=None, start=0,
                          scheduler=a_gone_process(), master="127.0.0.1:5050")
    failover_file(directory, "1ef70001", timeout=(time.time() - BASE.timestamp()) + 3600)
    last = BASE.timestamp() + 4.5
    os.utime(os.path.join(directory, "run.json"), (last, last))
    code, out, _ = tfmesos(capsys, "runs")
    assert code == 0 and re.search(r"1ef70001 .* 4\.5 s +left to its tasks ", out), out
    code, out, _ = tfmesos(capsys, "show", "1ef70001")
    assert code == 0 and "left to its tasks, exit code -" in out, out
    assert "took at least 4.5 s (its tfrun left the run to its tasks: tfmesos attach 1ef70001 " \
        "takes it over)" in out, out
    code, out, err = tfmesos(capsys, "logs", "1ef70001", "--follow")
    assert code == 0 and "is over" not in err, err
    assert err.endswith("tfmesos logs: run 1ef70001's tfrun left it to its tasks (--failover): "
                        "their output comes here again once tfmesos attach 1ef70001 takes the "
                        "run over; tfmesos logs 1ef70001 --master 127.0.0.1:5050 reads it from "
                        "their sandboxes meanwhile\n"), err


def test_a_gone_runs_duration_ends_at_the_last_output_it_wrote(runs_dir, capsys):
    # Its record was last written as its cluster came up: a run that went on
    # for seconds before its tfrun was killed showed 0.0 s (found by a
    # review helper); the output tfrun kept writing says it ran longer.
    directory = write_run(runs_dir, "gone0003", status="running", exit_code=None, start=0,
                          scheduler=a_gone_process())
    os.utime(os.path.join(directory, "run.json"), (BASE.timestamp() + 0.3,) * 2)
    log = os.path.join(directory, "worker.0.stdout")
    with open(log, "w") as handle:
        handle.write("step 1\n")
    os.utime(log, (BASE.timestamp() + 7.5,) * 2)
    os.symlink("/etc/passwd", os.path.join(directory, "worker.1.stdout"))   # not followed
    code, out, _ = tfmesos(capsys, "runs")
    assert code == 0 and re.search(r"gone0003 .* 7\.5 s +gone ", out), out


def test_prune_keeps_a_gone_run_whose_failover_json_is_nested_past_the_parsers_depth(
        runs_dir, capsys):
    # It ended tfmesos runs --prune in a RecursionError traceback.
    directory = write_run(runs_dir, "gone0002", status="running", exit_code=None, start=0,
                          scheduler=a_gone_process())
    with open(os.path.join(directory, "failover.json"), "w") as handle:
        handle.write("[" * 100000)
    os.chmod(os.path.join(directory, "failover.json"), 0o600)
    code, out, err = tfmesos(capsys, "runs", "--prune", "--keep", "0")
    assert code == 0 and out == "removed 0 runs from %s\n" % runs_dir
    assert err == "tfmesos runs: kept %s and its key: its failover.json cannot tell its " \
        "master (cannot read %s/failover.json: nested deeper than the JSON parser reads)\n" \
        % (directory, directory)


@pytest.mark.parametrize("plant", ["link", "fifo"])
def test_logs_read_only_a_regular_file_of_the_run_directory(runs_dir, capsys, tmp_path, plant):
    directory = write_run(runs_dir, "plant001")
    path = os.path.join(directory, "worker.0.stdout")
    if plant == "link":
        secret = tmp_path / "secret"
        secret.write_text("not for you\n")
        os.symlink(secret, path)
    else:
        os.mkfifo(path)   # opened blocking, it would wait for a writer for good
    code, out, err = tfmesos(capsys, "logs", "plant001")
    assert code == 1 and out == "" and len(err.splitlines()) == 1
    assert ("a symbolic link, not followed" if plant == "link" else "not a regular file") in err


@pytest.mark.parametrize("plant", ["huge", "fifo"])
def test_a_run_json_anyone_could_plant_is_read_bounded_and_never_waited_on(runs_dir, capsys,
                                                                          monkeypatch, plant):
    # A sparse run.json of gigabytes was read whole (tfmesos runs: 2 GB of
    # memory for 1 GB of file); one made a FIFO between the listing's check
    # and its open would have been waited on for good.
    from tfmesos.record import history, run_finding
    write_run(runs_dir, "good0001")
    planted = runs_dir / "x-bad00001"
    planted.mkdir()
    if plant == "huge":
        monkeypatch.setattr(history, "MAX_RECORD", 1 << 20)   # as 256 MB is, smaller
        with open(planted / "run.json", "wb") as handle:
            handle.truncate((1 << 20) + 1)
    else:
        os.mkfifo(planted / "run.json")
        # It became one since the listing's and the lookup's checks.
        monkeypatch.setattr(os.path, "isfile", lambda path: True)
        monkeypatch.setattr(run_finding, "_is_file", lambda path: True)
    code, out, err = tfmesos(capsys, "runs")
    assert (code, err) == (0, "") and "good0001" in out and "bad00001" not in out
    code, out, err = tfmesos(capsys, "show", str(planted))
    assert code == 1 and out == "" and len(err.splitlines()) == 1, err
    assert ("1 MB, over the 1 MB a run record holds at most" if plant == "huge"
            else "not a regular file") in err, err


def test_a_big_record_another_user_planted_is_not_parsed(runs_dir, capsys, monkeypatch):
    # Parsed, a planted '[[],[],...' of 128 MB took 3.4 GB in every lookup of
    # one's own runs in a runs directory shared with its writer.
    from tfmesos.record import history
    other = nobody("a file of another user's needs root")
    monkeypatch.setattr(history, "MAX_OTHERS_RECORD", 1 << 10)   # as 16 MB is, smaller
    write_run(runs_dir, "good0001")
    planted = runs_dir / "x-bad00001"
    planted.mkdir()
    text = "[" + "[]," * 1000 + "[]]"
    (planted / "run.json").write_text(text)
    os.chown(planted / "run.json", other.pw_uid, other.pw_gid)
    parsed = []
    monkeypatch.setattr(history.json_documents, "loads", lambda text, real=history.json_documents
                        .loads: parsed.append(len(text)) or real(text))
    code, out, err = tfmesos(capsys, "runs")
    assert (code, err) == (0, "") and "good0001" in out
    assert parsed and len(text) not in parsed, parsed     # its own record only
    code, out, err = tfmesos(capsys, "show", str(planted))
    assert code == 1 and "over the 0 MB read of another user's" in err, err


def test_runs_and_show_escape_what_a_planted_run_json_says(runs_dir, capsys):
    # tfmesos runs and show printed run.json's words raw: a record planted
    # in a shared runs directory drove the terminal (colours, a cleared
    # screen) and forged lines, where --master's listings escaped them.
    evil = "a\x00b\x1b[31mRED\x1b[0m\r\nFAKE LINE"
    directory = write_run(runs_dir, "evil0001", status="failed", exit_code=1,
                          command="python \x1b[2Jtrain.py", message=evil)
    path = os.path.join(directory, "run.json")
    with open(path, encoding="utf-8") as handle:
        data = json.load(handle)
    data["name"] = evil
    data["tasks"][0]["attempts"][0]["states"][-1]["source"] = "\x1b]0;title\x07"
    data["restarts"] = [{"restart": 1, "time": "2026-11-26T10:00:03.100Z", "cause": "failure",
                         "task": "worker:0", "message": "died\x1b[1A\rok", "delay": 1.0}]
    with open(path, "w", encoding="utf-8") as handle:
        json.dump(data, handle)
    for argv in (["runs"], ["show", "evil0001"]):
        code, out, err = tfmesos(capsys, *argv)
        assert (code, err) == (0, ""), err
        assert not re.search("[\x00-\x09\x0b-\x1f\x7f]", out), repr(out)
        assert "FAKE LINE" not in "".join(line[:9] for line in out.splitlines())
        assert "a\\x00b\\x1b[31mRED\\x1b[0m\\r\\nFAKE LINE" in out, out


def test_a_run_directory_the_caller_may_not_look_into_is_said_so(runs_dir, capsys, monkeypatch):
    # Another user's run directory (mode 0700) was "not a run directory (it
    # has no run.json)": the file is there, the caller may not see it.
    directory = write_run(runs_dir, "priv0001")
    real_stat = os.stat

    def stat_as_another_user(path, *args, **kwargs):
        if str(path).startswith(str(directory) + os.sep):
            raise PermissionError(13, "Permission denied")
        return real_stat(path, *args, **kwargs)
    monkeypatch.setattr(os, "stat", stat_as_another_user)
    for target in (str(directory), os.path.join(directory, "run.json")):
        code, out, err = tfmesos(capsys, "show", target)
        assert (code, out) == (1, ""), err
        assert err == "tfmesos: error: cannot read %s: Permission denied (a run directory of " \
            "another user?)\n" % os.path.join(directory, "run.json"), err


def test_logs_read_a_large_log_in_chunks_without_splitting_a_character(runs_dir, capsys,
                                                                       monkeypatch):
    from tfmesos.cli import runs
    monkeypatch.setattr(runs._Tail, "CHUNK", 3)   # every "é" (2 bytes) falls across one
    directory = write_run(runs_dir, "chunk001")
    with open(os.path.join(directory, "worker.0.stdout"), "w", encoding="utf-8") as handle:
        handle.write("éé\nééé\nlast")
    assert tfmesos(capsys, "logs", "chunk001") == (0, "éé\nééé\nlast\n", "")


def test_show_names_tasks_attempts_states_exit_codes_restarts_and_hints(runs_dir, capsys):
    tasks = {
        "ps:0": [attempt("ps:0", end=9.9, state="TASK_KILLED", source="stopped by tfrun",
                         exit_code=None)],
        "worker:0": [attempt("worker:0", end=3.0, state="TASK_FAILED", exit_code=1),
                     attempt("worker:0", number=2, restart=1, launched=5.0, running=5.1,
                             registered=5.2, end=9.0, state="TASK_FAILED", exit_code=1,
                             hint="a peer died: look at the first task that failed")]}
    restarts = [Restart(restart=1, time="2026-11-26T10:00:03.100Z", cause="failure",
                        task="worker:0", message="worker:0 exited with code 1", delay=2.0)]
    write_run(runs_dir, "dead0001", status="failed", exit_code=1, took=10, tasks=tasks,
              message="task worker:0 exited with code 1", restarts=restarts)
    path = runs_dir / "tfrun-dead0001" / "run.json"
    data = json.loads(path.read_text())
    data["outcome"]["hint"] = "MultiWorkerMirroredStrategy has no ps tasks: use -s 0"
    path.write_text(json.dumps(data))
    code, out, err = tfmesos(capsys, "show", "dead")
    assert code == 0 and err == ""
    assert out.splitlines()[0] == "run dead0001  tfrun (replica)  failed, exit code 1"
    assert "  outcome    task worker:0 exited with code 1\n" in out
    assert "  hint       MultiWorkerMirroredStrategy has no ps tasks: use -s 0\n" in out
    assert "  hint       worker:0 attempt 2: a peer died" in out
    rows = [line.split() for line in out.splitlines() if line.startswith(("ps:0", "worker:0"))]
    assert rows == [
        ["ps:0", "1", "0", "TASK_KILLED", "-", "stopped", "by", "tfrun", "127.0.0.1:31001",
         "+0.1", "s", "+9.9", "s"],
        ["worker:0", "1", "0", "TASK_FAILED", "1", "SOURCE_EXECUTOR", "127.0.0.1:31001",
         "+0.1", "s", "+3.0", "s"],
        ["worker:0", "2", "1", "TASK_FAILED", "1", "SOURCE_EXECUTOR", "127.0.0.1:31002",
         "+5.0", "s", "+9.0", "s"]]
    assert "restart 1 at +3.1 s (failure): worker:0 exited with code 1; back-off 2.0 s" in out


def test_show_says_how_the_run_ended_and_each_scheduler_takeover(runs_dir, capsys):
    takeovers = [Takeover(time="2026-11-26T10:00:04.500Z", scheduler_attempt=2,
                          how="tfmesos attach")]
    directory = write_run(runs_dir, "7a4e0002", status="failed", exit_code=5, took=10,
                          takeovers=takeovers, tasks={"worker:0": [attempt(
                              "worker:0", end=9.0, state="TASK_FAILED", exit_code=5)]})
    path = os.path.join(directory, "run.json")
    with open(path) as handle:
        data = json.load(handle)
    data["outcome"].update(task="worker:0", message="task worker:0 exited with code 5")
    with open(path, "w") as handle:
        json.dump(data, handle)
    code, out, _ = tfmesos(capsys, "show", "7a4e0002")
    assert code == 0
    assert out.splitlines()[0] == ("run 7a4e0002  tfrun (replica)  failed (exit 5, worker:0), "
                                   "exit code 5")
    assert "takeover at +4.5 s: scheduler attempt 2 (tfmesos attach)\n" in out
    code, out, _ = tfmesos(capsys, "runs")
    assert re.search(r"^7a4e0002 .* failed \(exit 5, worker:0\)\s+5\s+python train.py$", out,
                     re.M), out


def test_an_attempts_hint_the_outcome_repeats_is_shown_once(runs_dir, capsys):
    memory = "the task ran out of memory: give it more, e.g. tfrun -Mw 4096"
    tasks = {"worker:0": [
        attempt("worker:0", end=3.0, state="TASK_FAILED", exit_code=1,
                hint="Python module 'sklearn' is missing where the task runs"),
        attempt("worker:0", number=2, restart=1, launched=5.0, end=9.0, state="TASK_FAILED",
                exit_code=137, hint=memory)]}
    directory = write_run(runs_dir, "dead0002", status="failed", exit_code=137, tasks=tasks)
    path = os.path.join(directory, "run.json")
    with open(path) as handle:
        data = json.load(handle)
    data["outcome"].update(task="worker:0", hint=memory)
    with open(path, "w") as handle:
        json.dump(data, handle)
    code, out, _ = tfmesos(capsys, "show", "dead0002")
    assert code == 0
    assert [line.split(None, 1)[1] for line in out.splitlines() if line.startswith("  hint")] == [
        memory, "worker:0 attempt 1: Python module 'sklearn' is missing where the task runs"]


def test_a_version_1_run_reads_in_runs_show_and_logs(runs_dir, capsys):
    """tests/data/run-format1: what tfrun wrote before run.json had a schema."""
    copy_format_1(runs_dir)
    code, out, _ = tfmesos(capsys, "runs")
    assert code == 0 and out.splitlines()[1].split()[:3] == ["7f369b42", "tfrun", "replica"]
    header, line = out.splitlines()[:2]
    assert line[:header.index("COMMAND")].split()[-2:] == ["succeeded", "0"]
    assert line[header.index("COMMAND"):].startswith("python")
    code, out, _ = tfmesos(capsys, "show", "7f36")
    assert code == 0 and out.splitlines()[0] == "run 7f369b42  tfrun (replica)  succeeded, " \
                                                "exit code 0"
    rows = [line.split()[:5] for line in out.splitlines() if line.startswith("worker:")]
    assert rows == [["worker:0", "1", "0", "TASK_LOST", "0"],
                    ["worker:0", "2", "1", "TASK_FINISHED", "0"],
                    ["worker:1", "1", "0", "TASK_KILLED", "1"],
                    ["worker:1", "2", "1", "TASK_FINISHED", "0"]]
    assert "restart 1 at +3.7 s (failure): worker:1 exited with code 1; back-off 0.5 s" in out
    assert tfmesos(capsys, "logs", "7f36", "worker:1", "--attempt", "1", "--stderr") == (
        0, "ModuleNotFoundError: No module named 'sklearn'\n", "")


def test_run_accepts_a_path_and_its_run_json(runs_dir, capsys, tmp_path):
    directory = write_run(tmp_path / "elsewhere", "feed0001")
    for text in (directory, os.path.join(directory, "run.json")):
        code, out, _ = tfmesos(capsys, "show", text)
        assert code == 0 and out.startswith("run feed0001 ")


@pytest.mark.parametrize("argv, error", [
    (["show", "zzz"], "tfmesos: error: no run 'zzz' in %(root)s (tfmesos runs lists them)\n"),
    (["show", "ab"], "tfmesos: error: 'ab' matches 2 runs (tfrun-ab000002, tfrun-ab000001): "
                     "give more of the id, or the run directory\n"),
    (["logs", "ab000001", "worker:7"], "tfmesos: error: run ab000001 has no task worker:7; "
                                       "its tasks: worker:0\n"),
    (["show", "./nowhere"], "tfmesos: error: ./nowhere is not a run directory (it has no "
                            "run.json)\n"),
])
def test_unknown_or_ambiguous_runs_are_one_line(runs_dir, capsys, argv, error):
    write_run(runs_dir, "ab000001", start=0)
    write_run(runs_dir, "ab000002", start=1)
    code, out, err = tfmesos(capsys, *argv)
    assert code == 1 and out == "" and err == error % {"root": runs_dir}


def test_logs_prints_a_task_or_every_task_prefixed(runs_dir, capsys):
    directory = write_run(runs_dir, "logs0001", tasks={
        "worker:0": [attempt("worker:0", end=1), attempt("worker:0", number=2, end=2)],
        "worker:1": [attempt("worker:1", end=1)]})
    for name, text in (("worker.0.stdout", "first try\n"), ("worker.0.attempt2.stdout", "a\nb"),
                       ("worker.0.attempt2.stderr", "oops\n"), ("worker.1.stdout", "one\n")):
        with open(os.path.join(directory, name), "w") as handle:
            handle.write(text)
    assert tfmesos(capsys, "logs", "logs", "worker:0") == (0, "a\nb\n", "")
    assert tfmesos(capsys, "logs", "logs", "worker.0", "--stderr") == (0, "oops\n", "")
    assert tfmesos(capsys, "logs", "logs", "worker:0", "--attempt", "1")[1] == "first try\n"
    assert tfmesos(capsys, "logs", "logs")[1] == "[worker:0] a\n[worker:0] b\n[worker:1] one\n"


def test_logs_escapes_the_task_names_a_planted_record_gives(runs_dir, capsys):
    # The prefix was run.json's name as written: a title, a colour reached
    # the terminal (show, runs and the report escaped the same name).
    directory = write_run(runs_dir, "logs0002", tasks={
        "worker:0": [attempt("worker:0", end=1)], "worker:1": [attempt("worker:1", end=1)]})
    path = os.path.join(directory, "run.json")
    with open(path, encoding="utf-8") as handle:
        data = json.load(handle)
    data["tasks"][0]["name"] = "\x1b]0;PWNED\x07\x1b[31mworker:0"   # as another user wrote it
    with open(path, "w", encoding="utf-8") as handle:
        json.dump(data, handle)
    for log, text in (("worker.0.stdout", "one\n"), ("worker.1.stdout", "two\n")):
        with open(os.path.join(directory, log), "w") as handle:
            handle.write(text)
    code, out, _ = tfmesos(capsys, "logs", "logs0002")
    assert (code, out) == (0, "[\\x1b]0;PWNED\\x07\\x1b[31mworker:0] one\n[worker:1] two\n")


def test_logs_takes_its_options_before_between_and_after_run_and_tasks(tmp_path, capsys):
    # Issue 35, item 2: "logs RUN --master M worker:0" (the README's order) was
    # "worker:0 is not an option: put the command after '--'".
    root = tmp_path / "elsewhere"
    directory = write_run(root, "order001", tasks={
        "worker:0": [attempt("worker:0", end=1)], "worker:1": [attempt("worker:1", end=1)]})
    for name in ("worker.0.stderr", "worker.1.stderr"):
        with open(os.path.join(directory, name), "w") as handle:
            handle.write("from %s\n" % name.split(".")[1])
    where = ["--runs-dir", str(root)]
    expected = (0, "[worker:0] from 0\n[worker:1] from 1\n", "")
    for argv in ([*where, "--stderr", "order", "worker:0", "worker:1"],
                 ["order", *where, "worker:0", "--stderr", "worker:1"],
                 ["order", "worker:0", *where, "worker:1", "--stderr"],
                 ["order", "--stderr", "worker:0", "worker:1", *where],
                 ["order", *where, "--stderr", "--", "worker:0", "worker:1"]):
        assert tfmesos(capsys, "logs", *argv) == expected, argv


def test_logs_of_a_fine_grained_run_say_there_are_none(runs_dir, capsys):
    directory = write_run(runs_dir, "fine0001")
    path = os.path.join(directory, "run.json")
    with open(path) as handle:
        data = json.load(handle)
    data["mode"] = "fine"
    data["tasks"][0]["attempts"][0]["logs"] = None
    with open(path, "w") as handle:
        json.dump(data, handle)
    code, _, err = tfmesos(capsys, "logs", "fine0001")
    assert code == 1
    assert err == "tfmesos: error: run fine0001 has no stdout log: a fine-grained run keeps " \
                  "no task output\n"


def wait_for(predicate, timeout=60, what="it"):
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if predicate():
            return
        time.sleep(0.1)
    raise AssertionError("%s did not happen within %d s" % (what, timeout))


def test_logs_follow_prints_while_the_run_goes_and_ends_with_it(tmp_path):
    run_dir = tmp_path / "run"
    cmd = "for i in 1 2 3 4; do echo line $i; sleep 0.5; done"
    with start_tfrun("-w", "1", "-s", "0", "-Cw", "0.1", "-Mw", "64", "--run-dir",
                     str(run_dir), "--", cmd) as tfrun:
        wait_for(lambda: (run_dir / "run.json").exists(), what="run.json")
        # Two lines there already: the follower's first write holds both.
        log = run_dir / "worker.0.stdout"
        wait_for(lambda: log.exists() and "line 2\n" in log.read_text(), what="line 2")
        follower = subprocess.Popen(TFMESOS + ["logs", str(run_dir), "worker:0", "--follow"],
                                    cwd=REPO, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                                    text=True)
        try:
            first = follower.stdout.readline()   # before the run is over
            assert first == "line 1\n" and tfrun.poll() is None
            # The rest from the same file object: communicate() reads the pipe
            # itself, and what readline's buffer already held ("line 2", when
            # both came in one write, on a loaded machine) was lost.
            out = follower.stdout.read()
            err = follower.stderr.read()
            follower.wait(60)
        finally:
            if follower.poll() is None:
                follower.kill()
                follower.wait()
        assert tfrun.wait(60) == 0
    assert follower.returncode == 0 and err == ""
    assert first + out == "line 1\nline 2\nline 3\nline 4\n"


def test_show_of_a_running_task_says_running_and_for_how_long(runs_dir, capsys):
    """Its last state is TASK_RUNNING: it has not ended (it said ``ENDED
    +0.2 s``, the time of that state); one whose run ended without its end
    (a tfrun gone) has no end to show."""
    import datetime
    from io import StringIO

    from tfmesos.cli.run_show import show_run
    from tfmesos.record.history import Run
    tasks = {"ps:0": [attempt("ps:0", launched=0.1, running=0.2)],
             "worker:0": [attempt("worker:0", end=3.0, state="TASK_FAILED", exit_code=1),
                          attempt("worker:0", number=2, launched=5.0, running=5.3)]}
    directory = write_run(runs_dir, "7a4e0003", status="running", exit_code=None, tasks=tasks)
    out = StringIO()
    show_run(Run.load(directory), out, now=BASE + datetime.timedelta(seconds=12.6))
    rows = [line for line in out.getvalue().splitlines()
            if line.startswith(("ps:0", "worker:0"))]
    assert [row.split()[:4] for row in rows] == [["ps:0", "1", "0", "TASK_RUNNING"],
                                                 ["worker:0", "1", "0", "TASK_FAILED"],
                                                 ["worker:0", "2", "0", "TASK_RUNNING"]]
    assert [row.split("  ")[-1] for row in rows] == [
        "running (12.5 s so far)", "+3.0 s", "running (7.6 s so far)"]
    # Its "started" line too ("took 12.6 s" read as finished).
    assert "  started    " in out.getvalue() and "took" not in out.getvalue()
    assert "  running for 12.6 s so far  (first offer" in out.getvalue()
    code, shown, _ = tfmesos(capsys, "show", "7a4e0003")
    assert code == 0 and "+0.2 s" not in shown and shown.count(" so far)") == 2, shown
    # Its run over, its end unknown: no end, not "running".
    data = json.loads(open(os.path.join(directory, "run.json")).read())
    data["outcome"].update(status="interrupted", exit_code=130)
    data["timings"]["finished"] = data["timings"]["submitted"]
    with open(os.path.join(directory, "run.json"), "w") as handle:
        json.dump(data, handle)
    code, shown, _ = tfmesos(capsys, "show", "7a4e0003")
    assert code == 0 and "so far" not in shown and "  took 0.0 s  " in shown
    assert "training" not in shown       # TensorFlow's: said by nothing
    data.update(framework="torch", elastic="1:2")
    with open(os.path.join(directory, "run.json"), "w") as handle:
        json.dump(data, handle)
    code, shown, _ = tfmesos(capsys, "show", "7a4e0003")
    assert code == 0 and "\n  training   torch, elastic 1:2 (tfrun --torch-elastic)\n" in shown, shown
    assert [line.split()[-1] for line in shown.splitlines() if line.startswith("ps:0")] == ["-"]


def test_a_lookup_decodes_only_the_runs_it_may_name(runs_dir, capsys, monkeypatch):
    # Every run.json is parsed, but only those whose id or directory name
    # starts with what was given are decoded by the schema: a lookup among
    # 500 runs took as long as decoding all 500 (1.5 s) before.
    for index in range(30):
        write_run(runs_dir, "%08x" % (0xc0de0000 + index), start=index)
    from tfmesos.record import history
    decoded = []
    real = history.read_run_file
    monkeypatch.setattr(history, "read_run_file",
                        lambda data: decoded.append(data["run_id"]) or real(data))
    code, out, _ = tfmesos(capsys, "show", "c0de0011")
    assert code == 0 and "c0de0011" in out
    assert decoded == ["c0de0011"]
    decoded.clear()   # an ambiguous prefix decodes its matches, and says so as before
    code, _, err = tfmesos(capsys, "show", "c0de001")
    assert code == 1 and "'c0de001' matches 14 runs (tfrun-c0de001d, tfrun-c0de001c" in err
    assert sorted(decoded) == ["c0de%04x" % i for i in range(16, 30)]


def test_a_run_id_the_directory_name_does_not_hold_is_still_found(runs_dir, capsys):
    write_run(runs_dir, "feed0001")
    os.rename(runs_dir / "tfrun-feed0001", runs_dir / "renamed")
    code, out, _ = tfmesos(capsys, "show", "feed")
    assert code == 0 and "feed0001" in out
    code, out, _ = tfmesos(capsys, "show", "renam")
    assert code == 0 and "feed0001" in out


@pytest.mark.parametrize("content", ["[" * 100000 + "]" * 100000,
                                     '{"run_id": "ab000009", "tasks": ' + "[" * 100000],
                         ids=["nested", "unclosed"])
def test_a_run_json_nested_past_the_parsers_depth_is_skipped_not_a_traceback(
        runs_dir, capsys, content):
    # Anyone who can write in a shared runs directory can plant one; it
    # made tfmesos runs, show, logs and prune end in a RecursionError.
    write_run(runs_dir, "ab000001")
    (runs_dir / "planted").mkdir()
    (runs_dir / "planted" / "run.json").write_text(content)
    code, out, err = tfmesos(capsys, "runs")
    assert code == 0 and "ab000001" in out and "planted" not in out and err == ""
    code, out, err = tfmesos(capsys, "show", "ab")
    assert code == 0 and "ab000001" in out and err == ""
    code, out, err = tfmesos(capsys, "runs", "--prune", "--keep", "0")
    assert code == 0 and "removed 1 run" in out and err == ""


def test_a_real_run_s_record_is_found_by_its_id_and_decoded_as_the_checked_reading_does(
        tmp_path, monkeypatch):
    """Where the writer (tfrun's RunRecord) meets the readers: a real run's
    run.json, with a task's usage and metrics, found by a prefix of its id
    (find_run's look at the JSON before decoding) and read by the fast
    decoders exactly as the checked reading reads it."""
    from tfmesos.record import record_codec
    from tfmesos.record.schema import RunFile
    runs = tmp_path / "runs"
    monkeypatch.setenv("TFMESOS_RUNS_DIR", str(runs))
    code = "import tfmesos; [tfmesos.log_metrics(step=s, loss=1.0 / (s + 1)) for s in range(5)]"
    with start_tfrun("-q", "-w", "1", "-s", "0", "-Cw", "0.1", "-Mw", "128", "--",
                     sys.executable, "-c", code,
                     env=dict(os.environ, MESOS_MASTER="", TFMESOS_RUNS_DIR=str(runs))) as tfrun:
        assert tfrun.wait(120) == 0, tfrun.stderr.read()
    [directory] = os.listdir(runs)
    with open(runs / directory / "run.json", encoding="utf-8") as handle:
        data = json.load(handle)
    assert data["metrics"] and data["tasks"][0]["attempts"][0]["usage"]
    fast = record_codec._record_decoder(RunFile)(data)
    assert repr(fast.to_dict()) == repr(RunFile._checked(data, "run.json").to_dict())
    shown = subprocess.run(TFMESOS + ["show", data["run_id"][:5]], capture_output=True,
                           text=True, timeout=60, env=dict(os.environ, TFMESOS_RUNS_DIR=str(runs)))
    assert shown.returncode == 0 and data["run_id"] in shown.stdout, shown.stderr


def _give_to(other, *paths):
    for path in paths:
        os.chown(path, other.pw_uid, other.pw_gid)


def test_prune_counts_and_removes_only_the_callers_runs(runs_dir, capsys):
    # Another user planted three records dated in the future in a shared
    # runs directory: --prune --keep 3 kept them as "the most recent" and
    # removed both of the caller's runs.
    other = nobody("giving a file to another user needs root")
    runs_dir.chmod(0o1777)
    for number in range(2):
        write_run(runs_dir, "0000000%d" % number, start=number)
    for number in range(3):
        planted = write_run(runs_dir, "fff0000%d" % number, name="future",
                            start=10 ** 8 + number)
        _give_to(other, planted, os.path.join(planted, "run.json"))
    code, out, err = tfmesos(capsys, "runs", "--prune", "--keep", "3")
    assert (code, err) == (0, "") and out == "removed 0 runs from %s\n" % runs_dir, out
    assert sorted(os.listdir(runs_dir)) == ["future-fff00000", "future-fff00001",
                                            "future-fff00002", "tfrun-00000000",
                                            "tfrun-00000001"]
    code, out, _ = tfmesos(capsys, "runs", "--prune", "--keep", "1")
    assert code == 0 and out == "removed 1 run from %s\n" % runs_dir, out
    assert "tfrun-00000000" not in os.listdir(runs_dir)
    assert len(os.listdir(runs_dir)) == 4


def test_a_planted_copy_of_a_run_id_does_not_hide_the_callers_run(runs_dir, capsys):
    # Another user's copy of the caller's run id in a shared runs
    # directory made `show ID` "match 2 runs: give more of the id", which
    # no more of the id could settle.
    other = nobody("giving a file to another user needs root")
    runs_dir.chmod(0o1777)
    write_run(runs_dir, "37bffcd2", name="echo")
    planted = write_run(runs_dir, "37bffcd2", name="zz", status="failed", exit_code=1)
    _give_to(other, planted, os.path.join(planted, "run.json"))
    for text in ("37bffcd2", "37bf"):
        code, out, err = tfmesos(capsys, "show", text)
        assert (code, err) == (0, "") and out.startswith("run 37bffcd2  echo ("), (text, out, err)
        assert "succeeded" in out.splitlines()[0]
    _give_to(pwd.getpwuid(os.geteuid()), planted, os.path.join(planted, "run.json"))
    code, out, err = tfmesos(capsys, "show", "37bffcd2")
    assert code == 1 and err == ("tfmesos: error: '37bffcd2' is the id of 2 runs (zz-37bffcd2, "
                                 "echo-37bffcd2): give the run directory of the one meant\n"), err


def test_errors_escape_the_names_a_planted_record_gives(runs_dir, capsys):
    # An ambiguous id listed planted directory names raw, and an unknown
    # task listed the task names of run.json raw: both drove the terminal.
    write_run(runs_dir, "37bffcd2", name="echo")
    planted = write_run(runs_dir, "37bf0000", name="x\x1b]0;PWNED\x07\x1b[31mFAKE")
    path = os.path.join(planted, "run.json")
    with open(path, encoding="utf-8") as handle:
        data = json.load(handle)
    data["tasks"][0]["name"] = "worker:0\x1b[2J\x1b[32mrm -rf ~ done"
    with open(path, "w", encoding="utf-8") as handle:
        json.dump(data, handle)
    code, _, err = tfmesos(capsys, "show", "37bf")
    assert code == 1 and "x\\x1b]0;PWNED\\x07\\x1b[31mFAKE-37bf0000" in err, err
    code, _, err = tfmesos(capsys, "logs", "37bf0000", "worker:9")
    assert code == 1 and "worker:0\\x1b[2J\\x1b[32mrm -rf ~ done" in err, err
    for text in (err, tfmesos(capsys, "show", "37bf")[2]):
        assert not re.search("[\x00-\x09\x0b-\x1f\x7f]", text), repr(text)


def test_runs_holds_one_record_at_a_time_however_many_it_reads(runs_dir, capsys):
    # recent_runs held every parsed run.json while it sorted them: memory
    # grew as the sum of the files (three planted 100 MB files: 1.45 GB).
    import tracemalloc

    from tfmesos.record.history import recent_runs
    padding = [0] * 400_000
    for number in range(8):
        directory = write_run(runs_dir, "0000000%d" % number, start=number)
        path = os.path.join(directory, "run.json")
        with open(path, encoding="utf-8") as handle:
            data = json.load(handle)
        data["padding"] = padding
        with open(path, "w", encoding="utf-8") as handle:
            json.dump(data, handle)
    tracemalloc.start()
    try:
        with open(path, encoding="utf-8") as handle:   # one record parsed: the measure
            json.loads(handle.read())
        one = tracemalloc.get_traced_memory()[1]
        tracemalloc.reset_peak()
        shown, older, _ = recent_runs(str(runs_dir), 1)
        peak = tracemalloc.get_traced_memory()[1]
    finally:
        tracemalloc.stop()
        for name in os.listdir(runs_dir):   # padded past the schema, which conftest checks
            shutil.rmtree(os.path.join(runs_dir, name))
    assert [run.run_id for run in shown] == ["00000007"] and older == 7
    assert peak < 3 * one, (peak, one)


def replaced_after_listing(monkeypatch, runs_dir, directory, status, gone=()):
    """prune's listing, after which ``directory``'s record becomes another
    run's (``status``) and the directories ``gone`` are removed (by
    another prune)."""
    from tfmesos.record import pruning
    real = pruning.list_runs

    def listed_then_changed(root):
        runs = real(root)
        write_run(runs_dir, "other000", name="tfrun", status=status, start=5,
                  exit_code=None if status == "running" else 0)
        os.replace(runs_dir / "tfrun-other000" / "run.json", runs_dir / directory / "run.json")
        shutil.rmtree(runs_dir / "tfrun-other000")
        for name in gone:
            shutil.rmtree(runs_dir / name)
        return runs
    monkeypatch.setattr(pruning, "list_runs", listed_then_changed)


def test_prune_reads_a_record_again_before_it_removes_its_directory(runs_dir, capsys,
                                                                    monkeypatch):
    # A run that began in a directory after prune listed it (tfrun --run-dir
    # reusing an ended run's), or a directory another prune removed
    # meanwhile: the live run's record and logs were removed; the other was
    # "left ...: No such file or directory", exit 1 (found by a review helper).
    for number in range(3):
        write_run(runs_dir, "%08d" % number, start=number)
    replaced_after_listing(monkeypatch, runs_dir, "tfrun-00000001", "running",
                           gone=["tfrun-00000000"])
    code, out, err = tfmesos(capsys, "runs", "--prune", "--keep", "0")
    assert (code, err) == (0, "")
    assert out == "removed 1 run from %s; kept 1 still running: tfrun-00000001\n" % runs_dir
    assert sorted(os.listdir(runs_dir)) == ["tfrun-00000001"]


def test_runs_lists_a_run_once_not_again_through_a_link(runs_dir, capsys):
    # Another user's link to a run in a shared runs directory listed it twice.
    write_run(runs_dir, "aaaa1111")
    os.symlink(runs_dir / "tfrun-aaaa1111", runs_dir / "evil-link")
    code, out, _ = tfmesos(capsys, "runs")
    assert [line.split()[0] for line in out.splitlines()[1:]] == ["aaaa1111"]
    os.unlink(runs_dir / "evil-link")


def test_a_run_only_linked_into_the_runs_directory_is_still_listed_and_found(runs_dir,
                                                                               capsys, tmp_path):
    # 87eae59 hid a run moved to another disk and linked back: not listed,
    # and "no run ..." for show (found by a review helper).
    elsewhere = tmp_path / "elsewhere"
    elsewhere.mkdir()
    write_run(elsewhere, "bbbb2222")
    write_run(runs_dir, "aaaa1111", start=1)
    os.symlink(elsewhere / "tfrun-bbbb2222", runs_dir / "moved")
    code, out, _ = tfmesos(capsys, "runs")
    assert [line.split()[0] for line in out.splitlines()[1:]] == ["aaaa1111", "bbbb2222"]
    code, out, err = tfmesos(capsys, "show", "bbbb2222")
    assert code == 0 and "bbbb2222" in out, err
    os.unlink(runs_dir / "moved")


def test_a_directory_whose_record_became_an_ended_run_is_left_not_called_running(runs_dir,
                                                                                  capsys,
                                                                                  monkeypatch):
    # A run that began and ended in a listed directory meanwhile was listed
    # as "kept ... still running" (found by a review helper).
    for number in range(2):
        write_run(runs_dir, "%08d" % number, start=number)
    replaced_after_listing(monkeypatch, runs_dir, "tfrun-00000001", "succeeded")
    code, out, err = tfmesos(capsys, "runs", "--prune", "--keep", "0")
    assert (code, err) == (0, "")
    assert out == "removed 1 run from %s\n" % runs_dir      # the other run: not this prune's
    assert sorted(os.listdir(runs_dir)) == ["tfrun-00000001"]


def test_a_run_json_linked_to_proc_kmsg_is_no_run_record_and_never_read(runs_dir, capsys):
    # Planted by another user in a shared runs directory, a run.json linked
    # to /proc/kmsg (a regular file there, of size 0, that reads None when
    # opened non-blocking) ended runs, runs --prune and show in a
    # traceback (TypeError: object of type 'NoneType' has no len()); read,
    # it would have taken the kernel's log from its reader.
    other = nobody("planting as another user needs root")
    try:
        if not stat.S_ISREG(os.stat("/proc/kmsg").st_mode):
            pytest.skip("/proc/kmsg is no regular file here")
    except OSError:
        pytest.skip("no /proc/kmsg here")
    runs_dir.chmod(0o1777)
    write_run(runs_dir, "good0001")
    planted = runs_dir / "x-kmsg0001"
    planted.mkdir()
    os.symlink("/proc/kmsg", planted / "run.json")
    _give_to(other, planted)
    os.lchown(planted / "run.json", other.pw_uid, other.pw_gid)
    try:
        code, out, err = tfmesos(capsys, "runs")
        assert (code, err) == (0, "") and "good0001" in out and "kmsg0001" not in out, err
        code, out, err = tfmesos(capsys, "show", str(planted))
        assert (code, out) == (1, "") and err == (
            "tfmesos: error: %s/run.json is not a run record: it is empty\n" % planted), err
        code, out, err = tfmesos(capsys, "runs", "--prune", "--keep", "0")
        assert (code, err) == (0, "") and out == "removed 1 run from %s\n" % runs_dir, out
        assert os.listdir(runs_dir) == ["x-kmsg0001"]
    finally:   # (the session's check of every run.json left would read it)
        os.unlink(planted / "run.json")


def test_a_run_record_with_nothing_to_read_yet_is_no_run_record(runs_dir, capsys,
                                                                monkeypatch):
    # What /proc/kmsg reads when the kernel logged nothing new (None from a
    # non-blocking read), here from a pipe whose writer wrote nothing:
    # history.parse ended in a TypeError.
    from tfmesos.record import history
    write_run(runs_dir, "good0001")
    planted = write_run(runs_dir, "none0001")
    reader, writer = os.pipe()
    os.set_blocking(reader, False)
    real = history.open_regular

    def opened(path, flags=0):
        if path.startswith(planted):
            return os.fdopen(os.dup(reader), "rb")
        return real(path, flags)

    monkeypatch.setattr(history, "open_regular", opened)
    try:
        code, out, err = tfmesos(capsys, "runs")
        assert (code, err) == (0, "") and "good0001" in out and "none0001" not in out, err
        code, out, err = tfmesos(capsys, "show", planted)
        assert code == 1 and out == "" and len(err.splitlines()) == 1, err
        assert "run.json is not a run record" in err, err
        # (Refused for its size, 0, before it is read; a read of None alike.)
        with os.fdopen(os.dup(reader), "rb") as handle, pytest.raises(
                history.HistoryError, match="^x is not a run record: it has nothing to read"):
            history._read_now(handle, 10, "x")
    finally:
        os.close(reader)
        os.close(writer)


def test_a_record_is_parsed_again_only_once_its_run_json_changed(tmp_path, monkeypatch):
    # tfmesos logs --follow reads it five times a second: a record of 802
    # attempts (1 MB) cost 5 s of CPU in 20 s of following, parsed each time.
    from tfmesos.record import history
    directory = write_run(tmp_path, "a1b2c3d4", status="running")
    parsed = []
    real = history.parse
    monkeypatch.setattr(history, "parse", lambda path: (parsed.append(path), real(path))[1])
    run = history.Run.load(directory)
    for _ in range(5):
        run = run.reload()
    assert len(parsed) == 2 and run.running   # the load, then the first reload
    write_run(tmp_path, "a1b2c3d4", status="failed", exit_code=1, took=9.0)
    assert not run.reload().running and len(parsed) == 3
