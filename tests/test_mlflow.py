"""MLflow: ``tfrun --mlflow [TRACKING_URI]``, ``cluster(mlflow=...)``.

One MLflow run per tfmesos run, logged by tfrun's process (the tasks need
no MLflow): parameters, the metrics the tasks logged with their steps, as
they come, tags, and run.json, report.html and the task logs as
artifacts; a run whose tfrun died unseen is ended by the next one. The
pure mapping (``tfmesos.record.mlflow_mapping``) is tested on its own; the
runs write to real local stores (MLflow's default, sqlite:///mlflow.db, and
file stores) that ``MlflowClient`` reads back. test_mlflow_server logs to a
real ``mlflow server``."""

import dataclasses
import importlib.util
import json
import math
import os
import signal
import socket
import subprocess
import sys
import threading
import time

import pytest
from run_dirs import BASE, at, attempt, validate_run_json
from tfrun_helpers import (
    REPO,
    SMALL,
    assert_no_task_processes,
    start_tfrun,
    tfrun_argv,
    wait_for_line,
)
from waiting import wait_until

from tfmesos.exceptions import SpecError
from tfmesos.record import liveness
from tfmesos.record.mlflow_mapping import (
    MAX_PARAM,
    MetricKeys,
    MlflowSpec,
    gone_run_end,
    metric_key,
    metric_rows,
    mlflow_spec,
    mlflow_status,
    params_of,
    point_rows,
    scheduler_of,
    scheduler_tag,
    tags_of,
    tracking_uri,
)
from tfmesos.record.schema import (
    Job,
    MetricSeries,
    Outcome,
    RunFile,
    Scheduler,
    Shipped,
    ShippedBundle,
    Task,
    Timings,
)

HAS_MLFLOW = importlib.util.find_spec("mlflow") is not None
needs_mlflow = pytest.mark.skipif(not HAS_MLFLOW,
                                  reason="MLflow is not installed: pip install 'tfmesos[mlflow]'")
PY = sys.executable
# Paced: a burst faster than the task reads its metrics socket is thinned (README, "Metrics").
LOG_20 = ("import time, tfmesos\n"
          "for i in range(20):\n"
          "    tfmesos.log_metrics(step=i, loss=1.0 / (i + 1))\n"
          "    time.sleep(0.01)\n")


# -- the mapping (pure) ---------------------------------------------------------------------------

@pytest.mark.parametrize("task, name, key", [
    ("worker:0", "loss", "worker:0/loss"),
    ("chief:0", "eval/accuracy", "chief:0/eval/accuracy"),
    ("client", "a@b+c", "client/a_b_c"),          # @ and + are not MLflow name characters
    ("worker:1", "a//b/", "worker:1/a/b"),        # MLflow refuses keys that normpath changes
    ("worker:1", "./x/../y", "worker:1/_/x/__/y"),
    ("worker:1", "/", "worker:1/_"),
])
def test_metric_keys_are_task_slash_name_with_what_mlflow_refuses_replaced(task, name, key):
    assert metric_key(task, name) == key


@needs_mlflow
@pytest.mark.parametrize("name", ["loss", "a@b+c", "a//b/", "./x/../y", "/", "..", "x" * 64,
                                  "@+:/.-_"])
def test_every_metric_key_passes_mlflow_s_own_validation(name):
    from mlflow.utils.validation import _validate_metric_name
    _validate_metric_name(metric_key("worker:12", name))


def run_file(**extra):
    fields = dict(
        run_id="ab12cd34", name="train.py", mode="replica", master="local",
        command="python train.py --job {job_name}", framework_id="fw-1",
        jobs=[Job(name="ps", num=1, cpus=0.5, mem=512.0, gpus=0),
              Job(name="worker", num=2, cpus=2.0, mem=4096.0, gpus=1)],
        tasks=[Task(name="worker:0", job="worker", index=0, attempts=[attempt("worker:0")])],
        outcome=Outcome(status="failed", message="worker:1 exited with code 3", task="worker:1",
                        exit_code=3, hint="a module is missing"),
        timings=Timings(submitted=at(0), finished=at(10)))
    fields.update(extra)
    return RunFile(**fields)


def test_metric_rows_keep_each_series_steps_and_times_and_map_null_to_nan():
    series = [MetricSeries(task="worker:0", name="loss", steps=[0, 5, 10],
                           values=[1.0, None, 0.25], times=[0.5, 1.0, 2.25]),
              MetricSeries(task="client", name="acc@top1", steps=[3], values=[0.9], times=[4.0])]
    rows = metric_rows(run_file(metrics=series))
    epoch_ms = int(BASE.timestamp() * 1000)     # at(0)
    assert [(k, s, t) for k, _, t, s in rows] == [
        ("worker:0/loss", 0, epoch_ms + 500), ("worker:0/loss", 5, epoch_ms + 1000),
        ("worker:0/loss", 10, epoch_ms + 2250), ("client/acc_top1", 3, epoch_ms + 4000)]
    values = [v for _, v, _, _ in rows]
    assert values[0] == 1.0 and math.isnan(values[1]) and values[2:] == [0.25, 0.9]
    # Two names that map to one key keep apart.
    twins = [MetricSeries(task="worker:0", name=name, steps=[1], values=[1.0], times=[0.0])
             for name in ("a@b", "a+b", "a_b")]
    assert [k for k, _, _, _ in metric_rows(run_file(metrics=twins))] == [
        "worker:0/a_b", "worker:0/a_b_2", "worker:0/a_b_3"]


def test_streamed_points_keep_one_key_each_and_run_json_s_series_bounds():
    keys = MetricKeys(most=3, most_per_task=2)
    rows, left_out = point_rows(keys, "worker:0", [
        (0, 100.0, {"a@b": 1.0, "a+b": None}), (1, 100.25, {"a@b": 0.5, "c": 7.0})])
    assert left_out == 1      # a third metric of worker:0: beyond its 2
    assert [(k, s, t) for k, _, t, s in rows] == [
        ("worker:0/a_b", 0, 100000), ("worker:0/a_b_2", 0, 100000), ("worker:0/a_b", 1, 100250)]
    assert math.isnan(rows[1][1])
    # The keys stay those of the first points; a fourth series in all is left out.
    rows, left_out = point_rows(keys, "worker:1", [(2, 101.0, {"a@b": 2.0, "x": 3.0})])
    assert [k for k, _, _, _ in rows] == ["worker:1/a_b"] and left_out == 1
    assert keys.key("worker:0", "a+b") == "worker:0/a_b_2"


def test_params_name_jobs_resources_command_image_bundle_and_commit():
    shipped = Shipped(bundle=ShippedBundle(source="/p", files=5, bytes=100, archive_bytes=80,
                                           sha256="f" * 64, name="bundle.tar.gz"),
                      task_side="tfmesos-task-1.zip")
    params = params_of(run_file(shipped=shipped), git_commit="c" * 40,
                       image="tfmesos:latest")
    assert params["jobs"] == "ps:1,worker:2"
    assert (params["worker.num"], params["worker.cpus"], params["worker.mem"],
            params["worker.gpus"]) == ("2", "2.0", "4096.0", "1")
    assert params["ps.cpus"] == "0.5" and params["ps.mem"] == "512.0"
    assert params["command"] == "python train.py --job {job_name}"
    assert params["image"] == "tfmesos:latest"
    assert params["bundle_sha256"] == "f" * 64 and params["bundle_files"] == "5"
    assert params["git_commit"] == "c" * 40
    assert params["mode"] == "replica" and params["master"] == "local"
    # What a run does not have is left out, not logged empty.
    bare = params_of(run_file(command=None))
    assert not {"command", "image", "bundle_sha256", "git_commit"} & set(bare)
    # A value MLflow would refuse for its length is cut to its limit.
    long = params_of(run_file(command="x" * 10000))["command"]
    assert len(long) == MAX_PARAM and long.endswith("...")


def test_tags_say_the_outcome_exit_code_run_id_and_master():
    tags = tags_of(run_file(), "/runs/train.py-ab12cd34")
    assert tags["tfmesos.outcome"] == "failed" and tags["tfmesos.exit_code"] == "3"
    assert tags["tfmesos.run_id"] == "ab12cd34" and tags["tfmesos.master"] == "local"
    assert tags["tfmesos.failed_task"] == "worker:1" and tags["tfmesos.hint"]
    assert tags["tfmesos.run_dir"] == "/runs/train.py-ab12cd34"
    assert tags["mlflow.runName"] == "train.py-ab12cd34"
    running = tags_of(run_file(outcome=Outcome()), None)
    assert running["tfmesos.outcome"] == "running" and "tfmesos.exit_code" not in running


@pytest.mark.parametrize("outcome, status", [
    ("succeeded", "FINISHED"), ("failed", "FAILED"), ("aborted", "FAILED"),
    ("interrupted", "KILLED"), ("running", "FAILED")])
def test_outcomes_become_mlflow_run_statuses(outcome, status):
    assert mlflow_status(outcome) == status


def test_tracking_uris_default_to_mlflow_s_sqlite_here_and_paths_become_file_uris(tmp_path):
    here = str(tmp_path)
    # MLflow's own default (mlflow.store.tracking.DEFAULT_TRACKING_URI), here, absolute.
    assert tracking_uri("", {}, here) == "sqlite:///%s/mlflow.db" % tmp_path
    assert tracking_uri("", {"MLFLOW_TRACKING_URI": "http://mlflow:5000"}, here) == \
        "http://mlflow:5000"
    assert tracking_uri("store", {"MLFLOW_TRACKING_URI": "http://x"}, here) == \
        (tmp_path / "store").as_uri()
    assert tracking_uri("/abs/store", {}, here) == "file:///abs/store"
    for uri in ("http://127.0.0.1:5000", "https://m.example/x", "databricks",
                "file:///tmp/s", "sqlite:////abs/m.db", "sqlite://", "sqlite:///:memory:"):
        assert tracking_uri(uri, {}, here) == uri
    # A relative sqlite path is the one MLflow would open here (a takeover may run elsewhere).
    assert tracking_uri("sqlite:///sub/m.db?timeout=20", {}, here) == \
        "sqlite:///%s/sub/m.db?timeout=20" % tmp_path
    assert tracking_uri("", {"MLFLOW_TRACKING_URI": "sqlite:///m.db"}, here) == \
        "sqlite:///%s/m.db" % tmp_path


def test_an_mlruns_store_with_experiments_here_stays_the_default_as_in_mlflow(tmp_path):
    """MLflow keeps ./mlruns as its default where it holds a file store's
    experiments (_get_default_tracking_uri): so do tfrun and MlflowClient()."""
    (tmp_path / "mlruns" / ".trash").mkdir(parents=True)
    (tmp_path / "mlruns" / "0").mkdir()
    assert tracking_uri("", {}, str(tmp_path)).startswith("sqlite:")   # no meta.yaml: empty
    (tmp_path / "mlruns" / "0" / "meta.yaml").write_text("name: Default\n")
    assert tracking_uri("", {}, str(tmp_path)) == (tmp_path / "mlruns").as_uri()
    if HAS_MLFLOW:
        from mlflow.tracking._tracking_service.utils import _get_default_tracking_uri
        old = os.getcwd()
        os.chdir(tmp_path)
        try:
            assert _get_default_tracking_uri() == "./mlruns"
        finally:
            os.chdir(old)


def a_gone_process():
    """The ``scheduler`` of a process that ran here and has ended."""
    child = subprocess.Popen(["true"])
    child.wait()
    return Scheduler(**dict(liveness.this_process().to_dict(), pid=child.pid, start_ticks=1))


def test_a_running_mlflow_run_is_ended_only_when_tfmesos_opened_it_and_its_tfrun_is_gone():
    dead, alive = a_gone_process(), liveness.this_process()
    assert scheduler_of(scheduler_tag(dead)) == dead
    assert scheduler_of("{not json") is None and scheduler_of('{"pid": "x"}') is None
    assert scheduler_of("[" * 5000 + "]" * 5000) is None   # the tag is anyone's (no traceback)
    directory = "/runs/train.py-ab12cd34"
    mine = {"tfmesos.run_id": "ab12cd34", "tfmesos.run_dir": directory,
            "tfmesos.scheduler": scheduler_tag(dead)}
    running = run_file(outcome=Outcome())   # run.json as a SIGKILLed tfrun left it
    written = BASE.timestamp() + 42.5

    def end(tags, found=None):
        loads = []
        ending = gone_run_end(tags, liveness.gone, lambda d: loads.append(d) or found,
                              now=BASE.timestamp() + 99)
        assert loads in ([], [directory])
        return ending

    # Not tfmesos' (no run id or scheduler tag, or one that is not a scheduler), or its
    # tfrun is still there: left alone.
    assert end({k: v for k, v in mine.items() if k != "tfmesos.run_id"}) is None
    assert end(dict(mine, **{"tfmesos.scheduler": "x"})) is None
    assert end(dict(mine, **{"tfmesos.scheduler": scheduler_tag(alive)})) is None
    # Gone while run.json says running: KILLED when run.json was last written.
    ending = end(mine, (running, written))
    assert (ending.status, ending.end_time, ending.outcome) == (
        "KILLED", int(written * 1000), "gone")
    assert ending.why.startswith("its tfrun (pid %d on %s) was gone" % (dead.pid, dead.host))
    # Gone after run.json said how the run ended: that outcome, at its end.
    ending = end(mine, (run_file(), written))     # failed, finished at(10)
    assert (ending.status, ending.end_time, ending.outcome) == (
        "FAILED", int(at_ms(10)), "failed")
    # No run.json there, or another run's: KILLED now.
    for found in (None, (run_file(run_id="ffff0000"), written)):
        ending = end(mine, found)
        assert (ending.status, ending.end_time) == ("KILLED", int((BASE.timestamp() + 99) * 1000))
        assert "no run.json" in ending.why


def at_ms(seconds):
    return (BASE.timestamp() + seconds) * 1000


def test_the_experiment_is_the_given_one_else_mlflow_s_variable_else_tfmesos(tmp_path):
    assert mlflow_spec(True, None, {}, str(tmp_path)).experiment == "tfmesos"
    assert mlflow_spec(True, None, {"MLFLOW_EXPERIMENT_NAME": "e"}, str(tmp_path)).experiment \
        == "e"
    assert mlflow_spec("s", "mine", {"MLFLOW_EXPERIMENT_NAME": "e"}, str(tmp_path)) == \
        MlflowSpec((tmp_path / "s").as_uri(), "mine")
    assert mlflow_spec(None, None, {}, str(tmp_path)) is None
    assert mlflow_spec(False, None, {}, str(tmp_path)) is None
    for bad in ("", "a\nb", "x" * 600):
        with pytest.raises(SpecError, match="experiment"):
            mlflow_spec(True, bad, {}, str(tmp_path))
    with pytest.raises(SpecError, match="tracking URI"):
        mlflow_spec("http://a\nb", None, {}, str(tmp_path))


def test_without_mlflow_installed_tfrun_mlflow_is_a_one_line_usage_error(capsys, monkeypatch):
    from tfmesos.cli import tfrun
    monkeypatch.setitem(sys.modules, "mlflow", None)   # find_spec: not installed
    with pytest.raises(SystemExit) as exited:
        tfrun.main(["--mlflow", "-w", "1", "-s", "0", "--", "true"])
    assert exited.value.code == 2
    err = capsys.readouterr().err
    assert "tfrun: error: --mlflow needs MLflow: pip install 'tfmesos[mlflow]'" in err
    assert len(err.strip().splitlines()) == 2


def test_without_mlflow_installed_a_run_spec_asking_for_it_is_refused(monkeypatch):
    from tfmesos.core.spec import RunSpec
    monkeypatch.setitem(sys.modules, "mlflow", None)
    with pytest.raises(SpecError, match=r"needs MLflow: pip install 'tfmesos\[mlflow\]'"):
        RunSpec(jobs=({"name": "worker"},), mlflow=True)


def test_mlflow_experiment_needs_mlflow(capsys):
    from tfmesos.cli import tfrun
    with pytest.raises(SystemExit):
        tfrun.main(["--mlflow-experiment", "x", "-w", "1", "-s", "0", "--", "true"])
    assert "--mlflow-experiment needs --mlflow" in capsys.readouterr().err


@needs_mlflow
@pytest.mark.parametrize("args, error", [
    (["--mlflow", "http://a\nb"], "the MLflow tracking URI must be at most 2000 characters"),
    (["--mlflow", "x" * 2001], "the MLflow tracking URI must be at most 2000 characters"),
    (["--mlflow", "--mlflow-experiment", "a\tb"], "the MLflow experiment's name must be"),
])
def test_bad_mlflow_options_are_usage_errors(args, error, capsys):
    from tfmesos.cli import tfrun
    with pytest.raises(SystemExit) as exited:
        tfrun.main([*args, "-w", "1", "-s", "0", "--", "true"])
    assert exited.value.code == 2 and error in capsys.readouterr().err


@needs_mlflow
def test_a_run_spec_takes_true_a_uri_or_an_mlflow_spec(tmp_path, monkeypatch):
    from tfmesos.core.spec import RunSpec
    monkeypatch.chdir(tmp_path)
    monkeypatch.delenv("MLFLOW_TRACKING_URI", raising=False)
    monkeypatch.delenv("MLFLOW_EXPERIMENT_NAME", raising=False)
    jobs = ({"name": "worker"},)
    assert RunSpec(jobs=jobs, mlflow=True).mlflow == MlflowSpec(
        "sqlite:///%s/mlflow.db" % tmp_path)
    assert RunSpec(jobs=jobs, mlflow="http://h:1").mlflow == MlflowSpec("http://h:1")
    given = MlflowSpec("file:///s", "e")
    assert RunSpec(jobs=jobs, mlflow=given).mlflow is given
    assert RunSpec(jobs=jobs).mlflow is None and RunSpec(jobs=jobs, mlflow=False).mlflow is None
    with pytest.raises(SpecError, match="mlflow must be"):
        RunSpec(jobs=jobs, mlflow=3)


# -- real runs, read back with MlflowClient --------------------------------------------------------

def client_of(uri):
    os.environ["MLFLOW_ALLOW_FILE_STORE"] = "true"   # MLflow 3.7+: file stores are opt-in
    os.environ["DO_NOT_TRACK"] = "true"              # no MLflow telemetry from the tests
    from mlflow.tracking import MlflowClient
    return MlflowClient(uri)


def only_run(uri, experiment="tfmesos"):
    client = client_of(uri)
    found = client.get_experiment_by_name(experiment)
    assert found is not None, "no experiment %r at %s" % (experiment, uri)
    runs = client.search_runs([found.experiment_id])
    assert len(runs) == 1, runs
    return client, runs[0]


def artifacts(client, run_id):
    return sorted(item.path for item in client.list_artifacts(run_id))


def tfrun_in(cwd, *args, env=None, timeout=180):
    full = dict(os.environ, MESOS_MASTER="", DO_NOT_TRACK="true",
                PYTHONPATH=os.pathsep.join(filter(None, [REPO, os.environ.get("PYTHONPATH")])),
                **(env or {}))
    for name in ("MLFLOW_TRACKING_URI", "MLFLOW_EXPERIMENT_NAME", "MLFLOW_ALLOW_FILE_STORE"):
        if name not in (env or {}):
            full.pop(name, None)
    try:
        return subprocess.run(tfrun_argv(*args), cwd=str(cwd), env=full, capture_output=True,
                              text=True, timeout=timeout)
    except subprocess.TimeoutExpired as exc:
        pytest.fail("tfrun %s did not finish in %d s: %s" % (args, timeout, exc.stderr))


def git_head():
    return subprocess.run(["git", "rev-parse", "HEAD"], cwd=REPO, capture_output=True,
                          text=True, timeout=30).stdout.strip()


@needs_mlflow
def test_tfrun_mlflow_logs_params_metrics_tags_and_artifacts(tmp_path):
    store = tmp_path / "store"
    run_dir = tmp_path / "run"
    result = tfrun_in(REPO, "--mlflow", str(store), "-w", "2", "-s", "0", *SMALL,
                      "--run-dir", str(run_dir), "--", PY, "-c", LOG_20)
    assert result.returncode == 0, result.stderr
    record = validate_run_json(run_dir / "run.json")
    client, run = only_run(store.as_uri())
    assert "tfrun: MLflow: run %s in experiment 'tfmesos' at %s" % (
        run.info.run_id, store.as_uri()) in result.stderr
    assert "warning" not in result.stderr.lower()
    assert run.info.status == "FINISHED"
    assert run.info.run_name == "%s-%s" % (record["name"], record["run_id"])
    params, tags = run.data.params, run.data.tags
    assert params["jobs"] == "worker:2"
    assert (params["worker.cpus"], params["worker.mem"], params["worker.gpus"]) == \
        ("0.2", "128.0", "0")
    assert params["command"] == record["command"] and "log_metrics" in params["command"]
    assert params["git_commit"] == git_head() == tags["mlflow.source.git.commit"]
    assert "image" not in params and "bundle_sha256" not in params
    assert tags["tfmesos.outcome"] == "succeeded" and tags["tfmesos.exit_code"] == "0"
    assert tags["tfmesos.run_id"] == record["run_id"] and tags["tfmesos.master"] == "local"
    assert tags["tfmesos.run_dir"] == str(run_dir)
    for worker in ("worker:0", "worker:1"):
        history = client.get_metric_history(run.info.run_id, "%s/loss" % worker)
        assert [(m.step, m.value) for m in sorted(history, key=lambda m: m.step)] == \
            [(i, 1.0 / (i + 1)) for i in range(20)]
        kept = next(s for s in record["metrics"] if s["task"] == worker)
        # The moments run.json keeps (seconds after the record began), in ms since the
        # epoch (two points a few ms apart may come in either order).
        offsets = [stamp - t * 1000 for stamp, t in zip(
            sorted(m.timestamp for m in history), sorted(kept["times"]))]
        assert max(offsets) - min(offsets) <= 2, offsets
    assert run.data.metrics == {"worker:0/loss": 0.05, "worker:1/loss": 0.05}
    assert artifacts(client, run.info.run_id) == sorted(
        ["run.json", "report.html", "worker.0.stdout", "worker.0.stderr", "worker.1.stdout",
         "worker.1.stderr"])
    # The artifact run.json is the final one; report.html is in the run directory too.
    local = client.download_artifacts(run.info.run_id, "run.json", str(tmp_path))
    with open(local) as handle:
        assert json.load(handle)["outcome"]["status"] == "succeeded"
    assert (run_dir / "report.html").exists()
    assert_no_task_processes()


@needs_mlflow
def test_a_failed_shipped_run_is_a_failed_mlflow_run_in_mlflow_s_default_store_here(tmp_path):
    project = tmp_path / "proj"
    project.mkdir()
    (project / "fail.py").write_text(
        "import os, sys, tfmesos\ntfmesos.log_metrics(step=1, x=2.0)\n"
        "print('MLflow settings', [k for k in os.environ if k.startswith('MLFLOW')])\n"
        "print('failing', file=sys.stderr)\nsys.exit(3)\n")
    result = tfrun_in(project, "--mlflow", "--mlflow-experiment", "mine", "--ship",
                      "-w", "1", "-s", "0", *SMALL, "--", "python", "fail.py",
                      env={"TFMESOS_WARM_TASKS": "0"})
    assert result.returncode == 3, result.stderr
    # tfrun's MLflow settings stay tfrun's: the tasks' environment was taken before.
    assert "[worker:0] MLflow settings []" in result.stdout
    # --mlflow alone: MLflow's default, sqlite:///mlflow.db where tfrun ran, which
    # MlflowClient() there reads as MLflow's documentation shows it (no settings).
    client, run = only_run("sqlite:///%s" % (project / "mlflow.db"), "mine")
    assert "tfrun: MLflow: run %s in experiment 'mine' at sqlite:///%s/mlflow.db\n" % (
        run.info.run_id, project) in result.stderr
    assert not os.path.exists(project / "mlruns" / "0" / "meta.yaml")   # not a file store
    env = {k: v for k, v in os.environ.items() if not k.startswith("MLFLOW_")}
    read = subprocess.run([PY, "-c", "from mlflow import MlflowClient\n"
                           "c = MlflowClient()\n"
                           "e = c.get_experiment_by_name('mine')\n"
                           "print([(r.info.run_id, r.info.status) for r in "
                           "c.search_runs([e.experiment_id])])"],
                          cwd=str(project), env=env, capture_output=True, text=True, timeout=120)
    assert read.stdout.strip() == str([(run.info.run_id, "FAILED")]), read.stderr
    assert run.info.status == "FAILED"
    tags, params = run.data.tags, run.data.params
    assert tags["tfmesos.outcome"] == "failed" and tags["tfmesos.exit_code"] == "3"
    assert tags["tfmesos.failed_task"] == "worker:0"
    run_dir = tags["tfmesos.run_dir"]
    with open(os.path.join(run_dir, "run.json")) as handle:
        shipped = json.load(handle)["shipped"]["bundle"]
    assert params["bundle_sha256"] == shipped["sha256"] and len(shipped["sha256"]) == 64
    assert "git_commit" not in params       # not a git checkout: left out quietly
    assert run.data.metrics == {"worker:0/x": 2.0}
    assert "worker.0.stderr" in artifacts(client, run.info.run_id)
    log = client.download_artifacts(run.info.run_id, "worker.0.stderr", str(tmp_path))
    with open(log) as handle:
        assert "failing" in handle.read()
    assert_no_task_processes()


@needs_mlflow
def test_cluster_mlflow_logs_a_fine_grained_run(tmp_path):
    from tfmesos import cluster, log_metrics
    store = tmp_path / "store"
    with cluster([dict(name="worker", num=1, cpus=0.2, mem=256)], master="local",
                 run_dir=str(tmp_path / "run"), mlflow=str(store)) as c:
        for step in range(5):
            log_metrics(step=step, loss=float(5 - step))
        run_dir = c.run_dir
    with open(os.path.join(run_dir, "run.json")) as handle:
        run_id = json.load(handle)["run_id"]
    client, run = only_run(store.as_uri())
    assert run.info.status == "FINISHED"
    assert run.data.tags["tfmesos.run_id"] == run_id
    assert run.data.tags["tfmesos.mode"] == "fine"
    assert run.data.params["jobs"] == "worker:1"
    history = client.get_metric_history(run.info.run_id, "client/loss")
    assert sorted((m.step, m.value) for m in history) == [(s, float(5 - s)) for s in range(5)]
    assert {"run.json", "report.html"} <= set(artifacts(client, run.info.run_id))


@needs_mlflow
def test_an_unreachable_tracking_server_costs_one_warning_line_not_the_run(tmp_path):
    started = time.monotonic()
    result = tfrun_in(REPO, "--mlflow", "http://127.0.0.1:1", "-w", "1", "-s", "0", *SMALL,
                      "--run-dir", str(tmp_path / "run"), "--", PY, "-c", LOG_20)
    took = time.monotonic() - started
    assert result.returncode == 0, result.stderr
    lines = [line for line in result.stderr.splitlines() if "MLflow" in line]
    assert len(lines) == 1 and lines[0].startswith("tfrun: MLflow: "), result.stderr
    # urllib3's retries were two lines more ("Retrying (Retry(total=1, ...")
    assert "Retrying" not in result.stderr and "connectionpool" not in result.stderr, \
        result.stderr
    assert lines[0].startswith("tfrun: MLflow: the run is not logged to http://127.0.0.1:1: "
                               "API request to http://127.0.0.1:1/api/"), lines[0]
    assert lines[0].endswith("failed: [Errno 111] Connection refused"), lines[0]
    assert "Traceback" not in result.stderr
    assert took < 40, took
    validate_run_json(tmp_path / "run" / "run.json")


@needs_mlflow
@pytest.mark.waits
def test_a_tracking_server_that_never_answers_is_given_up_on_in_time(tmp_path):
    from tfmesos.record.mlflow_logger import QUEUE_POINTS, MlflowLogger
    listener = socket.socket()
    listener.bind(("127.0.0.1", 0))
    listener.listen(16)          # connections are queued, never answered
    said, warned = [], []
    try:
        logger = MlflowLogger(MlflowSpec("http://127.0.0.1:%d" % listener.getsockname()[1]),
                              said.append, warned.append, timeout=2.0)
        logger.begin(run_file(), None)
        # The run's thread never waits for MLflow: its points are queued (at most
        # QUEUE_POINTS values, the oldest dropped) while MLflow's thread is stuck.
        for step in range(QUEUE_POINTS // 500 + 10):
            logger.metrics("worker:0", [(step, time.time(), {"m%d" % i: 1.0 for i in range(500)})])
        assert logger.dropped == 10 * 500
        started = time.monotonic()
        logger.end(run_file(), None)
        assert time.monotonic() - started < 4
    finally:
        listener.close()
    assert said == [] and len(warned) == 1
    assert warned[0].startswith("MLflow: ") and "gave up after 2 s" in warned[0]


@pytest.fixture(scope="module")
def sqlite_store(tmp_path_factory):
    """One sqlite store for the tests of MlflowLogger in this process (each
    in an experiment of its own): its tables are made once (~5 s of CPU),
    and MLflow is imported here first (its import is not safe from two
    threads at once)."""
    uri = "sqlite:///%s" % (tmp_path_factory.mktemp("mlflow") / "mlflow.db")
    client_of(uri).search_experiments()
    return uri


def spec_of(uri, request, name=None):
    """An MlflowSpec at ``uri``, in an experiment named after the test (or
    ``name``), made here with its artifacts under the test's temporary
    directory (a sqlite store's default is ./mlruns where it is opened)."""
    name = name or request.node.name
    artifacts = request.getfixturevalue("tmp_path") / ("artifacts-" + name)
    client_of(uri).create_experiment(name, artifact_location=artifacts.as_uri())
    return MlflowSpec(uri, name)


@needs_mlflow
def test_metrics_reach_mlflow_while_the_run_goes(sqlite_store, request):
    from tfmesos.record.mlflow_logger import MlflowLogger
    uri = sqlite_store
    said, warned = [], []
    logger = MlflowLogger(spec_of(uri, request), said.append, warned.append)
    logger.begin(run_file(outcome=Outcome()), None)
    logger.metrics("worker:0", [(0, time.time(), {"loss": 1.0})])
    client = client_of(uri)
    history = wait_until(lambda: logger.run_id and client.get_metric_history(
        logger.run_id, "worker:0/loss"), timeout=60, message="the first point never came")
    assert [(m.step, m.value) for m in history] == [(0, 1.0)]
    assert client.get_run(logger.run_id).info.status == "RUNNING"
    # More than one log_batch takes (1000 values); the rest at the end.
    logger.metrics("worker:0", [(step, time.time(), {"loss": 1.0 / step})
                                for step in range(1, 1500)])
    logger.metrics("worker:1", [(step, time.time(), {"loss": 2.0}) for step in range(1000)])
    logger.end(run_file(outcome=Outcome(status="succeeded", exit_code=0)), None)
    assert warned == [] and len(said) == 1, (said, warned)
    run = client.get_run(logger.run_id)
    assert run.info.status == "FINISHED" and "tfmesos.metrics_not_logged" not in run.data.tags
    assert sorted(m.step for m in client.get_metric_history(logger.run_id, "worker:0/loss")) \
        == list(range(1500))
    assert len(client.get_metric_history(logger.run_id, "worker:1/loss")) == 1000
    assert logger.logged_values == 2500


@needs_mlflow
def test_a_full_queue_drops_the_oldest_values_and_says_how_many(sqlite_store, request):
    from tfmesos.record.mlflow_logger import MlflowLogger
    uri = sqlite_store
    said, warned = [], []
    logger = MlflowLogger(spec_of(uri, request), said.append, warned.append, queue_points=10)
    for step in range(25):      # before the MLflow run is open: all wait
        logger.metrics("worker:0", [(step, time.time(), {"loss": float(step)})])
    logger.begin(run_file(outcome=Outcome()), None)
    logger.end(run_file(outcome=Outcome(status="succeeded", exit_code=0)), None)
    assert warned == ["MLflow: 15 metric values not logged (15 dropped while 10 waited for "
                      "MLflow)"], warned
    client = client_of(uri)
    assert sorted(m.step for m in client.get_metric_history(logger.run_id, "worker:0/loss")) \
        == list(range(15, 25))
    assert client.get_run(logger.run_id).data.tags["tfmesos.metrics_not_logged"] == "15"


@needs_mlflow
def test_the_next_run_ends_the_mlflow_run_of_a_gone_tfrun_killed(tmp_path, sqlite_store,
                                                                   request):
    """In process: a logger whose run names a gone process and never ended
    (its tfrun SIGKILLed: test_mlflow_server has the real one); the next
    run's logger to the experiment ends it KILLED, and says so."""
    from tfmesos.record.mlflow_logger import MlflowLogger
    uri, spec = sqlite_store, spec_of(sqlite_store, request)
    run_dir = tmp_path / "run"
    run_dir.mkdir()
    dead = run_file(outcome=Outcome(), scheduler=a_gone_process())
    (run_dir / "run.json").write_text(json.dumps(dead.to_dict()))
    os.utime(run_dir / "run.json", (BASE.timestamp() + 30, BASE.timestamp() + 30))
    # One whose tfrun is alive (this process) stays RUNNING.
    alive = MlflowLogger(spec, print, print)
    alive.begin(run_file(run_id="a11ce000", outcome=Outcome()), None)
    wait_until(lambda: alive.run_id, timeout=60)
    left = MlflowLogger(spec, print, print)
    left.begin(dead, str(run_dir))
    client = client_of(uri)
    wait_until(lambda: left.run_id, timeout=60)
    said, warned = [], []
    following = MlflowLogger(spec, said.append, warned.append)
    following.begin(run_file(run_id="0e0e0e0e", outcome=Outcome()), None)
    following.end(run_file(run_id="0e0e0e0e", outcome=Outcome(status="succeeded",
                                                               exit_code=0)), None)
    assert warned == []
    assert said[0] == "MLflow: ended the run %s (tfmesos run ab12cd34) KILLED: its tfrun " \
        "(pid %d on %s) was gone, killed before it could end the run; ended when its " \
        "run.json was last written" % (left.run_id, dead.scheduler.pid, dead.scheduler.host)
    ended = client.get_run(left.run_id)
    assert ended.info.status == "KILLED"
    assert ended.info.end_time == int((BASE.timestamp() + 30) * 1000)
    assert ended.data.tags["tfmesos.outcome"] == "gone"
    assert ended.data.tags["tfmesos.closed"].startswith("its tfrun (pid %d" % dead.scheduler.pid)
    assert client.get_run(alive.run_id).info.status == "RUNNING"
    assert client.get_run(following.run_id).info.status == "FINISHED"
    for logger in (left, alive):   # their threads end (the MLflow runs stay as they are)
        logger.leave()


@needs_mlflow
def test_a_takeover_carries_on_its_run_s_mlflow_run(sqlite_store, request):
    """tfmesos attach (a ``ClusterRun`` with ``resume``): the MLflow run its
    scheduler before opened, RUNNING again, not a second one; without one,
    a new run with what run.json kept."""
    from tfmesos.record.mlflow_logger import MlflowLogger
    uri, spec = sqlite_store, spec_of(sqlite_store, request)
    first = MlflowLogger(spec, print, print)
    record = run_file(outcome=Outcome(), scheduler=a_gone_process())
    first.begin(record, None)
    first.metrics("worker:0", [(0, time.time(), {"loss": 1.0})])
    first.leave()     # tfrun --failover left the run to its tasks
    client = client_of(uri)
    assert client.get_run(first.run_id).info.status == "RUNNING"
    said, warned = [], []
    taking = MlflowLogger(spec, said.append, warned.append)
    taking.begin(dataclasses.replace(record, scheduler=liveness.this_process()), None,
                 resumed=True)
    taking.metrics("worker:0", [(1, time.time(), {"loss": 0.5})])
    taking.end(run_file(outcome=Outcome(status="succeeded", exit_code=0)), None)
    assert warned == [] and said == ["MLflow: run %s in experiment '%s' at %s" % (
        first.run_id, spec.experiment, uri)]
    assert taking.run_id == first.run_id
    _, run = only_run(uri, spec.experiment)
    assert run.info.status == "FINISHED"
    assert scheduler_of(run.data.tags["tfmesos.scheduler"]) == liveness.this_process()
    assert sorted(m.step for m in client.get_metric_history(run.info.run_id, "worker:0/loss")) \
        == [0, 1]
    # A takeover whose MLflow run is not there: a new one, with the points run.json kept.
    kept = run_file(run_id="cafe0001", outcome=Outcome(), metrics=[MetricSeries(
        task="worker:0", name="loss", steps=[0, 1], values=[1.0, 0.5], times=[0.5, 1.0])])
    elsewhere = spec_of(uri, request, spec.experiment + "-elsewhere")
    taking = MlflowLogger(elsewhere, print, print)
    taking.begin(kept, None, resumed=True)
    taking.end(kept, None)
    client, run = only_run(uri, elsewhere.experiment)
    assert sorted(m.step for m in client.get_metric_history(run.info.run_id, "worker:0/loss")) \
        == [0, 1]


@needs_mlflow
def test_big_logs_are_uploaded_as_their_tail_and_named_in_a_tag(tmp_path):
    from tfmesos.record.mlflow_logger import MlflowLogger
    run_dir = tmp_path / "run"
    run_dir.mkdir()
    big = run_dir / "worker.0.stdout"
    big.write_bytes(b"x" * 3000 + b"\nthe end\n")
    (run_dir / "worker.0.stderr").write_text("small\n")
    record = run_file(outcome=Outcome(status="succeeded", exit_code=0))
    (run_dir / "run.json").write_text(json.dumps(record.to_dict()))
    store = tmp_path / "store"
    said, warned = [], []
    logger = MlflowLogger(MlflowSpec(store.as_uri()), said.append, warned.append,
                          log_cap=1000)
    logger.end(record, str(run_dir))
    assert warned == [] and len(said) == 1
    client, run = only_run(store.as_uri())
    assert run.data.tags["tfmesos.logs_truncated"] == "worker.0.stdout"
    path = client.download_artifacts(run.info.run_id, "worker.0.stdout", str(tmp_path / "dl"))
    with open(path, "rb") as handle:
        text = handle.read()
    assert len(text) < 1200 and text.endswith(b"\nthe end\n")
    assert text.startswith(b"[tfmesos: the first ")


@needs_mlflow
def test_ctrl_c_ends_tfrun_s_wait_for_a_tracking_server_that_never_answers(tmp_path):
    listener = socket.socket()
    listener.bind(("127.0.0.1", 0))
    listener.listen(16)          # connections are queued, never answered
    uri = "http://127.0.0.1:%d" % listener.getsockname()[1]
    err_lines = []
    try:
        with start_tfrun("--mlflow", uri, "-w", "1", "-s", "0", *SMALL, "--run-dir",
                         str(tmp_path / "run"), "--", PY, "-c", "print('done')") as proc:
            wait_for_line(proc.stdout, "[worker:0] done", 60)
            reader = threading.Thread(target=lambda: err_lines.extend(iter(
                proc.stderr.readline, "")), daemon=True)
            reader.start()
            # The run ends; tfrun then waits for MLflow (signals ignored while it stops
            # the tasks): Ctrl-C until it says it gave up.
            started = time.monotonic()
            while not any("MLflow" in line for line in err_lines):
                assert time.monotonic() - started < 30, err_lines
                proc.send_signal(signal.SIGINT)
                time.sleep(0.5)
            proc.wait(30)
            reader.join(10)
    finally:
        listener.close()
    assert proc.returncode in (0, 130), err_lines
    mlflow_lines = [line for line in err_lines if "MLflow" in line]
    assert mlflow_lines == ["tfrun: MLflow: interrupted while logging to %s; the MLflow run "
                            "may be incomplete\n" % uri], err_lines
    assert not any("Traceback" in line for line in err_lines), err_lines
    assert_no_task_processes()


def logs_three_points():
    import tfmesos
    for step in range(3):
        tfmesos.log_metrics(step=step, loss=float(3 - step))
    return "done"


@needs_mlflow
def test_tfmesos_run_mlflow_logs_the_function_s_run(tmp_path):
    import cloudpickle

    import tfmesos
    cloudpickle.register_pickle_by_value(sys.modules[__name__])
    store = tmp_path / "store"
    assert tfmesos.run(logs_three_points, workers=1, ship=None, cpus=0.1, mem=128,
                       run_dir=str(tmp_path / "run"), mlflow=str(store)).value == "done"
    client, run = only_run(store.as_uri())
    assert run.info.status == "FINISHED"
    assert run.data.tags["tfmesos.outcome"] == "succeeded"
    history = client.get_metric_history(run.info.run_id, "worker:0/loss")
    assert sorted(m.step for m in history) == [0, 1, 2]


def test_loggers_in_one_process_import_mlflow_one_at_a_time(monkeypatch):
    """Two threads importing MLflow at once can leave it partially
    initialised for the whole process: each logger's thread imports it
    under one lock."""
    from tfmesos.record import mlflow_logger
    inside, most, lock = [0], [0], threading.Lock()

    def slow_import():
        with lock:
            inside[0] += 1
            most[0] = max(most[0], inside[0])
        time.sleep(0.2)
        with lock:
            inside[0] -= 1

    monkeypatch.setattr(mlflow_logger, "_import_modules", slow_import)
    threads = [threading.Thread(target=mlflow_logger.import_mlflow) for _ in range(3)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(30)
    assert most[0] == 1


def test_a_sqlite_store_that_cannot_be_opened_is_refused_before_the_run(tmp_path):
    # A directory, or one the user cannot write in: the run went on, and at
    # its end MLflow retried for 61 s with ~40 lines of SQLAlchemy warnings
    # (found by a review helper, also as a second user).
    (tmp_path / "isdir.db").mkdir()
    with pytest.raises(SpecError) as caught:
        mlflow_spec("sqlite:///isdir.db", cwd=str(tmp_path))
    assert str(caught.value) == (
        "mlflow=sqlite:///isdir.db: %s is a directory, not a database file: give a file's "
        "path (sqlite:///mlflow.db)" % (tmp_path / "isdir.db"))
    from local_users import as_user, nobody
    if os.geteuid() == 0:
        user = nobody()
        import shutil
        import tempfile
        base = tempfile.mkdtemp()
        try:
            os.chmod(base, 0o755)
            assert as_user(user, lambda: repr(mlflow_spec(
                "sqlite:////%s/x.db" % base.lstrip("/"), cwd=base))) == "raised %r" % SpecError(
                "mlflow=sqlite:////%s/x.db: you cannot write in %s, where the database file "
                "goes: give a path of yours" % (base.lstrip("/"), base))
        finally:
            shutil.rmtree(base)
