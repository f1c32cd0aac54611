#!/usr/bin/env bash
# deps.sh — install the Debian packages pgcipher needs to build, test and
# benchmark.  With --check, only report what is missing.
set -euo pipefail

packages=(build-essential ccache bison flex pkg-config perl
          libssl-dev openssl liblz4-dev libzstd-dev libicu-dev libreadline-dev zlib1g-dev
          libipc-run-perl debian-archive-keyring dpkg-dev ca-certificates
          # PostgreSQL 18's io_method=io_uring
          liburing-dev
          # configured like Debian's own PostgreSQL (server/debian-options.sh):
          # PL/Tcl, PL/Perl, PL/Python, PAM, XML, NLS, uuid-ossp, GSSAPI,
          # LDAP, LLVM JIT, NUMA, systemd, SELinux, DTrace probes
          tcl-dev libperl-dev python3-dev libpam0g-dev libxslt1-dev gettext
          uuid-dev libkrb5-dev libldap2-dev llvm-dev clang libnuma-dev
          libsystemd-dev libselinux1-dev systemtap-sdt-dev
          # the lint suite (scripts/lint.sh)
          shellcheck perltidy
          python3 python3-venv procps curl unzip pgbouncer
          # the proxy's real-client tests (proxy/test/clients)
          sysbench default-jdk-headless maven
          # third-party extensions built from source (test/extensions)
          cmake xz-utils
          # pgBackRest built from ../shared/vendor (test/tools)
          meson ninja-build libbz2-dev libxml2-dev libyaml-dev libpq-dev
          # Barman and its pg_receivewal streaming (test/tools, suite barman)
          barman
          # pg_upgrade from Debian's stock PostgreSQL 15 (TAP 008, bench pg-upgrade)
          postgresql-15
          # Debian packages (scripts/package.sh) and the clean root they are
          # installed into (test/packages)
          debhelper lintian patchelf mmdebstrap uidmap
          # open_pg_tde, the benchmarks' peer (bench/peer; meson as above)
          libcurl4-openssl-dev)

# Debian's PostgreSQL 15 is what users upgrade from: the tests run with the
# one apt installs today (security updates included), not an older one a
# machine image happens to carry
upgradable=()
if [ "$(id -u)" = 0 ] && [ "${1:-}" != --check ]; then
    for p in postgresql-15 postgresql-client-15 libpq5; do
        installed=$(dpkg-query -W -f='${Version}' "$p" 2>/dev/null) || continue
        candidate=$(apt-cache policy "$p" 2>/dev/null | sed -n 's/^  Candidate: //p')
        if [ -n "$candidate" ] && [ "$candidate" != "(none)" ] &&
            dpkg --compare-versions "$installed" lt "$candidate"; then
            upgradable+=("$p")
        fi
    done
fi

missing=()
for p in "${packages[@]}"; do
    dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed" || missing+=("$p")
done
# Node.js and npm for the ORM tests (proxy/test/orm/drizzle): Debian's
# where the machine has none (a Node.js from elsewhere, npm included, stays)
command -v node > /dev/null || missing+=(nodejs)
command -v npm > /dev/null || missing+=(npm)
here=$(cd "$(dirname "$0")" && pwd)
if [ ${#missing[@]} = 0 ] && [ ${#upgradable[@]} = 0 ]; then
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
echo "deps: installing ${missing[*]} ${upgradable[*]}"
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
    "${missing[@]}" "${upgradable[@]}" > /dev/null
"$here/go.sh" install
