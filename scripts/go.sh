#!/usr/bin/env bash
# go.sh — find (or, as root, install) the Go toolchain that builds proxy/.
#
# proxy/ needs Go >= 1.25 (crypto/hkdf; pgx v5.12 asks for 1.25).  Debian 12 ships 1.19, so when no
# new enough `go` is on PATH, the pinned toolchain is fetched from the Go
# module proxy (the same zip `GOTOOLCHAIN` would fetch), sha256-checked and
# unpacked into /opt/pgcipher/go.
#
#   scripts/go.sh path       print the go binary to use, or fail
#   scripts/go.sh install    install the pinned toolchain if none fits (root)
set -euo pipefail

version=1.25.14
sha256=1bb543a7745d4c6e045a1bfdb4c4d5a0b05b71ee8b8ff72c0a351598b26991a4
url=https://proxy.golang.org/golang.org/toolchain/@v/v0.0.1-go$version.linux-amd64.zip
dest=${PGCIPHER_GO_DIR:-/opt/pgcipher/go}

fits() {
    local v
    v=$("$1" env GOVERSION 2>/dev/null) || return 1      # go1.25.14
    v=${v#go}
    [ "$(printf '%s\n1.25\n' "${v%%[-+ ]*}" | sort -V | head -1)" = 1.25 ]
}

find_go() {
    local g
    for g in "$(command -v go 2>/dev/null || true)" /usr/local/go/bin/go "$dest/bin/go"; do
        [ -n "$g" ] && [ -x "$g" ] && fits "$g" && { echo "$g"; return 0; }
    done
    return 1
}

case "${1:-path}" in
    path)
        find_go || { echo "pgcipher: no Go >= 1.25 found; run 'sudo ./pgcipher deps'" >&2; exit 1; } ;;
    install)
        find_go >/dev/null && exit 0
        echo "deps: fetching Go $version from the Go module proxy"
        tmp=$(mktemp -d)
        trap 'rm -rf "$tmp"' EXIT
        curl -fsSL --retry 3 -o "$tmp/go.zip" "$url"
        echo "$sha256  $tmp/go.zip" | sha256sum -c --quiet -
        (cd "$tmp" && unzip -q go.zip)
        rm -rf "$dest"
        mkdir -p "$(dirname "$dest")"
        mv "$tmp/golang.org/toolchain@v0.0.1-go$version.linux-amd64" "$dest"
        # module zips carry no file modes
        chmod -R a+rX "$dest"
        chmod a+x "$dest"/bin/* "$dest"/pkg/tool/*/*
        fits "$dest/bin/go" ;;
    *) echo "usage: $0 path|install" >&2; exit 2 ;;
esac
