#!/usr/bin/env bash
# pgJDBC client test (run by ../run.sh): builds the Maven project here into
# $PGCIPHER_BUILD/clients/jdbc (offline when ~/.m2 has everything, else
# from Maven Central) and runs pgcipher.clients.ClientTest with java -cp.
set -euo pipefail
: "${PGC_CACHE:?}" "${PGC_HERE:?}"
src=$PGC_HERE/jdbc
out=$PGC_CACHE/jdbc
mvn_args=(-q -B -Dstyle.color=never -f "$src/pom.xml" -Dclients.build="$out" package)
# rebuild when a source changed
stamp=$(cat "$src/pom.xml" "$src"/src/main/java/pgcipher/clients/*.java | sha256sum | cut -d' ' -f1)
if [ "$(cat "$out/.stamp" 2>/dev/null)" != "$stamp" ] || [ ! -s "$out/classpath.txt" ]; then
    rm -rf "$out"
    mvn -o "${mvn_args[@]}" > "$PGC_SCRATCH/mvn.log" 2>&1 || mvn "${mvn_args[@]}" ||
        { cat "$PGC_SCRATCH/mvn.log"; exit 1; }
    echo "$stamp" > "$out/.stamp"
fi
exec java -Duser.timezone=UTC -Xss1m -XX:+UseSerialGC -XX:TieredStopAtLevel=1 \
    -cp "$out/classes:$(cat "$out/classpath.txt")" pgcipher.clients.ClientTest
