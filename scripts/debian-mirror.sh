#!/usr/bin/env bash
# debian-mirror.sh — print the Debian mirror this machine's apt already uses
# (deb822 .sources or one-line .list files), without a trailing slash, for
# what is fetched outside apt's own configuration: source packages
# (fetch-debian-source.sh), the clean root of the packages suite
# (test/packages/run.sh) and Debian's reference packages
# (test/packages/like_debian.py).  Exit 1 when apt names none.
set -euo pipefail
mirror=$( { grep -hs '^URIs:' /etc/apt/sources.list.d/*.sources | awk '{print $2}';
            grep -hsE '^deb ' /etc/apt/sources.list /etc/apt/sources.list.d/*.list |
                sed -E 's/^deb +(\[[^]]*\] +)?//' | awk '{print $1}'; } |
          grep -E '/debian/?$' | head -n 1) || true
[ -n "$mirror" ] || exit 1
echo "${mirror%/}"
