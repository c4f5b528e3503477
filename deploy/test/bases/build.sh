#!/usr/bin/env bash
# Builds the local base images the container tests use instead of the public ones (no registry
# is reachable on the test machines), from Debian packages only:
#   localhost/packbot-test/debian:bookworm   Debian bookworm (mmdebstrap) with PostgreSQL 15,
#                                            Caddy and the host's Go toolchain: the build stage
#                                            (GO_IMAGE), the reverse proxy, and the base of…
#   localhost/packbot-test/postgres:15       …PostgreSQL with the official image's variables
#   localhost/packbot-test/static:latest     CA certificates, time zones and a nonroot user
#                                            (65532), like distroless/static (RUNTIME_IMAGE)
# An image already present is kept (podman's storage is the cache); --force builds them again.
set -euo pipefail
cd "$(dirname "$0")"

prefix=localhost/packbot-test
force=false
[ "${1:-}" = --force ] && force=true
have() { ! $force && podman image exists "$1"; }

work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT

if ! have "$prefix/debian:bookworm" || ! have "$prefix/static:latest"; then
  echo "== mmdebstrap: Debian bookworm with postgresql-15, caddy, ca-certificates, tzdata"
  mmdebstrap --quiet --variant=minbase --include=ca-certificates,tzdata,postgresql-15,caddy \
    bookworm "$work/rootfs.tar"
  # The static base: what distroless/static holds, taken from the same Debian files.
  mkdir -p "$work/static/tmp" "$work/static/home/nonroot" "$work/static/etc"
  tar -C "$work/static" -xf "$work/rootfs.tar" ./etc/ssl/certs/ca-certificates.crt ./usr/share/zoneinfo
  chmod 1777 "$work/static/tmp"
  chown 65532:65532 "$work/static/home/nonroot"
  printf 'root:x:0:0:root:/root:/sbin/nologin\nnobody:x:65534:65534:nobody:/nonexistent:/sbin/nologin\nnonroot:x:65532:65532:nonroot:/home/nonroot:/sbin/nologin\n' >"$work/static/etc/passwd"
  printf 'root:x:0:\nnobody:x:65534:\nnonroot:x:65532:\n' >"$work/static/etc/group"
  tar -C "$work/static" -cf "$work/static.tar" .
  podman import --quiet --change 'ENV SSL_CERT_FILE=/etc/ssl/certs/ca-certificates.crt' \
    "$work/static.tar" "$prefix/static:latest"
  # The build stage needs Go 1.26, which Debian bookworm does not have: add the host's toolchain.
  goroot=$(go env GOROOT)
  tar -C "$(dirname "$goroot")" --transform "s,^\./$(basename "$goroot"),./usr/local/go," \
    -rf "$work/rootfs.tar" "./$(basename "$goroot")"
  podman import --quiet \
    --change 'ENV PATH=/usr/local/go/bin:/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin' \
    --change 'ENV LANG=C.UTF-8' \
    "$work/rootfs.tar" "$prefix/debian:bookworm"
fi

if ! have "$prefix/postgres:15"; then
  echo "== postgres:15 from Debian's postgresql-15"
  podman build --quiet --build-arg BASE="$prefix/debian:bookworm" -t "$prefix/postgres:15" postgres
fi
podman images --filter reference="$prefix/*"
