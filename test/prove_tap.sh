# shellcheck shell=bash
# prove_tap.sh — sourced by test/extensions/run.sh and test/tools/run.sh.
#
# prove_tap DIR FILE: run one of our TAP files with the TAP framework that
# the installation in $prefix carries (PGXS's prove_installcheck does the
# same), its clusters and logs in DIR/tmp_check, made afresh.  Perl finds
# our shared test modules (LeakScan, KeyRotationTap: the server's TAP
# directory, where its own tests load them) and those beside FILE
# (KmsTap, BackupTap) on PERL5LIB.
prove_tap() {
    local dir=$1 file=$2
    rm -rf "$dir/tmp_check"; mkdir -p "$dir/tmp_check/log"
    (cd "$dir" && TESTLOGDIR="$dir/tmp_check/log" TESTDATADIR="$dir/tmp_check" \
        PG_REGRESS="${prefix:?}/lib/postgresql/pgxs/src/test/regress/pg_regress" \
        PERL5LIB="${PGCIPHER_TOP:?}/server/src/src/test/encryption:$(dirname "$file")${PERL5LIB:+:$PERL5LIB}" \
        prove -I "$prefix/lib/postgresql/pgxs/src/test/perl" "$file")
}
