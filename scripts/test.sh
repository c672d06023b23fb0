#!/usr/bin/env bash
# Installs everything the test suite needs on a fresh Debian machine, then
# runs the static checks and the suite: Debian packages (Docker engine,
# ZooKeeper, debootstrap, iproute2, openssl, chromium, nodejs, npm), tfmesos
# with its extras; ruff (lint), mypy (types of every package of tfmesos and of
# mesos_local; pyproject.toml), vermin (nothing newer than the
# Python setup.py promises), then pytest. The Docker daemon, the tfmesos image and a
# ZooKeeper server are started by the test fixtures themselves.
# Without arguments: the fast tier, then the integration tier in parallel;
# with arguments, one pytest run of them, e.g. scripts/test.sh -m "not docker".
set -euo pipefail
cd "$(dirname "$0")/.."

missing=()
command -v dockerd >/dev/null 2>&1 || missing+=(docker.io)
[ -f /usr/share/java/zookeeper.jar ] || missing+=(zookeeper)
command -v debootstrap >/dev/null 2>&1 || missing+=(debootstrap)
command -v ip >/dev/null 2>&1 || missing+=(iproute2)        # network-namespace agents
command -v openssl >/dev/null 2>&1 || missing+=(openssl)    # TLS test certificates
command -v chromium >/dev/null 2>&1 || missing+=(chromium)  # renders tfmesos report's page
command -v node >/dev/null 2>&1 || missing+=(nodejs)      # npm's Mesos clients (test_npm_mesos_client)
command -v npm >/dev/null 2>&1 || missing+=(npm)
if [ ${#missing[@]} -gt 0 ]; then
  sudo=""
  [ "$(id -u)" = 0 ] || sudo=sudo
  echo "installing Debian packages: ${missing[*]}"
  $sudo apt-get update -qq
  DEBIAN_FRONTEND=noninteractive $sudo apt-get install -y -qq "${missing[@]}" >/dev/null
fi

# The tfmesos Docker image (docker/build.sh: debootstrap, then TensorFlow
# into it: minutes on a fresh machine) builds in the background from here
# on, beside the installs and the fast tier; the tests' tfmesos_image
# fixture runs build.sh again, which waits for this build (its lock) and
# finds every layer cached. The engine, where none answers, is started here
# (as the docker_engine fixture would) and stopped at the end.
dockerd_pid=""
image_build=""
image_log=$(mktemp /tmp/tfmesos-image-build-XXXXXX.log)
engine_answers() {
  for _ in $(seq 120); do docker info >/dev/null 2>&1 && return 0; sleep 0.5; done
  return 1
}
if [ "$(id -u)" = 0 ] && ! docker info >/dev/null 2>&1; then
  setsid dockerd >"$image_log.dockerd" 2>&1 </dev/null &
  dockerd_pid=$!
fi
# A background step's processes, each before the ones it started: a subshell
# killed alone leaves what it started running.
tree_of() {
  echo "$1"
  local child
  for child in $(cat /proc/"$1"/task/*/children 2>/dev/null); do tree_of "$child"; done
}
( engine_answers && docker/build.sh ) >"$image_log" 2>&1 </dev/null &
image_build=$!
stop_docker() {
  [ -z "$image_build" ] || kill $(tree_of "$image_build") 2>/dev/null || true
  if [ -n "$dockerd_pid" ]; then
    kill -TERM "$dockerd_pid" 2>/dev/null || true
    for _ in $(seq 60); do kill -0 "$dockerd_pid" 2>/dev/null || break; sleep 0.5; done
    kill -KILL "$dockerd_pid" 2>/dev/null || true
  fi
  rm -f "$image_log" "$image_log.dockerd"
}
# What runs in the background until waited for: on an early exit (a
# failed step, Ctrl-C) its whole tree is stopped, not left running.
mlflow_install="" clients_fetch="" static=""
stop_background() {
  local pid
  for pid in $mlflow_install $clients_fetch $static; do
    kill $(tree_of "$pid") 2>/dev/null || true
  done
}
trap 'stop_background; stop_docker' EXIT
# The full MLflow (`mlflow server` and its UI, which test_mlflow_server logs
# to and reads) goes into a virtual environment of its own, installed
# beside the rest: next to TensorFlow its matplotlib and pandas would cost
# every TensorFlow process of the suite ~1 s of CPU (Keras imports them).
mlflow_venv="${TFMESOS_TEST_MLFLOW_VENV:-$HOME/.cache/tfmesos-tests/mlflow-server}"
export TFMESOS_TEST_MLFLOW_PYTHON="$mlflow_venv/bin/python"
mlflow_log=$(mktemp /tmp/tfmesos-mlflow-venv-XXXXXX.log)
( "$TFMESOS_TEST_MLFLOW_PYTHON" -c "import mlflow.server" 2>/dev/null || {
    python3 -m venv "$mlflow_venv" &&
    "$TFMESOS_TEST_MLFLOW_PYTHON" -m pip install -q --no-compile --disable-pip-version-check "mlflow>=3.7"; }
) >"$mlflow_log" 2>&1 &
mlflow_install=$!
pymesos_dir="$HOME/.cache/tfmesos-tests/pymesos-0.3.15-http-parser-0.9.0"
export TFMESOS_TEST_PYMESOS="$pymesos_dir"
npm_prefix="$HOME/.cache/tfmesos-tests/npm-mesos-client-1.0.0-jsdom-26.1.0"
export TFMESOS_TEST_NPM="$npm_prefix"
# Two clients of other projects the integration tier runs against, fetched
# in the background beside the installs and the fast tier (neither is
# installed into this Python; the fast tier uses neither):
clients_log=$(mktemp /tmp/tfmesos-test-clients-XXXXXX.log)
(
set -euo pipefail
# pymesos 0.3.15's MesosExecutorDriver, an executor client the suite runs
# against the embedded agents (test_custom_executors), in a folder of its
# own, never installed: its http-parser's C extension does not build on
# Python 3.11 (pymesos#130), its pure-Python parser works.
# The folder is named after the pins: a new pin is fetched, not the old one kept.
if [ ! -f "$pymesos_dir/pymesos/__init__.py" ]; then
  pymesos_sdists=$(mktemp -d /tmp/tfmesos-pymesos-XXXXXX)
  python3 -m pip download -q --disable-pip-version-check --no-deps --no-binary :all: \
      -d "$pymesos_sdists" "pymesos==0.3.15" "http-parser==0.9.0"
  rm -rf "$pymesos_dir.tmp"   # what a run cut short left
  mkdir -p "$pymesos_dir.tmp/http_parser"
  tar -xzf "$pymesos_sdists"/pymesos-0.3.15.tar.gz -C "$pymesos_sdists"
  tar -xzf "$pymesos_sdists"/http-parser-0.9.0.tar.gz -C "$pymesos_sdists"
  cp -r "$pymesos_sdists"/pymesos-0.3.15/pymesos "$pymesos_dir.tmp/"
  cp "$pymesos_sdists"/http-parser-0.9.0/http_parser/*.py "$pymesos_dir.tmp/http_parser/"
  rm -rf "$pymesos_sdists" "$pymesos_dir" && mv "$pymesos_dir.tmp" "$pymesos_dir"
fi
# Compiled here, once, as pip compiles what it installs: compiled by the
# first test that imports it, http-parser's regular expressions (written
# for Python 2: "\d" outside raw strings) put three DeprecationWarnings in
# the suite's summary on every fresh machine. Those warnings are not
# printed here either; an error is (into the log said on failure).
python3 -W ignore::DeprecationWarning -W ignore::SyntaxWarning -m compileall -q "$pymesos_dir"
# npm's @dcos/mesos-client (DC/OS' operator event stream client), a
# dashboard the suite subscribes to the embedded master's operator stream
# (test_npm_mesos_client), with jsdom: the client is written for browsers
# and needs their XMLHttpRequest (one that streams, as node's XHR packages
# do not). In an npm prefix of their own, named by TFMESOS_TEST_NPM.
if [ ! -f "$npm_prefix/node_modules/@dcos/mesos-client/package.json" ] ||
   [ ! -f "$npm_prefix/node_modules/jsdom/package.json" ]; then
  mkdir -p "$npm_prefix"
  npm install -q --no-audit --no-fund --prefix "$npm_prefix" \
      "@dcos/mesos-client@1.0.0" "jsdom@26.1.0" >/dev/null
fi
) >"$clients_log" 2>&1 </dev/null &
clients_fetch=$!
# PyTorch's CPU build first (tfrun --torch's tests and example): with the
# torch extra alone pip would take the newest torch, a CUDA build of GBs
# (the lightning extra's torch>=2.1 is then met: pip keeps this one).
python3 -m pip install -q --disable-pip-version-check "torch==2.13.0"
python3 -m pip install -q --disable-pip-version-check \
    -e ".[tensorflow,docker,examples,keras-jax,torch,lightning,jax,mlflow,test]"
# The suite runs tfmesos as an install runs it: from bytecode (pip compiles
# what it installs; an editable install compiles nothing). Where
# PYTHONDONTWRITEBYTECODE is set, each of the suite's thousands of Python
# processes compiled every tfmesos module it imports, and each pytest
# session rewrote and compiled every test module again (~10 s of CPU each).
unset PYTHONDONTWRITEBYTECODE
python3 -m compileall -q -j 0 tfmesos mesos_local tests examples benchmarks >/dev/null
# What the integration tier needs beyond this Python's packages: the MLflow
# server's venv and the two clients fetched above (waited for after the fast
# tier, which needs none of them).
wait_for_installs() {
  local failed=0
  wait "$mlflow_install" || failed=1
  mlflow_install=""   # reaped: nothing of it to stop
  if [ "$failed" = 1 ]; then
    cat "$mlflow_log"
    echo "could not install the mlflow server into $mlflow_venv"
    exit 1
  fi
  rm -f "$mlflow_log"
  wait "$clients_fetch" || failed=1
  clients_fetch=""
  if [ "$failed" = 1 ]; then
    cat "$clients_log"
    echo "could not fetch pymesos into $pymesos_dir or npm's Mesos client into $npm_prefix"
    exit 1
  fi
  rm -f "$clients_log"
}
python3 -m ruff check .
static_checks() {
  python3 -m mypy
  # The oldest Python setup.py promises (python_requires=">=X.Y").
  oldest=$(sed -n 's/.*python_requires=">=\([0-9.]*\)".*/\1/p' setup.py)
  vermin --target="$oldest-" --violations --no-tips --eval-annotations --quiet \
      tfmesos mesos_local
}
# With arguments: exactly the pytest run they ask for.
if [ $# -gt 0 ]; then
  wait_for_installs
  static_checks
  exec python3 -m pytest tests "$@"
fi
# mypy and vermin (half a minute of one core on a fresh clone) run beside
# the fast tier, which leaves a core mostly idle; they fail the suite there.
static_log=$(mktemp /tmp/tfmesos-static-XXXXXX.log)
static_checks >"$static_log" 2>&1 &
static=$!
# The fast tier first (pure logic, the mock transport, fakes: no master, no
# task, no TensorFlow: about two minutes on 2 pytest-xdist workers), then the
# integration tier in three lanes at once: the tests that train TensorFlow
# clusters, one after another (on 2 cores two clusters at once only starve
# each other), the tests that mostly wait (below), and the rest on 2
# pytest-xdist workers (tests/conftest.py marks the tiers and keeps the
# tests of one Docker engine, or of one ZooKeeper, on one worker).
# Each lane's session checks what its own tests left behind and prints its
# slowest tests (the suite has 10 minutes on this machine).
# -rs: every lane names what it skipped, and why (the JAX tests were skipped
# in every CI run, unseen, until stop 68).
python3 -m pytest tests -m "not integration" -n 2 --dist loadgroup -rs
training='integration and tensorflow and not docker'
waiting="integration and waits and not ($training)"
lane_log=$(mktemp /tmp/tfmesos-tests-training-XXXXXX.log)
wait_log=$(mktemp /tmp/tfmesos-tests-waiting-XXXXXX.log)
lane=""
waits=""
# A lane stops as a Ctrl-C stops pytest: its fixtures clean up
# (scripts/sigint_default.py: a background job starts with SIGINT ignored).
stop_lanes() {
  for pid in "$lane" "$waits"; do
    [ -z "$pid" ] || { kill -INT "$pid" 2>/dev/null; wait "$pid" 2>/dev/null; } || true
  done
}
trap 'stop_lanes; stop_background; rm -f "$lane_log" "$wait_log"; stop_docker' EXIT
# The training lane, the longest, needs nothing the static checks or the
# installs above give: it starts at once.
TFMESOS_TEST_LANE=training python3 scripts/sigint_default.py \
    python3 -m pytest tests -m "$training" --durations=40 -rs >"$lane_log" 2>&1 &
lane=$!
static_failed=0
wait "$static" || static_failed=1
static=""
if [ "$static_failed" = 1 ]; then
  cat "$static_log"
  exit 1
fi
cat "$static_log"
rm -f "$static_log"
wait_for_installs
# Tests that mostly wait (a partition's grace, a connect timeout, a
# heartbeat, a sampling interval: under a fifth of their time on a CPU)
# hold a CPU-light lane of their own rather than a worker of the rest:
# two xdist workers, as two waits at once cost no more CPU than one.
TFMESOS_TEST_LANE=waiting python3 scripts/sigint_default.py \
    python3 -m pytest tests -m "$waiting" -n 2 --dist loadgroup --durations=10 -rs \
    >"$wait_log" 2>&1 &
waits=$!
status=0
# The engine answers before the fixture looks (else it would start another).
[ -z "$dockerd_pid" ] || engine_answers || { cat "$image_log.dockerd"; exit 1; }
python3 -m pytest tests -m "integration and not ($training) and not ($waiting)" -n 2 -rs \
    --dist loadgroup --durations=40 || status=$?
wait "$waits" || status=$?
waits=""
wait "$lane" || status=$?
lane=""
# A lane whose pytest ended without its summary line did not run all its
# tests, whatever its exit code: something in a test ended the process
# (an in-process task's os._exit(0) once did, unseen, with CI green).
summarised() {
  grep -Eq ' in [0-9.]+s( \([0-9:]+\))?( =+)?$' "$1" || {
    echo "scripts/test.sh: the $2 lane's pytest ended without its summary line:" \
         "a test ended its process; its tests did not all run"
    status=1
  }
}
echo "== the waiting lane ($waiting):"
cat "$wait_log"
summarised "$wait_log" waiting
echo "== the training lane ($training):"
cat "$lane_log"
summarised "$lane_log" training
exit "$status"
