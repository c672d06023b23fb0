#!/usr/bin/env bash
# Create the local base image for docker/Dockerfile (default tfmesos/base:bookworm).
#
# No image registry is needed: the root filesystem comes from Debian's package
# mirror through debootstrap (minbase variant plus what the image needs to
# install Python packages), and is imported with `docker import`.
#
# Idempotent: does nothing when the image already exists; the debootstrap
# tarball is cached under ${XDG_CACHE_HOME:-$HOME/.cache}/tfmesos, so
# recreating the image after `docker rmi` only re-imports it.
#
# Environment:
#   TFMESOS_BASE_IMAGE   image name to create     (default tfmesos/base:bookworm)
#   DEBIAN_MIRROR        Debian mirror            (default http://deb.debian.org/debian)
#   TFMESOS_CACHE_DIR    where the tarball lives  (default ${XDG_CACHE_HOME:-$HOME/.cache}/tfmesos)
#
# Needs: root (debootstrap), docker.io, debootstrap
#   (apt-get install -y docker.io debootstrap).
set -euo pipefail

BASE_IMAGE=${TFMESOS_BASE_IMAGE:-tfmesos/base:bookworm}
SUITE=bookworm
MIRROR=${DEBIAN_MIRROR:-http://deb.debian.org/debian}
CACHE_DIR=${TFMESOS_CACHE_DIR:-${XDG_CACHE_HOME:-$HOME/.cache}/tfmesos}
# python3 is 3.11 on bookworm; python3-venv brings ensurepip (pip, setuptools).
PACKAGES=python3,python3-venv,ca-certificates,procps

die() { echo "make-base.sh: $*" >&2; exit 1; }

command -v docker >/dev/null || die "docker is not installed: apt-get install -y docker.io"
docker info >/dev/null 2>&1 || die "the Docker engine is not running: start it with 'dockerd &' (as root)"

if docker image inspect "$BASE_IMAGE" >/dev/null 2>&1; then
    echo "make-base.sh: $BASE_IMAGE already exists"
    exit 0
fi

mkdir -p "$CACHE_DIR"
exec 9>"$CACHE_DIR/make-base.lock"
flock 9     # one debootstrap at a time; a concurrent run waits, then finds the image

if docker image inspect "$BASE_IMAGE" >/dev/null 2>&1; then
    echo "make-base.sh: $BASE_IMAGE already exists"
    exit 0
fi

ARCH=$(dpkg --print-architecture 2>/dev/null || echo amd64)
# The tarball name carries the package list, so changing it rebuilds the tarball.
KEY=$(printf '%s %s %s' "$SUITE" "$ARCH" "$PACKAGES" | sha256sum | cut -c1-12)
TARBALL="$CACHE_DIR/rootfs-$SUITE-$ARCH-$KEY.tar"

if [ ! -s "$TARBALL" ]; then
    command -v debootstrap >/dev/null || die "debootstrap is not installed: apt-get install -y debootstrap"
    [ "$(id -u)" = 0 ] || die "debootstrap needs root; run make-base.sh as root"
    ROOTFS=$(mktemp -d "$CACHE_DIR/rootfs.XXXXXX")
    trap 'rm -rf "$ROOTFS" "$TARBALL.tmp"' EXIT
    echo "make-base.sh: debootstrap --variant=minbase $SUITE ($PACKAGES) from $MIRROR"
    debootstrap --variant=minbase --arch="$ARCH" --include="$PACKAGES" \
        "$SUITE" "$ROOTFS" "$MIRROR" >"$CACHE_DIR/debootstrap.log" 2>&1 \
        || { tail -n 20 "$CACHE_DIR/debootstrap.log" >&2; die "debootstrap failed (log: $CACHE_DIR/debootstrap.log)"; }
    # Drop what a container image does not need.
    rm -rf "$ROOTFS"/var/lib/apt/lists/* "$ROOTFS"/var/cache/apt/*.bin \
           "$ROOTFS"/var/cache/apt/archives/*.deb "$ROOTFS"/var/log/*.log \
           "$ROOTFS"/debootstrap
    : >"$ROOTFS/etc/hostname"
    tar --numeric-owner -C "$ROOTFS" -cf "$TARBALL.tmp" .
    mv "$TARBALL.tmp" "$TARBALL"
    rm -rf "$ROOTFS"
    trap - EXIT
fi

echo "make-base.sh: importing $TARBALL as $BASE_IMAGE"
docker import \
    --change 'ENV PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin' \
    --change 'ENV LANG=C.UTF-8' \
    --change 'CMD ["/bin/bash"]' \
    "$TARBALL" "$BASE_IMAGE" >/dev/null
echo "make-base.sh: created $BASE_IMAGE"
