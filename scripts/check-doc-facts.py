#!/usr/bin/env python3
"""check-doc-facts.py — every number the docs state about the test suites
and the patch series matches the code it describes.

Checked, in README.md, the design (docs/design.md and docs/design/*.md),
proxy/README.md and server/README.md:

- "a corpus of N statements" / "the N-statement corpus": the 'ok:' and
  'refuse:' lines of proxy/test/corpus.txt;
- "applies N small patches" (a number or an English word): the files in
  server/patches/17 (the series the sentence describes says so: "applies
  N small patches" is 17's count unless written "on 18 applies N");
- "pgvector ... N regression tests" and "(N tests": the counts that
  test/extensions/run.sh checks (PGVECTOR_REGRESS_COUNT, PGVECTOR_TAP_COUNT).

And the wording of every README and design document: no sentence promises
work as if it were to come ("is planned", "to come", "a later piece of
work", "not yet written/built/implemented", a table cell ending in
"later") outside the design's section of known limitations and open
questions, where the docs say what is not done.

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

DOCS = [
    "README.md",
    "docs/design.md",
    *(f"docs/design/{p}.md" for p in ("tde", "keys", "upstream", "columns", "proxy")),
    "proxy/README.md",
    "server/README.md",
]


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


# documents whose wording is checked, and phrases that announce work as
# if it were to come
WORDING_DOCS = DOCS + ["columns/README.md", "bench/README.md", "docs/operations.md", "packaging/README.md"]
STALE = re.compile(
    r"\bis planned\b|\bto come\b|\blater piece of work\b|\bnot yet (?:written|built|implemented)\b|\blater\s*\|",
    re.I,
)
LIMITS_HEADING = "## 14. Known limitations and open questions"


def wording(top):
    problems = []
    for doc in WORDING_DOCS:
        path = os.path.join(top, doc)
        if not os.path.exists(path):
            continue
        with open(path) as f:
            text = f.read()
        skip = None
        if LIMITS_HEADING in text:  # that section, up to the next "## "
            a = text.index(LIMITS_HEADING)
            b = text.find("\n## ", a + len(LIMITS_HEADING))
            skip = (a, b if b >= 0 else len(text))
        for m in STALE.finditer(text):
            if skip and skip[0] <= m.start() < skip[1]:
                continue
            line = text.count("\n", 0, m.start()) + 1
            problems.append(
                f"{doc}:{line}: {m.group(0)!r} announces work as if to come: say what is done, or move it to design section 14"
            )
    return problems


def main():
    top = sys.argv[1] if len(sys.argv) > 1 else os.path.join(os.path.dirname(__file__), "..")
    problems = check(top) + wording(top)
    for p in problems:
        print(p)
    print(f"check-doc-facts: {len(problems)} problem(s)")
    return 1 if problems else 0


if __name__ == "__main__":
    sys.exit(main())
