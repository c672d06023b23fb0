#!/usr/bin/env bash
# Installs everything the test suite needs on a fresh Debian machine, then
# runs the static checks and the suite: Debian packages (Docker engine,
# ZooKeeper, debootstrap, iproute2, openssl, chromium), tfmesos with its
# extras; ruff (lint), mypy (types of every package of tfmesos and of
# mesos_local; pyproject.toml), vermin (nothing newer than the
# Python setup.py promises), then pytest. The Docker daemon, the tfmesos image and a
# ZooKeeper server are started by the test fixtures themselves.
# Arguments are passed to pytest, e.g. scripts/test.sh -m "not docker".
set -euo pipefail
cd "$(dirname "$0")/.."

missing=()
command -v dockerd >/dev/null 2>&1 || missing+=(docker.io)
[ -f /usr/share/java/zookeeper.jar ] || missing+=(zookeeper)
command -v debootstrap >/dev/null 2>&1 || missing+=(debootstrap)
command -v ip >/dev/null 2>&1 || missing+=(iproute2)        # network-namespace agents
command -v openssl >/dev/null 2>&1 || missing+=(openssl)    # TLS test certificates
command -v chromium >/dev/null 2>&1 || missing+=(chromium)  # renders tfmesos report's page
if [ ${#missing[@]} -gt 0 ]; then
  sudo=""
  [ "$(id -u)" = 0 ] || sudo=sudo
  echo "installing Debian packages: ${missing[*]}"
  $sudo apt-get update -qq
  DEBIAN_FRONTEND=noninteractive $sudo apt-get install -y -qq "${missing[@]}" >/dev/null
fi

python3 -m pip install -q --disable-pip-version-check -e ".[tensorflow,docker,examples,keras-jax,mlflow,test]"
python3 -m ruff check .
python3 -m mypy
# The oldest Python setup.py promises (python_requires=">=X.Y").
oldest=$(sed -n 's/.*python_requires=">=\([0-9.]*\)".*/\1/p' setup.py)
vermin --target="$oldest-" --violations --no-tips --eval-annotations --quiet \
    tfmesos mesos_local
exec python3 -m pytest tests "$@"
