#!/usr/bin/env bash
# Assembles the image .ci/Dockerfile describes, without pulling anything: this machine (and
# CI's) cannot reach a container registry, so instead of `FROM debian:bookworm-slim` the base
# is a minimal Debian bookworm made by debootstrap from Debian's package mirror (with curl
# and ca-certificates, as the Dockerfile installs), trimmed of docs and apt state; then the
# locally built binary, the LocalStack entrypoint, the non-root user, the volume, the ports,
# the health check and the entrypoint, as in the Dockerfile. buildah commits it in Docker's
# format (OCI images carry no HEALTHCHECK); podman runs it (tests/image).
#
#   .ci/image.sh [BINARY] [TAG]      default: target/dist/sqsim localhost/sqsim:latest
set -euo pipefail
cd "$(dirname "$0")/.."
BIN=${1:-target/dist/sqsim}
TAG=${2:-localhost/sqsim:latest}
ROOTFS=target/image-rootfs
MIRROR=${DEBIAN_MIRROR:-http://deb.debian.org/debian}

need() {
  local missing=()
  for tool in "$@"; do command -v "$tool" >/dev/null 2>&1 || missing+=("$tool"); done
  if [ ${#missing[@]} -gt 0 ]; then
    echo "image: installing ${missing[*]}" >&2
    apt-get update -q >/dev/null
    DEBIAN_FRONTEND=noninteractive apt-get install -y -q buildah podman runc debootstrap >/dev/null
  fi
  for tool in "$@"; do
    command -v "$tool" >/dev/null 2>&1 || { echo "image: $tool is needed and could not be installed" >&2; exit 1; }
  done
}
need buildah podman runc debootstrap
export BUILDAH_FORMAT=docker  # OCI images carry no HEALTHCHECK

[ -x "$BIN" ] || { echo "image: no binary at $BIN (cargo build --profile dist first)" >&2; exit 1; }

# The base, made once and kept (about 30 s): Debian bookworm, minimal, with curl.
if [ ! -f "$ROOTFS/.complete" ]; then
  rm -rf "$ROOTFS" "$ROOTFS.tmp"
  debootstrap --variant=minbase --include=curl,ca-certificates bookworm "$ROOTFS.tmp" "$MIRROR" >/dev/null
  rm -rf "$ROOTFS.tmp"/usr/share/{doc,man,info,locale} "$ROOTFS.tmp"/var/cache/apt/* \
         "$ROOTFS.tmp"/var/lib/apt/lists/* "$ROOTFS.tmp"/var/log/*
  chroot "$ROOTFS.tmp" groupadd --system --gid 10001 sqsim
  chroot "$ROOTFS.tmp" useradd --uid 10001 --gid sqsim --home-dir /var/lib/sqsim --create-home sqsim
  mkdir -p "$ROOTFS.tmp"/etc/localstack/init/ready.d "$ROOTFS.tmp"/var/lib/localstack
  chroot "$ROOTFS.tmp" chown sqsim:sqsim /var/lib/localstack
  touch "$ROOTFS.tmp/.complete"
  mv "$ROOTFS.tmp" "$ROOTFS"
fi

ctr=$(buildah from scratch)
trap 'buildah rm "$ctr" >/dev/null 2>&1 || true' EXIT
# Through the mount, so that owners and modes (the sqsim user's home) are kept as they are.
mnt=$(buildah mount "$ctr")
cp -a "$ROOTFS"/. "$mnt"/
rm -f "$mnt/.complete"
install -m 0755 "$BIN" "$mnt/usr/local/bin/sqsim"
strip "$mnt/usr/local/bin/sqsim"  # as the Dockerfile does: the profiles keep line tables
install -m 0755 .ci/docker-entrypoint.sh "$mnt/usr/local/bin/docker-entrypoint.sh"
buildah umount "$ctr" >/dev/null
buildah config \
  --user sqsim \
  --env SQSIM_HOST=0.0.0.0 \
  --workingdir /var/lib/sqsim \
  --volume /var/lib/sqsim \
  --port 9324/tcp --port 9325/tcp --port 4566/tcp \
  --healthcheck 'CMD /usr/local/bin/sqsim health' \
  --healthcheck-interval 10s --healthcheck-timeout 5s \
  --healthcheck-start-period 5s --healthcheck-retries 3 \
  --entrypoint '["/usr/local/bin/sqsim"]' --cmd '' \
  --label org.opencontainers.image.title=sqsim \
  "$ctr"
buildah commit --quiet --format docker --rm "$ctr" "$TAG" >/dev/null
trap - EXIT
echo "image: built $TAG from $BIN ($(podman image inspect "$TAG" --format '{{.Size}}') bytes)"
