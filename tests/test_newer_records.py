"""Run records a newer tfmesos wrote (a schema_version this one does not
read): named by id they are refused with the reason, as given by path,
and ``tfmesos runs`` says how many it leaves out and why."""

import json

import pytest
from run_dirs import write_run

from tfmesos.cli.main import main
from tfmesos.record.schema import SCHEMA_VERSION

NEWER = SCHEMA_VERSION + 1
REASON = "schema_version %d is newer than this tfmesos reads (%d)" % (NEWER, SCHEMA_VERSION)


@pytest.fixture
def runs_dir(tmp_path, monkeypatch):
    root = tmp_path / "tfmesos-runs"
    root.mkdir()
    monkeypatch.setenv("TFMESOS_RUNS_DIR", str(root))
    yield root
    for record in root.glob("*/run.json"):   # (the suite checks the run.json files it leaves)
        if json.loads(record.read_text()).get("schema_version") != SCHEMA_VERSION:
            record.unlink()


def newer_run(root, run_id, start):
    """A valid run directory whose run.json says the next schema_version."""
    directory = write_run(root, run_id, start=start)
    path = "%s/run.json" % directory
    with open(path, encoding="utf-8") as handle:
        data = json.load(handle)
    data["schema_version"] = NEWER
    with open(path, "w", encoding="utf-8") as handle:
        json.dump(data, handle)
    return directory


def tfmesos(capsys, *argv):
    code = main(list(argv))
    captured = capsys.readouterr()
    return code, captured.out, captured.err


@pytest.mark.parametrize("command", ["show", "logs", "report"])
def test_a_newer_record_named_by_its_id_says_why_it_is_not_read(runs_dir, capsys, command):
    write_run(runs_dir, "11112222", start=0)
    directory = newer_run(runs_dir, "725cb590", start=60)
    for given in ("725cb590", "725c", directory):
        code, out, err = tfmesos(capsys, command, given)
        assert code == 1 and out == ""
        assert err == "tfmesos: error: %s/run.json is not a run record: %s\n" % (
            directory, REASON), (given, err)


def test_a_record_of_this_version_is_still_found_beside_a_newer_one(runs_dir, capsys):
    write_run(runs_dir, "725c0001", start=0)
    newer_run(runs_dir, "725cb590", start=60)
    code, out, err = tfmesos(capsys, "show", "725c")
    assert code == 0 and "725c0001" in out and err == ""


@pytest.mark.parametrize("limit", [[], ["-n", "1"], ["--all"]])
def test_runs_lists_the_others_and_says_how_many_newer_records_it_leaves_out(
        runs_dir, capsys, limit):
    write_run(runs_dir, "11112222", start=0)
    write_run(runs_dir, "33334444", start=30)
    newer_run(runs_dir, "725cb590", start=60)
    newer_run(runs_dir, "725cb591", start=90)
    code, out, err = tfmesos(capsys, "runs", *limit)
    assert code == 0
    shown = [line.split()[0] for line in out.splitlines()[1:]]
    assert shown == (["33334444"] if limit == ["-n", "1"] else ["33334444", "11112222"])
    assert "2 records not shown: %s\n" % REASON in err
    assert "(1 older runs" in err if limit == ["-n", "1"] else "older" not in err


def test_runs_of_newer_records_only_says_so(runs_dir, capsys):
    newer_run(runs_dir, "725cb590", start=60)
    code, out, err = tfmesos(capsys, "runs")
    assert code == 0 and out == ""
    assert err == "no runs in %s\n1 record not shown: %s\n" % (runs_dir, REASON)
