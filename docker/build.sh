#!/usr/bin/env bash
# Build the tfmesos image from this repository.
#
#   docker/build.sh                  -> tfmesos/tfmesos       (i.e. :latest)
#   docker/build.sh 0.1              -> tfmesos/tfmesos:0.1
#   docker/build.sh gpu --build-arg TENSORFLOW="tensorflow[and-cuda] tf-keras"
#                                    (extra arguments go to `docker build`)
#   docker/build.sh --push registry.example.com:5000/ml/tfmesos:0.1 0.1
#                                    builds, tags and pushes it: Mesos agents
#                                    pull image tasks from a registry, never
#                                    from this machine's engine
#
# Environment:
#   BASE_IMAGE          base image (default tfmesos/base:bookworm, created
#                       by docker/make-base.sh when missing; any other base
#                       is used as given, e.g. a CUDA image)
#   TFMESOS_IMAGE_REPO  repository name (default tfmesos/tfmesos)
#   TFMESOS_CA_BUNDLE   CA bundle pip uses inside the build
#                       (default $PIP_CERT, else /etc/ssl/certs/ca-certificates.crt)
#
# The engine must be running (as root: `dockerd >/var/log/dockerd.log 2>&1 &`).
# A rebuild after a change to tfmesos/ or mesos_local/ only reruns the last
# layers (seconds):
# TensorFlow sits in a layer before the source is copied.
set -euo pipefail

cd "$(dirname "$0")/.."

PUSH=
if [ "${1:-}" = "--push" ]; then
    [ -n "${2:-}" ] || { echo "build.sh: --push needs REGISTRY/NAME[:TAG]" >&2; exit 2; }
    PUSH=$2
    shift 2
fi
REPO=${TFMESOS_IMAGE_REPO:-tfmesos/tfmesos}
TAG=${1:-}
[ $# -gt 0 ] && shift
IMAGE=$REPO${TAG:+:$TAG}
BASE_IMAGE=${BASE_IMAGE:-tfmesos/base:bookworm}

die() { echo "build.sh: $*" >&2; exit 1; }
command -v docker >/dev/null || die "docker is not installed: apt-get install -y docker.io"
docker info >/dev/null 2>&1 || die "the Docker engine is not running: start it with 'dockerd &' (as root)"

# One build at a time (scripts/test.sh starts one early, in the background,
# and the tests' fixture runs this again): a second waits here, then finds
# every layer cached and only tags (seconds).
CACHE_DIR=${TFMESOS_CACHE_DIR:-${XDG_CACHE_HOME:-$HOME/.cache}/tfmesos}
mkdir -p "$CACHE_DIR"
exec 8>"$CACHE_DIR/build.lock"
flock 8

case "$BASE_IMAGE" in
    tfmesos/base:*) TFMESOS_BASE_IMAGE=$BASE_IMAGE docker/make-base.sh ;;
esac

# pip inside the build trusts the same CAs as this machine.
CA=${TFMESOS_CA_BUNDLE:-${PIP_CERT:-/etc/ssl/certs/ca-certificates.crt}}
mkdir -p docker/build          # git-ignored (build/), part of the context
if [ -r "$CA" ]; then
    cmp -s "$CA" docker/build/ca-certificates.crt || cp "$CA" docker/build/ca-certificates.crt
else
    : >docker/build/ca-certificates.crt
fi

OLD_ID=$(docker image inspect --format '{{.Id}}' "$IMAGE" 2>/dev/null || true)
echo "build.sh: building $IMAGE on $BASE_IMAGE"
# The legacy builder is what docker.io ships and needs no buildx plugin
# (DOCKER_BUILDKIT=1 docker/build.sh selects BuildKit where buildx exists).
DOCKER_BUILDKIT=${DOCKER_BUILDKIT:-0} docker build --network host --force-rm \
    --build-arg BASE_IMAGE="$BASE_IMAGE" \
    --build-arg IMAGE_NAME="${PUSH:-$IMAGE}" \
    -t "$IMAGE" -f docker/Dockerfile "$@" .
# The previous build of this tag, now untagged, would pile up: drop it
# (its layers stay where the new image still uses them).
NEW_ID=$(docker image inspect --format '{{.Id}}' "$IMAGE")
if [ -n "$OLD_ID" ] && [ "$OLD_ID" != "$NEW_ID" ] \
        && [ "$(docker image inspect --format '{{len .RepoTags}}' "$OLD_ID" 2>/dev/null)" = 0 ]; then
    docker rmi "$OLD_ID" >/dev/null 2>&1 || true
fi
echo "build.sh: built $IMAGE"
if [ -n "$PUSH" ]; then
    docker tag "$IMAGE" "$PUSH"
    docker push "$PUSH" || die "pushing $PUSH failed: is the registry reachable, and are you logged in (docker login)?"
    echo "build.sh: pushed $PUSH"
fi
