#!/usr/bin/env python3
"""check-design-refs.py — every reference to a section of the design names a
heading that exists.

The design is the project's source of truth: docs/design.md, its index (with
sections 1, 2 and 14), and one file per part under docs/design/ (TDE, keys,
upstream changes, columns, the proxy); section numbers are the design's,
whichever file holds them.  Code comments, tests, READMEs and the design
itself point into it by section number ("design 13.5a", "docs/design.md,
section 9.2", "docs/design/columns.md, section 13.5a") or by title
("docs/design.md ("Key file")").  This script reads every file git
tracks (`git ls-files`, text files only) and prints each reference that does
not resolve as

    FILE:LINE: TEXT    (why)

and exits 1 if there is any (2 on a usage error), 0 otherwise.

Sections.  A numbered heading of a design file is "## N. Title" (section N)
or "### N.M[a] Title" (section N.M[a], which must sit under "## N.").
Headings without a number ("### Format" under "## 6. WAL") are addressable
only through their parent's number, or by their title (below).  Two headings
with one number, or a "### N.M" outside "## N.", are reported as errors of
design.md itself.

Which text counts as a reference to design.md (the rule):

  1. Anywhere, a section number right after the word "design" — bare,
     "design.md", "docs/design.md", in backticks, or as a Markdown link
     "[docs/design.md](docs/design.md)" — separated from it only by spaces,
     a line break (comment leaders such as //, --, #, * are skipped), a comma
     or colon, and optionally "section(s)" or "§" (a bare "N. " that begins
     the next line is a numbered list's item, not a reference):
         design 13.5a     (design 13.4)     design §15.8     design.md §9
         design section 13     docs/design.md, section 6     design §6
         [docs/design.md](docs/design.md), section 7     design 13.3, 13.6
  2. Anywhere, "section N" or "§N" right before "of/in [the] [docs/]design":
         section 6 of the design     §9 of docs/design.md
  3. Anywhere, a Markdown anchor such as "design/keys.md#9-key-file": it
     must be the GitHub anchor of a heading of that file.
  4. Inside the design's files themselves, and inside any file with a line that
     reads, after its comment leader, only "§ means docs/design.md", a bare
     "section N", "sections N and M", "sections N–M" or "§N" — except where
     the same clause (back to the previous ".", ";", "(", ")" or "|") cites
     another document: a quoted title, or RFC, IEEE, NIST, FIPS, ISO, SP,
     CCS, USENIX, NDSS, CRYPTO or EUROCRYPT ('Lewi and Wu, "Order-Revealing
     ...", CCS 2016, section 4' is the paper's section 4).
  A "§" or "section N" anywhere else — PostgreSQL's documentation, RFC 5649
  section 6, IEEE 1619 §5, a vendor's report — is not a reference to
  design.md and is not checked.

Lists and ranges ("sections 2 and 11", "sections 2–12", "design 13.3, 13.6")
check every number named (both ends of a range).  A number with more than two
levels (N.M.K) never resolves.

Titles.  A quoted title right after a reference — 'docs/design.md ("Key
file")', 'docs/design.md, "Threat model"', 'design 13.3, "Plaintext encodings"',
'design section 13 ("Encrypted columns", ...' — must be the title of a heading
(within the numbered section when a number precedes it; "Title" also matches
"Title (...)" and "Title: ...") or a paragraph's bold lead "**Title**" in it.

Usage: check-design-refs.py [-v] [REPO_ROOT] | --self-test
  REPO_ROOT defaults to the checkout holding this script; -v also lists every
  reference found; --self-test checks the rule above on built-in samples of
  each form, resolving and dangling, against a miniature design.md of its own
  (so it does not change when docs/design.md does).
"""

import os
import re
import subprocess
import sys

DESIGN = "docs/design.md"  # the index; the parts are DESIGN_DIR/*.md
DESIGN_DIR = "docs/design"


def is_design_file(path):
    return path == DESIGN or (path.startswith(DESIGN_DIR + "/") and path.endswith(".md"))


NUM = r"(?>\d+(?:\.\d+[a-z]?)*)"  # 13, 13.5a, and N.M.K (which fails)
# a list item must end the list or be followed by punctuation or a conjunction,
# so "design 13.3, 16 bytes" does not read 16 as a section
ITEM_END = r"(?=\s*(?:[,;:.)\]\"'`”]|and\b|or\b|to\b|of\b|in\b|$)|\s*[–—-]\s*\d)"
SEP_ITEM = r"(?:\s*(?:,|&|\band\b|\bor\b|\bto\b|[–—-])\s*(?:§§?\s*|sections?\s+)?)"
NUMLIST = rf"(?P<nums>{NUM}(?:{SEP_ITEM}{NUM}{ITEM_END})*)"
TITLE = r"(?:\s*\(\s*|\s*,\s*|\s+)[\"“](?P<title>[^\"”]{1,80})[\"”]"

# the word design in its spellings: design, design.md, docs/design.md, `...`,
# [docs/design.md](docs/design.md)
ANCHOR = r"(?<![\w/-])(?:\.\./)?(?:docs/)?design(?:/[\w-]+)?(?:\.md)?(?![\w-])(?:`|\]\([^)\s]*\))?"
AFTER_ANCHOR = r"(?:\s+doc(?:ument)?\b)?\s*[,:]?\s*"
KIND = r"(?:§§?\s*|\bsections?\s+)"

RE_FORWARD = re.compile(
    rf"{ANCHOR}{AFTER_ANCHOR}(?P<kind>{KIND})?(?<![\w.]){NUMLIST}(?:{TITLE})?", re.IGNORECASE | re.MULTILINE
)
RE_BACKWARD = re.compile(
    rf"{KIND}{NUMLIST}\s+(?:of|in)\s+(?:the\s+)?`?(?:\.\./)?(?:docs/)?design(?![\w-])",
    re.IGNORECASE | re.MULTILINE,
)
RE_TITLE_ONLY = re.compile(
    rf"{ANCHOR}`?(?:\s*\(\s*|\s*,\s*)[\"“](?P<title>[^\"”]{{1,80}})[\"”]", re.IGNORECASE
)
RE_SLUG = re.compile(r"design(?:/(?P<part>[\w-]+))?\.md#(?P<slug>[\w-]+)", re.IGNORECASE)
RE_BARE = re.compile(rf"(?<![\w.]){KIND}{NUMLIST}(?:{TITLE})?", re.IGNORECASE | re.MULTILINE)
RE_DECLARES = re.compile(r"^\s*(?:#+|//+|--+|/?\*+)?\s*§ means docs/design\.md\.?\s*$", re.MULTILINE)
RE_FOREIGN = re.compile(
    r"(?:[\"“][^\"”]+[\"”]|\b(?:RFC|IEEE|NIST|FIPS|ISO|SP|CCS|USENIX|NDSS|CRYPTO|EUROCRYPT)\b)"
    r"[^.;()|]*$"
)
RE_COMMENT_LEADER = re.compile(r"^\s*(?:/\*+|\*+(?!\*)|//+|--+|#+|;+)?\s*")


def norm_title(t):
    return " ".join(t.replace("`", "").replace("*", "").split()).casefold()


class Design:
    """Headings of the design (the index and its parts): numbers, titles,
    line ranges, each in its file."""

    def __init__(self, files):
        """files: [(path, text)], the index first."""
        self.errors = []  # (path, line, message)
        self.numbers = {}  # "13.5a" -> (path, line, title)
        self.sections = []  # [path, start, end, number or None, title, level]
        self.slugs = {}  # path -> set of anchors
        self.lines = {}  # path -> lines
        for path, text in files:
            self._read(path, text)

    def _read(self, path, text):
        in_fence = False
        top = None
        lines = text.split("\n")
        self.lines[path] = lines
        slugs = self.slugs.setdefault(path, set())
        mine = []
        for i, line in enumerate(lines, 1):
            if line.startswith("```"):
                in_fence = not in_fence
                continue
            m = re.match(r"^(#{1,6})\s+(.*?)\s*$", line)
            if in_fence or not m:
                continue
            level, rest = len(m.group(1)), m.group(2)
            slugs.add(self.slug(rest))
            number = None
            if level == 2:
                n = re.match(r"^(\d+)\.\s+(.*)$", rest)
                top = None
                if n:
                    number, rest = n.group(1), n.group(2)
                    top = number
            elif level == 3:
                n = re.match(r"^(\d+\.\d+[a-z]?)\s+(.*)$", rest)
                if n:
                    number, rest = n.group(1), n.group(2)
                    if number.split(".")[0] != top:
                        self.errors.append(
                            (path, i, f"heading {number} is not under '## {number.split('.')[0]}.'")
                        )
            if number is not None:
                if number in self.numbers:
                    at = self.numbers[number]
                    self.errors.append((path, i, f"section {number} also at {at[0]}:{at[1]}"))
                else:
                    self.numbers[number] = (path, i, rest)
            mine.append([path, i, len(lines), number if number else top if level > 2 else None, rest, level])
        # a section runs to the next heading of its level or above, in its file
        for k, sec in enumerate(mine):
            for t in mine[k + 1 :]:
                if t[5] <= sec[5]:
                    sec[2] = t[1] - 1
                    break
        self.sections += mine

    @staticmethod
    def slug(title):
        s = title.strip().lower()
        s = re.sub(r"[^\w\- ]", "", s)
        return s.replace(" ", "-")

    def span(self, number):
        """The file, first and last line of numbered section NUMBER, or None."""
        if number not in self.numbers:
            return None
        path, line, _ = self.numbers[number]
        for sec in self.sections:
            if sec[0] == path and sec[1] == line:
                return path, sec[1], sec[2]
        return None

    def has_title(self, title, number=None):
        want = norm_title(title)
        spans = [(p, 1, len(ls)) for p, ls in self.lines.items()] if number is None else [self.span(number)]
        for path, lo, hi in spans:
            for sec in self.sections:
                if sec[0] == path and lo <= sec[1] <= hi:
                    t = norm_title(sec[4])
                    if want in (t, re.split(r"\s*[(:]", t)[0]):
                        return True
            lines = self.lines[path]
            for i in range(lo, hi + 1):
                m = re.match(r"^\s*(?:[*-]\s+)?\*\*([^*]+)\*\*", lines[i - 1])
                if m and norm_title(m.group(1)).rstrip(".:") == want:
                    return True
        return False


def logical_text(text):
    """The file as one string, comment leaders of continuation lines dropped,
    plus a map from offset to line."""
    parts, starts, pos = [], [], 0
    for line in text.split("\n"):
        body = RE_COMMENT_LEADER.sub("", line, count=1) if parts else line
        lead = len(line) - len(body)
        starts.append((pos, lead))
        parts.append(body)
        pos += len(body) + 1
    return "\n".join(parts), starts


def line_of(starts, offset):
    lo, hi = 0, len(starts) - 1
    while lo < hi:
        mid = (lo + hi + 1) // 2
        if starts[mid][0] <= offset:
            lo = mid
        else:
            hi = mid - 1
    return lo + 1


def numbers_of(nums):
    """Every section number a list or range names."""
    return re.findall(NUM, nums)


def check_file(path, text, design, is_design, found):
    problems = []
    joined, starts = logical_text(text)
    lines = text.split("\n")
    seen = set()

    def report(offset, why):
        ln = line_of(starts, offset)
        if (ln, why) not in seen:
            seen.add((ln, why))
            problems.append((path, ln, lines[ln - 1].strip(), why))

    def check_nums(m):
        nums = numbers_of(m.group("nums"))
        found.append((path, line_of(starts, m.start("nums")), m.group(0)))
        for n in nums:
            if n not in design.numbers:
                report(m.start("nums"), f"no section {n} in the design ({DESIGN} and {DESIGN_DIR}/)")
        title = m.groupdict().get("title")
        if title and len(nums) == 1 and nums[0] in design.numbers:
            if not design.has_title(title, nums[0]):
                report(m.start("title"), f'section {nums[0]} has no heading or bold lead "{title}"')

    def list_item(m):
        # "... docs/design.md\n 3. Next item": a numbered list, not a section
        at = m.start("nums")
        return (
            "kind" in m.re.groupindex
            and not m.group("kind")
            and re.match(r"\d+\.\s", joined[at : at + 8])
            and line_of(starts, at) != line_of(starts, m.start())
            and starts[line_of(starts, at) - 1][0] == at
        )

    done = set()
    for rx in (RE_FORWARD, RE_BACKWARD):
        for m in rx.finditer(joined):
            if m.start("nums") in done or list_item(m):
                continue
            done.add(m.start("nums"))
            check_nums(m)
    for m in RE_TITLE_ONLY.finditer(joined):
        found.append((path, line_of(starts, m.start("title")), m.group(0)))
        if not design.has_title(m.group("title")):
            report(m.start("title"), f'no heading or bold lead "{m.group("title")}" in the design')
    for m in RE_SLUG.finditer(joined):
        found.append((path, line_of(starts, m.start("slug")), m.group(0)))
        target = f"{DESIGN_DIR}/{m.group('part')}.md" if m.group("part") else DESIGN
        if m.group("slug").lower() not in design.slugs.get(target, ()):
            report(m.start("slug"), f"no heading with anchor #{m.group('slug')} in {target}")
    if is_design or RE_DECLARES.search(text):
        for m in RE_BARE.finditer(joined):
            if m.start("nums") in done:
                continue
            clause = joined[max(0, m.start() - 200) : m.start()]
            if RE_FOREIGN.search(clause):
                continue
            done.add(m.start("nums"))
            check_nums(m)
    return problems


# --self-test: a miniature design.md, and (text, dangling?) samples of each
# form of the rule, resolving and not, checked against it.
SELF_TEST_DOC = """# design

## 2. Threat model

## 6. WAL

### Format

## 7. Every file

## 11. Room

## 12. Upstream

## 13. Encrypted columns

### 13.3 Ciphertext format

**Plaintext encodings** (payload):

### 13.4 Leakage

### 13.5 Order-revealing encryption

### 13.5a MATCH (text only): substring search

### 13.6 Keys

## 15. The wire proxy

### Limits

### 15.8 Computed in the proxy
"""
SELF_TEST_PART = "# design: keys\n\n## 9. Key file\n"
# "@" stands for the word design and "~" for 99, a section design.md lacks:
# this file, like any scan of the repository, finds no dangling reference in
# them.
SELF_TEST = [
    ("@ 13.5a", False),
    ("(@ 13.4)", False),
    ("@ §15.8", False),
    ("@.md §9", False),
    ("@ §6", False),
    ("docs/@.md, section 6", False),
    ("@ section 13", False),
    ("[docs/@.md](docs/@.md), section 7", False),
    ("`docs/@.md`,\n// section 15.", False),
    ("(@\n-- 13.5a)", False),
    ("section 6 of the @", False),
    ("§9 of docs/@.md", False),
    ("@ 13.3, 13.6 and 15.8.", False),
    ("@ 13.3, 16 bytes", False),
    ('docs/@.md ("Key file")', False),
    ('@ 13.3, "Plaintext encodings"', False),
    ("@/keys.md#9-key-file", False),
    ("docs/@/keys.md, section 9", False),
    ("@.md#9-key-file", True),
    ("docs/@.md\n ~. Next item", False),
    ("@ ~", True),
    ("@ 13.~", True),
    ("@ 13.5z", True),
    ("@ §~", True),
    ("@.md §~", True),
    ("docs/@.md, section ~", True),
    ("@ 4.1.~", True),
    ("(@\n * 13.~)", True),
    ("`docs/@.md`,\n# section ~.", True),
    ("@ §6 and §~", True),
    ("sections 2–~ of the @", True),
    ('docs/@.md ("Key files")', True),
    ('@ 13.5, "Plaintext encodings"', True),
    ("@.md#9-key", True),
    ("# § means docs/@.md\n§~", True),
    ("IEEE 1619 §~", False),
    ("RFC 5649 section ~", False),
    ("PostgreSQL docs §~", False),
    ("@ed ~", False),
    ("§~", False),
]
SELF_TEST_DESIGN = [
    ("section 9", False),
    ("sections 2 and 11", False),
    ("sections 2–12", False),
    ("section ~", True),
    ("(see section ~)", True),
    ("sections 2 and ~", True),
    ("| x | section ~ |", True),
    ('Lewi and Wu, "Title", CCS 2016,\nsection ~)', False),
    ("RFC 5649 section ~", False),
]


def self_test():
    design = Design([(DESIGN, SELF_TEST_DOC), (f"{DESIGN_DIR}/keys.md", SELF_TEST_PART)])
    bad = len(design.errors)
    for cases, is_design in ((SELF_TEST, False), (SELF_TEST_DESIGN, True)):
        for text, dangling in cases:
            text = text.replace("@", "design").replace("~", "99")
            got = check_file("self-test", text, design, is_design, [])
            if bool(got) != dangling:
                bad += 1
                print(
                    f"self-test: {text!r} {'passed' if not got else 'failed'}, "
                    f"should have {'failed' if dangling else 'passed'}"
                )
    print(f"check-design-refs: self-test, {len(SELF_TEST) + len(SELF_TEST_DESIGN)} cases, {bad} wrong")
    return bad


def main(argv):
    verbose = "-v" in argv[1:2]
    selftest = "--self-test" in argv[1:2]
    if verbose or selftest:
        argv = argv[:1] + argv[2:]
    if len(argv) > 2:
        print(__doc__.split("\n\n")[-1].strip(), file=sys.stderr)
        return 2
    if selftest:
        return 1 if self_test() else 0
    root = argv[1] if len(argv) == 2 else os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
    try:
        # the tests run as another user than the checkout's owner: git would
        # refuse the repository as of dubious ownership; listing is harmless
        files = (
            subprocess.run(
                ["git", "-c", f"safe.directory={os.path.abspath(root)}", "-C", root, "ls-files", "-z"],
                check=True,
                capture_output=True,
            )
            .stdout.decode()
            .split("\0")
        )
    except (OSError, subprocess.CalledProcessError) as e:
        why = (getattr(e, "stderr", None) or b"").decode(errors="replace").strip() or e
        print(f"check-design-refs: cannot list files of {root}: {why}", file=sys.stderr)
        return 2
    try:
        parts = (
            sorted(
                f"{DESIGN_DIR}/{n}" for n in os.listdir(os.path.join(root, DESIGN_DIR)) if n.endswith(".md")
            )
            if os.path.isdir(os.path.join(root, DESIGN_DIR))
            else []
        )
        texts = []
        for path in [DESIGN, *parts]:
            with open(os.path.join(root, path), encoding="utf-8") as f:
                texts.append((path, f.read()))
        design = Design(texts)
    except OSError as e:
        print(f"check-design-refs: {e}", file=sys.stderr)
        return 2

    problems = [(path, ln, design.lines[path][ln - 1].strip(), why) for path, ln, why in design.errors]
    checked = 0
    found = []
    for path in files:
        full = os.path.join(root, path)
        if not path or not os.path.isfile(full):
            continue
        try:
            with open(full, "rb") as f:
                raw = f.read()
            if b"\0" in raw[:8192]:
                continue
            text = raw.decode("utf-8")
        except (OSError, UnicodeDecodeError):
            continue
        checked += 1
        problems += check_file(path, text, design, is_design_file(path), found)

    if verbose:
        for path, ln, text in found:
            print(f"{path}:{ln}: reference: {' '.join(text.split())}")
    for path, ln, text, why in problems:
        print(f"{path}:{ln}: {text}    ({' '.join(why.split())})")
    print(
        f"check-design-refs: {checked} files, {len(design.numbers)} numbered sections, "
        f"{len(problems)} problem(s)"
    )
    return 1 if problems else 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
