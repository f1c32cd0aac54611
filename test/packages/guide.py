#!/usr/bin/env python3
"""guide.py — turn docs/operations.md into the shell script that runs it.

The packages suite (test/packages/run.sh) runs every shell block of the
operations guide in its clean Debian 12 root, in the guide's order and in
one bash that stops at the first failing command, so that the guide cannot
drift from what the packages do.  This script writes that bash script.

The guide's conventions, checked here:

  ```sh             a block the test runs, as root
  ```sh no-test     a block it cannot run; its first line must be a comment
                    "# not run by the test: WHY"
  COMMAND   # → V   the command's output must be V (a remark in parentheses
                    after it is not compared; "(...)" alone: no output):
                    the test compares, the reader sees what to expect

Any other fence that opens a shell block is an error, as is a guide with no
block the test runs.  Each block prints a TAP line "ok N - ..." when it
has run; a failure prints "not ok N - ..." with the guide's line number.
The count goes on from, and is saved back to, the file named by $TAP_COUNT
(in-root.sh's checks share the numbering).

Usage: guide.py docs/operations.md > guide.sh
"""

import re
import shlex
import sys

EXPECT = re.compile(r"^(?P<cmd>.*\S)\s+# → (?P<want>.+?)\s*$")
NO_TEST = "# not run by the test:"


def blocks(path):
    """(line of the fence, info string, lines) of each fenced block"""
    out, cur = [], None
    with open(path, encoding="utf-8") as f:
        for no, line in enumerate(f, 1):
            line = line.rstrip("\n")
            if cur is None:
                m = re.match(r"^```(.*)$", line)
                if m:
                    cur = (no, m.group(1).strip(), [])
            elif line.startswith("```"):
                out.append(cur)
                cur = None
            else:
                cur[2].append(line)
    if cur is not None:
        sys.exit(f"guide.py: {path}:{cur[0]}: a block is not closed")
    return out


def title(lines):
    """a short name for a block: its first command"""
    for line in lines:
        s = line.strip()
        if s and not s.startswith("#"):
            s = EXPECT.sub(r"\g<cmd>", s)
            return s if len(s) <= 60 else s[:57] + "..."
    return "(comments only)"


def main():
    if len(sys.argv) != 2:
        sys.exit(__doc__)
    path = sys.argv[1]
    out = [
        "#!/bin/bash",
        f"# generated from {path} by test/packages/guide.py: do not edit",
        "set -euo pipefail",
        "tap_count=${TAP_COUNT:?}",
        'n=$(cat "$tap_count" 2>/dev/null || echo 0)',
        'where="(before the first block)"',
        "trap 'echo \"not ok $((n + 1)) - $where failed (exit $?)\"' ERR",
        "expect() {  # want, then the command's output on stdin",
        '    got=$(cat); printf "%s\\n" "$got"',
        '    [ "$got" = "$1" ] || { echo "# expected: $1" >&2; return 1; }',
        "}",
    ]
    run = skipped = 0
    for no, info, lines in blocks(path):
        lang, _, flags = info.partition(" ")
        if lang not in ("sh", "bash"):
            continue
        if flags == "no-test":
            first = next((x for x in lines if x.strip()), "")
            if not first.startswith(NO_TEST):
                sys.exit(f'guide.py: {path}:{no}: a no-test block must start with "{NO_TEST} WHY"')
            skipped += 1
            out.append(f"echo {shlex.quote(f'# {path}:{no}: not run: {first[len(NO_TEST) :].strip()}')}")
            continue
        if flags:
            sys.exit(f"guide.py: {path}:{no}: unknown block kind ```{info}")
        run += 1
        name = f"{path}:{no} {title(lines)}"
        out.append(f"where={shlex.quote(name)}")
        out.append(f"echo {shlex.quote('# ' + name)}")
        for line in lines:
            m = EXPECT.match(line)
            if m and not line.rstrip().endswith("\\"):
                want = re.sub(r"^\(.*\)$", "", m.group("want"))
                want = re.sub(r"\s+\(.*\)$", "", want)
                out.append(f"{{ {m.group('cmd')}; }} | expect {shlex.quote(want)}")
            else:
                out.append(line)
        out.append('n=$((n + 1)); echo "$n" > "$tap_count"; echo "ok $n - $where"')
    if run == 0:
        sys.exit(f"guide.py: {path}: no block for the test to run")
    out.append(f"echo '# {path}: {run} blocks run, {skipped} not run'")
    print("\n".join(out))


if __name__ == "__main__":
    main()
