#!/usr/bin/env bash
# Hibernate ORM's application (Harness.java) on pgJDBC; $1: the prefix of
# the result file.  Built with Maven into $PGCIPHER_BUILD/orm/hibernate
# (offline when ~/.m2 has everything, else from Maven Central), run with
# java -cp; Hibernate's own log goes to hibernate.log beside the results.
set -euo pipefail
here=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
out=${PGCIPHER_BUILD:?}/orm/hibernate
mvn_args=(-q -B -Dstyle.color=never -f "$here/pom.xml" -Dorm.build="$out" package)
stamp=$(cat "$here/pom.xml" "$here"/src/main/java/pgcipher/orm/*.java | sha256sum | cut -d' ' -f1)
if [ "$(cat "$out/.stamp" 2>/dev/null)" != "$stamp" ] || [ ! -s "$out/classpath.txt" ]; then
    rm -rf "$out"
    mkdir -p "$(dirname "$out")"
    mvn -o "${mvn_args[@]}" > "$1-mvn.log" 2>&1 || mvn "${mvn_args[@]}" >> "$1-mvn.log" 2>&1 ||
        { cat "$1-mvn.log"; exit 1; }
    echo "$stamp" > "$out/.stamp"
fi
echo "hibernate, pgjdbc:"
java -Duser.timezone=UTC -XX:+UseSerialGC -XX:TieredStopAtLevel=1 -Dorg.jboss.logging.provider=jdk \
    -Djava.util.logging.config.file=/dev/null \
    -cp "$out/classes:$(cat "$out/classpath.txt")" pgcipher.orm.Harness "$1-pgjdbc.json" 2> "$1-hibernate.log" |
    sed 's/^/    /'
rc=${PIPESTATUS[0]}
[ "$rc" = 0 ] || tail -30 "$1-hibernate.log"
exit "$rc"
