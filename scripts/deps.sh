#!/usr/bin/env bash
# deps.sh — install the Debian packages pgcipher needs to build, test and
# benchmark.  With --check, only report what is missing.
set -euo pipefail

packages=(build-essential ccache bison flex pkg-config perl
          libssl-dev openssl liblz4-dev libzstd-dev libicu-dev libreadline-dev zlib1g-dev
          libipc-run-perl debian-archive-keyring dpkg-dev ca-certificates
          python3 python3-venv procps curl unzip pgbouncer
          # the proxy's real-client tests (proxy/test/clients)
          sysbench default-jdk-headless maven
          # third-party extensions built from source (test/extensions)
          cmake xz-utils
          # pg_upgrade from Debian's stock PostgreSQL 15 (TAP 008, bench pg-upgrade)
          postgresql-15)

missing=()
for p in "${packages[@]}"; do
    dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed" || missing+=("$p")
done
here=$(cd "$(dirname "$0")" && pwd)
if [ ${#missing[@]} = 0 ]; then
    # proxy/ needs Go >= 1.25 (Debian 12 has 1.19): see go.sh
    if [ "${1:-}" = --check ]; then exec "$here/go.sh" path >/dev/null; fi
    exec "$here/go.sh" install
fi

if [ "${1:-}" = --check ]; then
    echo "pgcipher: missing Debian packages: ${missing[*]}" >&2
    echo "pgcipher: run 'sudo ./pgcipher deps' first" >&2
    exit 1
fi
[ "$(id -u)" = 0 ] || { echo "pgcipher: installing packages needs root: sudo $0" >&2; exit 1; }
echo "deps: installing ${missing[*]}"
export DEBIAN_FRONTEND=noninteractive
apt-get update -qq
# postgresql-15 is only a source of old clusters for pg_upgrade: no
# cluster "15/main" of its own, started on port 5432 at boot
if [ ! -e /etc/postgresql-common/createcluster.conf ]; then
    mkdir -p /etc/postgresql-common
    echo "create_main_cluster = false" > /etc/postgresql-common/createcluster.conf
fi
apt-get install -y -qq --no-install-recommends \
    -o Dpkg::Options::=--force-confdef -o Dpkg::Options::=--force-confold \
    "${missing[@]}" > /dev/null
"$here/go.sh" install
