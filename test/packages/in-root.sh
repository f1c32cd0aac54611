#!/bin/sh
# in-root.sh — run as root inside a clean Debian 12 root (test/packages/run.sh
# makes it with mmdebstrap): install pgcipher's packages with apt from the
# local repository in /srv/pgcipher and use them as a DBA uses PostgreSQL
# on Debian.  Every check prints "ok N - ..." or "not ok N - ..." (TAP);
# the first failure stops the script.
#
# Section 2b prints what the installed server says of its build (pg_config
# --configure, pg_available_extensions) for run.sh's comparison with
# Debian's own packages (like_debian.py), and uses what Debian's options
# bring: the procedural languages, uuid-ossp, XML, the JIT, PAM, LDAP and
# GSSAPI lines in pg_hba.conf.
#
# MAJOR: the PostgreSQL major of the packages.  PHASE: "checks" (sections
# 1-4) or "purge" (section 5); run.sh runs the operations guide's blocks
# (guide.py) between the two.  The TAP count goes on in $TAP_COUNT.
set -eu
MAJOR=${MAJOR:?}
PHASE=${PHASE:?}
TAP_COUNT=${TAP_COUNT:?}
n=$(cat "$TAP_COUNT" 2> /dev/null || echo 0)
ok() { n=$((n + 1)); echo "$n" > "$TAP_COUNT"; echo "ok $n - $*"; }
fail() { n=$((n + 1)); echo "not ok $n - $*"; exit 1; }
check() { what=$1; shift; if "$@"; then ok "$what"; else fail "$what"; fi; }
psql_as() { runuser -u postgres -- psql -X -At -p "$1" -d postgres -c "$2"; }
# whatever happens, no server is left running in the root (mmdebstrap then
# unmounts it)
stop_all() {
    pg_lsclusters -h 2> /dev/null | while read -r v c _; do
        pg_ctlcluster "$v" "$c" stop -m immediate > /dev/null 2>&1 || true
    done
    pkill -u pgcipher-proxy > /dev/null 2>&1 || true
}
trap stop_all EXIT

export DEBIAN_FRONTEND=noninteractive LC_ALL=C.UTF-8
# no daemon starts from a maintainer script in a chroot
printf '#!/bin/sh\nexit 101\n' > /usr/sbin/policy-rc.d; chmod 755 /usr/sbin/policy-rc.d

if [ "$PHASE" = checks ]; then
# --- 1. install from the local repository --------------------------------
echo "deb [trusted=yes] file:/srv/pgcipher ./" > /etc/apt/sources.list.d/pgcipher.list
# the DBA's choice before the first install: no unencrypted "main" cluster
mkdir -p /etc/postgresql-common
echo "create_main_cluster = false" >> /etc/postgresql-common/createcluster.conf
apt-get update -qq
apt-get install -y -qq --no-install-recommends "pgcipher-postgresql-$MAJOR" \
    "postgresql-$MAJOR-pgcipher-columns" pgcipher-proxy pgcipher-tools > /tmp/install.log 2>&1 \
    || { tail -30 /tmp/install.log; fail "apt-get install of pgcipher's packages"; }
ok "apt-get install pgcipher-postgresql-$MAJOR, its columns, pgcipher-proxy, pgcipher-tools"
check "the server package recommends its JIT, as Debian's does" \
    sh -c "dpkg-query -W -f='\${Recommends}' pgcipher-postgresql-$MAJOR | grep -q 'pgcipher-postgresql-$MAJOR-jit'"
# the packages Debian ships beside its server: the JIT and the languages
apt-get install -y -qq --no-install-recommends "pgcipher-postgresql-$MAJOR-jit" "pgcipher-postgresql-plperl-$MAJOR" \
    "pgcipher-postgresql-plpython3-$MAJOR" "pgcipher-postgresql-pltcl-$MAJOR" > /tmp/install-pl.log 2>&1 \
    || { tail -30 /tmp/install-pl.log; fail "apt-get install of the JIT and the procedural languages"; }
ok "apt-get install pgcipher-postgresql-$MAJOR-jit, -plperl-$MAJOR, -plpython3-$MAJOR, -pltcl-$MAJOR"
check "the JIT package provides postgresql-$MAJOR-jit" \
    sh -c "dpkg-query -W -f='\${Provides}' pgcipher-postgresql-$MAJOR-jit | grep -q 'postgresql-$MAJOR-jit (='"
check "the server package provides postgresql-$MAJOR (dpkg sees it installed)" \
    sh -c "dpkg-query -W -f='\${Provides}' pgcipher-postgresql-$MAJOR | grep -q 'postgresql-$MAJOR (='"
check "the system's libssl3 is Debian's, untouched" \
    sh -c "dpkg-query -W -f='\${Version}' libssl3 | grep -q deb12"
check "postgres finds the private OpenSSL through its run path" \
    sh -c "ldd /usr/lib/postgresql/$MAJOR/bin/postgres | grep 'libcrypto.so.3 =>' | grep -q '/pgcipher/openssl/libcrypto.so.3'"
version=$("/usr/lib/postgresql/$MAJOR/bin/postgres" --version)
echo "# $version"
check "the version names pgcipher and Debian's upload" sh -c "echo '$version' | grep -q 'pgcipher .*Debian'"

# --- 2. an encrypted cluster, as postgresql-common makes them -------------
install -d -m 700 -o postgres -g postgres /etc/pgcipher-keys
head -c 24 /dev/urandom | base64 > /etc/pgcipher-keys/main.pass
chown postgres: /etc/pgcipher-keys/main.pass; chmod 600 /etc/pgcipher-keys/main.pass
pg_createcluster "$MAJOR" enc -p 5433 -- --data-checksums --encryption=aes-256 \
    --encryption-key-command='cat /etc/pgcipher-keys/main.pass' > /tmp/create.log 2>&1 \
    || { cat /tmp/create.log; fail "pg_createcluster $MAJOR enc with --encryption"; }
ok "pg_createcluster $MAJOR enc -- --encryption=aes-256 --encryption-key-command=..."
pg_createcluster "$MAJOR" plain -p 5434 > /dev/null 2>&1 || fail "pg_createcluster $MAJOR plain"
pg_ctlcluster "$MAJOR" enc start || { tail -20 "/var/log/postgresql/postgresql-$MAJOR-enc.log"; fail "pg_ctlcluster $MAJOR enc start"; }
pg_ctlcluster "$MAJOR" plain start || fail "pg_ctlcluster $MAJOR plain start"
ok "pg_ctlcluster starts both clusters"
pg_lsclusters
check "pg_lsclusters shows both online" sh -c "[ \$(pg_lsclusters -h | grep -c online) -ge 2 ]"
check "SHOW data_encryption on enc: aes-256" [ "$(psql_as 5433 'SHOW data_encryption')" = aes-256 ]
check "SHOW data_encryption on plain: off" [ "$(psql_as 5434 'SHOW data_encryption')" = off ]
check "its log is in /var/log/postgresql" test -s "/var/log/postgresql/postgresql-$MAJOR-enc.log"

# markers in a table, an index, TOAST and the WAL of both clusters
for port in 5433 5434; do
    psql_as $port "CREATE TABLE secrets (id int PRIMARY KEY, v text); CREATE INDEX ON secrets (substr(v, 1, 30));
        INSERT INTO secrets SELECT g, 'PKGMARKER-' || g || repeat('x', 40) FROM generate_series(1, 2000) g;
        INSERT INTO secrets VALUES (0, 'PKGTOAST-' || (SELECT string_agg(md5(g::text), '') FROM generate_series(1, 400) g));
        CHECKPOINT;" > /dev/null
done
if psql_as 5433 "CREATE EXTENSION pgcipher_columns" > /dev/null; then ok "CREATE EXTENSION pgcipher_columns from its package"
else fail "CREATE EXTENSION pgcipher_columns"; fi

# --- 2b. configured and furnished like Debian's PostgreSQL ----------------
echo "# pg_config --configure: $("/usr/lib/postgresql/$MAJOR/bin/pg_config" --configure)"
echo "# pg_available_extensions: $(psql_as 5433 "SELECT string_agg(name, ' ' ORDER BY name) FROM pg_available_extensions")"
# each answer is what a build without the option cannot give
like_debian() { # what, SQL, expected answer
    got=$(psql_as 5433 "$2" 2>&1 | tail -n 1)
    if [ "$got" = "$3" ]; then ok "$1"; else echo "# got: $got"; fail "$1"; fi
}
like_debian "uuid-ossp (--with-uuid=e2fs): a version 4 UUID" \
    'CREATE EXTENSION "uuid-ossp"; SELECT uuid_generate_v4()::text ~ '"'"'^[0-9a-f-]{36}$'"'"'' t
like_debian "XML (--with-libxml): xpath over an xml value" \
    "SELECT (xpath('/a/b/text()', '<a><b>xml</b></a>'::xml))[1]::text" xml
like_debian "xml2's XSLT (--with-libxslt)" \
    "CREATE EXTENSION xml2; SELECT xslt_process('<a>x</a>', '<xsl:stylesheet version=\"1.0\" xmlns:xsl=\"http://www.w3.org/1999/XSL/Transform\"><xsl:output method=\"text\"/><xsl:template match=\"/\">xslt</xsl:template></xsl:stylesheet>')" xslt
like_debian "PL/Perl from pgcipher-postgresql-plperl-$MAJOR" \
    "CREATE EXTENSION plperl; CREATE FUNCTION lang_perl() RETURNS text LANGUAGE plperl AS 'return \"perl\";'; SELECT lang_perl()" perl
like_debian "PL/Python from pgcipher-postgresql-plpython3-$MAJOR" \
    "CREATE EXTENSION plpython3u; CREATE FUNCTION lang_py() RETURNS text LANGUAGE plpython3u AS 'return \"python\"'; SELECT lang_py()" python
like_debian "PL/Tcl from pgcipher-postgresql-pltcl-$MAJOR" \
    "CREATE EXTENSION pltcl; CREATE FUNCTION lang_tcl() RETURNS text LANGUAGE pltcl AS 'return tcl'; SELECT lang_tcl()" tcl
like_debian "the LLVM JIT from pgcipher-postgresql-$MAJOR-jit compiles a query's functions" \
    "SET jit = on; SET jit_above_cost = 0;
     CREATE FUNCTION jit_functions() RETURNS int LANGUAGE plpgsql AS \$\$
     DECLARE p json; BEGIN
         EXECUTE 'EXPLAIN (ANALYZE, FORMAT JSON) SELECT sum(id) FROM secrets WHERE v LIKE ''PKG%''' INTO p;
         RETURN (p->0->'JIT'->>'Functions')::int;
     END \$\$; SELECT jit_functions() > 0" t
# PAM, LDAP and GSSAPI lines that a build without them refuses (these
# addresses are documentation's, never contacted)
hba=/etc/postgresql/$MAJOR/enc/pg_hba.conf
cp "$hba" /tmp/pg_hba.conf.saved
cat >> "$hba" << 'EOF_HBA'
host nobody nobody 192.0.2.1/32 pam pamservice=postgresql
host nobody nobody 192.0.2.2/32 ldap ldapserver=ldap.example.net ldapbasedn="dc=example,dc=net"
hostgssenc nobody nobody 192.0.2.3/32 gss include_realm=0
EOF_HBA
like_debian "pg_hba.conf takes pam, ldap and gss lines (--with-pam, --with-ldap, --with-gssapi)" \
    "SELECT count(*) || ' rules, ' || count(error) || ' errors' FROM pg_hba_file_rules WHERE address LIKE '192.0.2.%'" \
    "3 rules, 0 errors"
cp /tmp/pg_hba.conf.saved "$hba"
pg_ctlcluster "$MAJOR" enc stop; pg_ctlcluster "$MAJOR" plain stop
enc_dir=/var/lib/postgresql/$MAJOR/enc
plain_dir=/var/lib/postgresql/$MAJOR/plain
found_enc=$(grep -rlaF PKGMARKER "$enc_dir" | wc -l)
found_plain=$(grep -rlaF PKGMARKER "$plain_dir" | wc -l)
echo "# files holding the marker: encrypted cluster $found_enc, unencrypted control $found_plain"
check "control: the unencrypted cluster's files hold the marker ($found_plain)" [ "$found_plain" -gt 0 ]
check "no file of the encrypted cluster holds the marker (WAL included)" [ "$found_enc" = 0 ]
pg_ctlcluster "$MAJOR" enc start
check "restarted with the key: the rows read back" [ "$(psql_as 5433 'SELECT count(*) FROM secrets')" = 2001 ]
pg_ctlcluster "$MAJOR" enc stop

# --- 3. pg_upgradecluster from Debian's PostgreSQL 15 into an encrypted one
apt-get install -y -qq --no-install-recommends postgresql-15 > /tmp/install15.log 2>&1 || fail "apt-get install postgresql-15"
# with checksums: initdb of 18 turns them on by default, pg_upgrade wants both alike
pg_createcluster 15 old -p 5435 -- --data-checksums > /dev/null 2>&1 || fail "pg_createcluster 15 old"
pg_ctlcluster 15 old start
psql_as 5435 "CREATE TABLE legacy AS SELECT g AS id, 'PKGOLD-' || g AS v FROM generate_series(1, 1000) g" > /dev/null
# pg_upgradecluster makes the new cluster with pg_createcluster, which runs
# initdb: initdb's environment defaults make it encrypted
export PGCIPHER_ENCRYPTION=aes-256 PGCIPHER_ENCRYPTION_KEY_COMMAND='cat /etc/pgcipher-keys/main.pass'
pg_upgradecluster -v "$MAJOR" --method=upgrade 15 old > /tmp/upgrade.log 2>&1 \
    || { tail -40 /tmp/upgrade.log; fail "pg_upgradecluster -v $MAJOR --method=upgrade 15 old"; }
unset PGCIPHER_ENCRYPTION PGCIPHER_ENCRYPTION_KEY_COMMAND
ok "pg_upgradecluster -v $MAJOR --method=upgrade 15 old, initdb's encryption from its environment"
if grep -q "comes from environment variable PGCIPHER_ENCRYPTION" /tmp/upgrade.log; then
    ok "initdb said where the cipher came from"
else echo "# (pg_upgradecluster did not show initdb's output)"; fi
new_port=$(pg_conftool "$MAJOR" old show -s port)
check "the upgraded cluster is aes-256" [ "$(psql_as "$new_port" 'SHOW data_encryption')" = aes-256 ]
check "the upgraded cluster answers as the old one" [ "$(psql_as "$new_port" 'SELECT count(*) FROM legacy')" = 1000 ]
psql_as "$new_port" CHECKPOINT > /dev/null
pg_ctlcluster "$MAJOR" old stop
found_new=$(grep -rlaF PKGOLD "/var/lib/postgresql/$MAJOR/old" | wc -l)
found_old=$(grep -rlaF PKGOLD /var/lib/postgresql/15/old | wc -l)
check "control: the old cluster's files hold its marker ($found_old)" [ "$found_old" -gt 0 ]
check "no file of the upgraded cluster holds it" [ "$found_new" = 0 ]

# --- 4. the proxy service ----------------------------------------------------
check "pgcipher-proxy's system user exists" getent passwd pgcipher-proxy
if command -v systemd-analyze > /dev/null; then
    if systemd-analyze verify /lib/systemd/system/pgcipher-proxy.service > /tmp/verify.log 2>&1; then
        ok "systemd-analyze verify pgcipher-proxy.service"
    else cat /tmp/verify.log; fail "systemd-analyze verify pgcipher-proxy.service"; fi
fi
# on a copy: the packaged file stays as installed, for the guide
pgcipher-keys new-cmk > /etc/pgcipher/check-cmk.hex 2>/dev/null || fail "pgcipher-keys new-cmk"
chown root:pgcipher-proxy /etc/pgcipher/check-cmk.hex; chmod 640 /etc/pgcipher/check-cmk.hex
sed -e 's|^# upstream = .*|upstream = host=/var/run/postgresql port=5433|' \
    -e 's|^# cmk-file = .*|cmk-file = /etc/pgcipher/check-cmk.hex|' /etc/pgcipher/proxy.conf > /etc/pgcipher/check.conf
chown root:pgcipher-proxy /etc/pgcipher/check.conf; chmod 640 /etc/pgcipher/check.conf
check "pgcipher-proxy --check-config on the packaged configuration" \
    runuser -u pgcipher-proxy -- pgcipher-proxy --config /etc/pgcipher/check.conf --check-config
rm /etc/pgcipher/check.conf /etc/pgcipher/check-cmk.hex

fi

# --- 5. purge keeps the data -------------------------------------------------
[ "$PHASE" = purge ] || exit 0
enc_dir=/var/lib/postgresql/$MAJOR/enc
apt-get purge -y -qq "pgcipher-postgresql-$MAJOR" "postgresql-$MAJOR-pgcipher-columns" > /tmp/purge.log 2>&1 \
    || { cat /tmp/purge.log; fail "apt-get purge"; }
ok "apt-get purge pgcipher-postgresql-$MAJOR"
check "the encrypted cluster's data directory and key ring are kept" test -f "$enc_dir/pg_encryption/keyring"
check "its configuration is kept" test -f "/etc/postgresql/$MAJOR/enc/postgresql.conf"
echo "1..$n"
