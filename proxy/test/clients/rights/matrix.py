"""The rights matrix with psycopg 3 (run by test.sh; design 13.12).

The operations of test.sh's psql matrix, with parameters (the extended
protocol, prepared), for each role; the outcomes must be the table test.sh
passes in RIGHTS_EXPECTED.
"""

import os
import sys

import psycopg

ENV = os.environ
OPS = [
    ("SELECT ssn FROM people WHERE id = %s", lambda i: (1,)),
    ("INSERT INTO people (id, ssn) VALUES (%s, %s)", lambda i: (i, "x")),
    ("SELECT id FROM people WHERE ssn = %s", lambda i: ("PGCMARK-E-rights-1",)),
    ("SELECT score FROM people WHERE id = %s", lambda i: (1,)),
    ("UPDATE people SET score = %s WHERE id = 1", lambda i: (11,)),
    ("SELECT id FROM people WHERE score = %s", lambda i: (11,)),
    ("UPDATE people SET score = score + %s WHERE id = 1", lambda i: (1,)),
]


def main():
    expected = ENV["RIGHTS_EXPECTED"].splitlines()
    got = []
    n = 1000
    for row in expected:
        role = row.split()[0]
        line = [role]
        with psycopg.connect(host=ENV["PGC_HOST"], port=ENV["PGC_PORT"], user=role, dbname=ENV["PGC_DB"],
                             autocommit=True) as conn:
            for sql, args in OPS:
                n += 1
                try:
                    cur = conn.execute(sql, args(n), prepare=True)
                    if cur.description:
                        cur.fetchall()
                    line.append("ok")
                except psycopg.Error as e:
                    line.append(e.sqlstate or repr(e))
        got.append(" ".join(line))
    if got != expected:
        print("psycopg: the rights matrix differs\ngot:\n" + "\n".join(got) + "\nwant:\n" + "\n".join(expected))
        return 1
    print(f"check: psycopg: rights matrix of {len(got)} roles x {len(OPS)} operations, with parameters, prepared, as expected")
    return 0


if __name__ == "__main__":
    sys.exit(main())
