"""docker/build.sh's arguments, with a stand-in `docker` that records what it
is asked to do (the real build is exercised by the Docker fixtures)."""

import os
import subprocess

from tfrun_helpers import REPO

FAKE_DOCKER = """#!/bin/sh
echo "$*" >> "$DOCKER_LOG"
case "$1" in
    image) [ "$2" = inspect ] && echo sha256:new ;;
esac
exit 0
"""


def build(tmp_path, *args):
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir()
    docker = bin_dir / "docker"
    docker.write_text(FAKE_DOCKER)
    docker.chmod(0o755)
    log = tmp_path / "docker.log"
    env = dict(os.environ, PATH="%s:%s" % (bin_dir, os.environ["PATH"]), DOCKER_LOG=str(log),
               BASE_IMAGE="example/base:1",
               # its own lock: a real build (scripts/test.sh starts one) holds the cache's
               TFMESOS_CACHE_DIR=str(tmp_path / "cache"))
    result = subprocess.run([os.path.join(REPO, "docker", "build.sh"), *args], env=env,
                            capture_output=True, text=True, timeout=60)
    return result, log.read_text().splitlines() if log.exists() else []


def test_push_tags_and_pushes_the_registry_name(tmp_path):
    target = "registry.example.com:5000/ml/tfmesos:0.1"
    result, calls = build(tmp_path, "--push", target, "0.1")
    assert result.returncode == 0, result.stderr
    [built] = [c for c in calls if c.startswith("build ")]
    assert "IMAGE_NAME=%s" % target in built and "-t tfmesos/tfmesos:0.1" in built
    assert "tag tfmesos/tfmesos:0.1 %s" % target in calls
    assert calls[-1] == "push %s" % target
    assert "build.sh: pushed %s" % target in result.stdout


def test_without_push_nothing_is_pushed(tmp_path):
    result, calls = build(tmp_path)
    assert result.returncode == 0, result.stderr
    assert not [c for c in calls if c.startswith(("push", "tag"))]


def test_push_needs_a_name(tmp_path):
    result, _ = build(tmp_path, "--push")
    assert result.returncode == 2 and "--push needs REGISTRY/NAME[:TAG]" in result.stderr
