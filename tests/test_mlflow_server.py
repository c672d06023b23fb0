"""``tfrun --mlflow http://...`` against a real ``mlflow server`` (MLflow's
REST store), started here on a sqlite backend and read back through its
REST API: the tasks' metrics reach it while the run goes, the run ends
FINISHED, its page in the server's UI (``mlflow ui`` is the same server)
shows it in Chromium, and the run of a tfrun killed with SIGKILL is ended
KILLED by the next tfrun that logs to the experiment.

Needs the full ``mlflow`` package (the server and its UI) and Chromium for
the page. scripts/test.sh installs that MLflow into a virtual environment
of its own (``$TFMESOS_TEST_MLFLOW_PYTHON`` names its Python), not beside
tfmesos: the full package brings matplotlib and pandas, which Keras
imports where they are, ~1 s of CPU more in every TensorFlow process of
the suite; tfrun itself needs only the mlflow extra (mlflow-skinny)."""

import importlib.util
import json
import os
import shutil
import signal
import subprocess
import sys
import urllib.error
import urllib.parse
import urllib.request

import pytest
from run_dirs import validate_run_json
from tfrun_helpers import (
    SMALL,
    assert_no_task_processes,
    finish_reading,
    free_port,
    start_tfrun,
)
from waiting import wait_until

SERVER_PYTHON = os.environ.get("TFMESOS_TEST_MLFLOW_PYTHON") or (
    sys.executable if importlib.util.find_spec("mlflow") is not None and all(
        importlib.util.find_spec(name) is not None for name in ("flask", "sqlalchemy", "alembic"))
    else None)
HAS_SERVER = SERVER_PYTHON is not None and os.access(SERVER_PYTHON, os.X_OK)
CHROMIUM = shutil.which("chromium") or shutil.which("chromium-browser")
# The integration tier: it starts a server, tfrun and its tasks.
pytestmark = [pytest.mark.integration,
              pytest.mark.skipif(not HAS_SERVER, reason="needs the mlflow server: run scripts/test.sh "
                                 "(or set TFMESOS_TEST_MLFLOW_PYTHON to a Python with mlflow)")]
PY = sys.executable
# The task logs step 0, then waits until the test saw that point in the
# server (the file GO), then logs step 1; without GO it gives up after 120 s.
WAITS = ("import os, sys, time, tfmesos\n"
         "tfmesos.log_metrics(step=0, loss=1.0)\n"
         "deadline = time.monotonic() + 120\n"
         "while not os.path.exists(sys.argv[1]):\n"
         "    if time.monotonic() > deadline:\n"
         "        sys.exit(9)\n"
         "    time.sleep(0.05)\n"
         "tfmesos.log_metrics(step=1, loss=0.5)\n")


def clean_environment(**extra):
    """This environment without MLflow's settings; no telemetry, for MLflow's
    client and server alike (MLflow honours DO_NOT_TRACK)."""
    env = {k: v for k, v in os.environ.items() if not k.startswith("MLFLOW_")}
    env.update(MESOS_MASTER="", DO_NOT_TRACK="true", **extra)
    return env


@pytest.fixture(scope="module")
def mlflow_server(tmp_path_factory):
    """The URL of an ``mlflow server`` on 127.0.0.1 with a sqlite backend and
    artifacts it serves itself, stopped (its whole process group) at the end."""
    root = tmp_path_factory.mktemp("mlflow-server")
    port = free_port()
    url = "http://127.0.0.1:%d" % port
    # Job execution off: no huey consumers (a process each), which nothing here needs.
    env = clean_environment(MLFLOW_SERVER_ENABLE_JOB_EXECUTION="false")
    with open(root / "server.log", "wb") as log:
        server = subprocess.Popen(
            [SERVER_PYTHON, "-m", "mlflow", "server", "--backend-store-uri",
             "sqlite:///%s" % (root / "server.db"), "--artifacts-destination",
             str(root / "artifacts"), "--host", "127.0.0.1", "--port", str(port),
             "--workers", "1"], cwd=str(root), env=env, stdin=subprocess.DEVNULL, stdout=log,
            stderr=subprocess.STDOUT, start_new_session=True)
    try:
        wait_until(lambda: server.poll() is not None or answers(url + "/health"), timeout=180,
                   interval=0.2, message=lambda: "mlflow server never answered: %s" % (
                       (root / "server.log").read_text()[-3000:]))
        assert server.poll() is None, (root / "server.log").read_text()[-3000:]
        yield url
    finally:
        stop_group(server)


def stop_group(process):
    """SIGTERM ``process``'s group, then SIGKILL what is left of it."""
    for signum, wait in ((signal.SIGTERM, 20), (signal.SIGKILL, 30)):
        try:
            os.killpg(process.pid, signum)
        except ProcessLookupError:
            break
        try:
            process.wait(wait)
        except subprocess.TimeoutExpired:
            continue
    try:   # the server's uvicorn outlives it for a moment
        os.killpg(process.pid, signal.SIGKILL)
    except ProcessLookupError:
        pass


def answers(url):
    try:
        with urllib.request.urlopen(url, timeout=5) as response:
            return response.status == 200
    except (OSError, urllib.error.URLError):
        return False


def rest(server, path, body=None, **query):
    """MLflow's REST API (docs: "REST API"): ``body`` POSTed as JSON, else a GET."""
    url = "%s/api/2.0/mlflow/%s" % (server, path)
    if query:
        url += "?" + urllib.parse.urlencode(query)
    data = None if body is None else json.dumps(body).encode()
    request = urllib.request.Request(url, data=data, headers={"Content-Type": "application/json"})
    with urllib.request.urlopen(request, timeout=30) as response:
        return json.load(response)


def runs_in(server, experiment):
    """[run] of ``experiment`` (a name), as runs/search answers; [] before it exists."""
    try:
        found = rest(server, "experiments/get-by-name", experiment_name=experiment)
    except urllib.error.HTTPError as exc:
        if exc.code == 404:
            return []
        raise
    return rest(server, "runs/search", {"experiment_ids": [
        found["experiment"]["experiment_id"]]}).get("runs", [])


def tags_of(run):
    return {tag["key"]: tag["value"] for tag in run["data"].get("tags", [])}


def history(server, run_id, key):
    return [(m["step"], m["value"]) for m in rest(server, "metrics/get-history", run_id=run_id,
                                                  metric_key=key).get("metrics", [])]


def logged(server, experiment, step):
    """The experiment's only run once ``worker:0/loss`` reached ``step``, else None."""
    runs = runs_in(server, experiment)
    if len(runs) == 1 and any(s == step for s, _ in history(
            server, runs[0]["info"]["run_id"], "worker:0/loss")):
        return runs[0]
    return None


def test_metrics_stream_to_the_server_while_the_run_goes_and_its_page_shows_it(
        mlflow_server, tmp_path):
    go = tmp_path / "go"
    with start_tfrun("--mlflow", mlflow_server, "--mlflow-experiment", "stream", "-w", "1",
                     "-s", "0", *SMALL, "--run-dir", str(tmp_path / "run"), "--", PY, "-c", WAITS,
                     str(go), env=clean_environment()) as proc:
        # The first point is in the server while the task still waits for GO.
        run = wait_until(lambda: proc.poll() is not None or logged(mlflow_server, "stream", 0),
                         timeout=120, message="the first point never reached the server")
        assert proc.poll() is None, finish_reading(proc, 30)
        assert run["info"]["status"] == "RUNNING"
        go.write_text("")
        out, err = finish_reading(proc, 120)
    assert proc.returncode == 0, err
    run_id, experiment_id = run["info"]["run_id"], run["info"]["experiment_id"]
    page = "%s/#/experiments/%s/runs/%s" % (mlflow_server, experiment_id, run_id)
    assert "tfrun: MLflow: run %s in experiment 'stream' at %s; its page: %s\n" % (
        run_id, mlflow_server, page) in err
    assert "View run" not in out      # MLflow's own line (stdout is the tasks' output)
    record = validate_run_json(tmp_path / "run" / "run.json")
    ended = rest(mlflow_server, "runs/get", run_id=run_id)["run"]
    assert ended["info"]["status"] == "FINISHED"
    assert int(ended["info"]["end_time"]) >= int(ended["info"]["start_time"])
    assert sorted(history(mlflow_server, run_id, "worker:0/loss")) == [(0, 1.0), (1, 0.5)]
    tags = tags_of(ended)
    assert tags["tfmesos.outcome"] == "succeeded" and tags["tfmesos.run_id"] == record["run_id"]
    listed = rest(mlflow_server, "artifacts/list", run_id=run_id).get("files", [])
    assert {"run.json", "report.html", "worker.0.stdout"} <= {f["path"] for f in listed}
    assert_no_task_processes()
    if CHROMIUM is None:
        pytest.skip("no Chromium to open the run's page with")
    # The page a user opens: the UI is a React app, so the DOM once it rendered.
    shown = subprocess.run([CHROMIUM, "--headless", "--no-sandbox", "--disable-gpu",
                            "--disable-background-networking", "--user-data-dir=%s" % (
                                tmp_path / "chromium"), "--virtual-time-budget=15000",
                            "--dump-dom", page], capture_output=True, text=True, timeout=120,
                           stdin=subprocess.DEVNULL)
    dom = shown.stdout
    for text in (record["name"] + "-" + record["run_id"], "Finished", "worker:0/loss",
                 "tfmesos.outcome"):
        assert text in dom, (text, shown.returncode, dom[-2000:], shown.stderr[-2000:])


def test_the_run_of_a_sigkilled_tfrun_is_ended_killed_by_the_next_tfrun(mlflow_server,
                                                                         tmp_path):
    run_dir = tmp_path / "run"
    with start_tfrun("--mlflow", mlflow_server, "--mlflow-experiment", "killed", "-w", "1",
                     "-s", "0", *SMALL, "--run-dir", str(run_dir), "--", PY, "-c", WAITS,
                     str(tmp_path / "never"), env=clean_environment()) as killed:
        left = wait_until(lambda: killed.poll() is not None or logged(mlflow_server, "killed",
                                                                      0),
                          timeout=120, message="the first point never reached the server")
        assert killed.poll() is None, finish_reading(killed, 30)
        killed.send_signal(signal.SIGKILL)
        killed.wait(30)
    assert_no_task_processes()   # its tasks stop once their scheduler is gone
    record = json.loads((run_dir / "run.json").read_text())
    assert record["outcome"]["status"] == "running"
    written = int(os.stat(run_dir / "run.json").st_mtime * 1000)
    left_id = left["info"]["run_id"]
    assert rest(mlflow_server, "runs/get", run_id=left_id)["run"]["info"]["status"] == \
        "RUNNING"
    # The next tfrun to the experiment ends it: KILLED when run.json was last written.
    with start_tfrun("--mlflow", mlflow_server, "--mlflow-experiment", "killed", "-w", "1",
                     "-s", "0", *SMALL, "--run-dir", str(tmp_path / "next"), "--", "true",
                     env=clean_environment()) as following:
        _, err = finish_reading(following, 120)
    assert following.returncode == 0, err
    assert "tfrun: MLflow: ended the run %s (tfmesos run %s) KILLED: its tfrun (pid %d on " \
        "%s) was gone" % (left_id, record["run_id"], record["scheduler"]["pid"],
                           record["scheduler"]["host"]) in err, err
    assert record["scheduler"]["pid"] == killed.pid
    ended = rest(mlflow_server, "runs/get", run_id=left_id)["run"]
    assert ended["info"]["status"] == "KILLED"
    assert int(ended["info"]["end_time"]) == written
    tags = tags_of(ended)
    assert tags["tfmesos.outcome"] == "gone" and "was gone" in tags["tfmesos.closed"]
    assert [(s, v) for s, v in history(mlflow_server, left_id, "worker:0/loss")] == [(0, 1.0)]
    statuses = sorted(run["info"]["status"] for run in runs_in(mlflow_server, "killed"))
    assert statuses == ["FINISHED", "KILLED"]
