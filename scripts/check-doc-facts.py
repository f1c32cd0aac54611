#!/usr/bin/env python3
"""check-doc-facts.py — every number the docs state about the test suites
and the patch series matches the code it describes.

Checked, in README.md, docs/design.md, proxy/README.md and server/README.md:

- "a corpus of N statements" / "the N-statement corpus": the 'ok:' and
  'refuse:' lines of proxy/test/corpus.txt;
- "applies N small patches" (a number or an English word): the files in
  server/patches/17 (the series the sentence describes says so: "applies
  N small patches" is 17's count unless written "on 18 applies N");
- "pgvector ... N regression tests" and "(N tests": the counts that
  test/extensions/run.sh checks (PGVECTOR_REGRESS_COUNT, PGVECTOR_TAP_COUNT).

Usage: check-doc-facts.py [TOP]   (prints each finding as FILE:LINE: ...;
exit status 1 if any)
"""

import os
import re
import sys

WORDS = {
    w: i
    for i, w in enumerate(
        "zero one two three four five six seven eight nine ten eleven twelve thirteen "
        "fourteen fifteen sixteen seventeen eighteen nineteen twenty".split()
    )
}
for i, w in enumerate(["one", "two", "three", "four", "five", "six", "seven", "eight", "nine"], 1):
    WORDS["twenty-" + w] = 20 + i
    WORDS["thirty-" + w] = 30 + i
WORDS["thirty"] = 30

DOCS = ["README.md", "docs/design.md", "proxy/README.md", "server/README.md"]


def number(text):
    text = text.lower()
    return int(text) if text.isdigit() else WORDS.get(text)


def facts(top):
    """(name, pattern, true value): each pattern's group 1 is a number"""
    with open(os.path.join(top, "proxy/test/corpus.txt")) as f:
        corpus = sum(1 for line in f if re.match(r"(ok|refuse): ", line))

    def series(major):
        d = os.path.join(top, "server/patches", major)
        return len([p for p in os.listdir(d) if p.endswith(".patch")]) if os.path.isdir(d) else 0

    patches = series("17")
    with open(os.path.join(top, "test/extensions/run.sh")) as f:
        run_sh = f.read()
    # the counts of every major's pin (major_pins), which the docs state
    # once: they must agree
    regress = {int(n) for n in re.findall(r"\bPGVECTOR_REGRESS_COUNT=(\d+)", run_sh)}
    tap = {int(n) for n in re.findall(r"\bPGVECTOR_TAP_COUNT=(\d+)", run_sh)}
    regress = regress.pop() if len(regress) == 1 else None
    tap = tap.pop() if len(tap) == 1 else None
    return [
        ("corpus statements", r"corpus of (\d+) statements", corpus),
        ("corpus statements", r"(\d+)-statement corpus", corpus),
        ("patches", r"(?<!on 18 )applies ([\w-]+)\s+small patches", patches),
        ("patches on 18", r"on 18 applies ([\w-]+)\s+small patches", series("18")),
        ("pgvector regression tests", r"pgvector(?: [\d.]+)?'s (\d+) regression tests", regress),
        ("pgvector TAP tests", r"TAP files \((\d+) tests", tap),
    ]


def check(top):
    problems = []
    for doc in DOCS:
        path = os.path.join(top, doc)
        if not os.path.exists(path):
            continue
        with open(path) as f:
            text = f.read()
        for name, pattern, value in facts(top):
            for m in re.finditer(pattern, text, re.S):
                line = text.count("\n", 0, m.start()) + 1
                stated = number(m.group(1))
                if stated != value:
                    problems.append(f"{doc}:{line}: says {m.group(1)} {name}, the code has {value}")
    return problems


def main():
    top = sys.argv[1] if len(sys.argv) > 1 else os.path.join(os.path.dirname(__file__), "..")
    problems = check(top)
    for p in problems:
        print(p)
    print(f"check-doc-facts: {len(problems)} problem(s)")
    return 1 if problems else 0


if __name__ == "__main__":
    sys.exit(main())
