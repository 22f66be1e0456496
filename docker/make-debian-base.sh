#!/usr/bin/env bash
# Makes a base image for docker/Dockerfile from Debian packages alone (debootstrap + docker
# import), for machines that reach a Debian mirror but no container registry:
#   sudo bash docker/make-debian-base.sh [TAG]        (default checkerzero-base:bookworm)
#   docker build -f docker/Dockerfile --build-arg BASE_IMAGE=checkerzero-base:bookworm ...
# It holds Debian bookworm's python3 (3.11) with venv and headers; every node built from it runs
# the same Python. Needs root, debootstrap and a running docker daemon; takes a few minutes.
set -euo pipefail
TAG=${1:-checkerzero-base:bookworm}
MIRROR=${DEBIAN_MIRROR:-http://deb.debian.org/debian}
root=$(mktemp -d /tmp/checkerzero-rootfs.XXXXXX)
trap 'rm -rf "$root"' EXIT
debootstrap --variant=minbase --include=python3,python3-venv,python3-dev,ca-certificates \
  bookworm "$root" "$MIRROR"
rm -rf "$root"/var/cache/apt/archives/*.deb "$root"/var/lib/apt/lists/*
tar -C "$root" -c . | docker import -c 'ENV LANG=C.UTF-8' -c 'CMD ["bash"]' - "$TAG"
echo "made $TAG"
