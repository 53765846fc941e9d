#!/usr/bin/env bash
# A Debian bookworm base image made without any registry: debootstrap (minbase) from the apt mirror this
# machine already uses, imported into podman as localhost/debian-base:bookworm. It has no Python: the
# Dockerfile's python-base stage installs Debian's python3 (3.11 on bookworm) when a base lacks it.
#
#   deploy/scripts/base-local.sh            # builds it when missing
#   FORCE=1 deploy/scripts/base-local.sh    # rebuilds it
set -euo pipefail
source "$(dirname "${BASH_SOURCE[0]}")/lib.sh"

BASE_LOCAL=${BASE_LOCAL:-localhost/debian-base:bookworm}
SUITE=${SUITE:-bookworm}
[[ $(id -u) -eq 0 ]] || die "debootstrap and rootful podman need root here"
ensure_host_packages

if [[ -z ${FORCE:-} ]] && podman image exists "$BASE_LOCAL"; then
  log "base image $BASE_LOCAL exists ($(ENGINE=podman image_size "$BASE_LOCAL")); FORCE=1 rebuilds it"
  exit 0
fi

mirror=$(apt_mirror)
rootfs=$BUILD_DIR/rootfs-$SUITE
start=$(now)
log "debootstrap --variant=minbase $SUITE from $mirror"
rm -rf "$rootfs"
mkdir -p "$BUILD_DIR"
debootstrap --variant=minbase "$SUITE" "$rootfs" "$mirror" >"$BUILD_DIR/debootstrap.log" 2>&1 ||
  { tail -20 "$BUILD_DIR/debootstrap.log" >&2; die "debootstrap failed (log: $BUILD_DIR/debootstrap.log)"; }
# Updates and security fixes too, from the same mirror host; no apt caches or lists in the image.
security=${mirror%/debian}/debian-security
printf 'deb %s %s main\ndeb %s %s-updates main\ndeb %s %s-security main\n' \
  "$mirror" "$SUITE" "$mirror" "$SUITE" "$security" "$SUITE" >"$rootfs/etc/apt/sources.list"
rm -rf "$rootfs"/var/cache/apt/archives/*.deb "$rootfs"/var/lib/apt/lists/* "$rootfs"/var/log/*.log
log "debootstrap took $(since "$start")"
t=$(now)
tar -C "$rootfs" -c . | podman import --quiet --change 'CMD ["/bin/bash"]' - "$BASE_LOCAL" >/dev/null
rm -rf "$rootfs"
log "imported $BASE_LOCAL in $(since "$t") ($(ENGINE=podman image_size "$BASE_LOCAL")); total $(since "$start")"
