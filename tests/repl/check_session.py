#!/usr/bin/env python3
"""Pipes a scripted session into a prompt (no terminal) and checks its output line by line.

  check_session.py --input session.cpp --expected session.expected [--show] [--echo] -- CMD [ARGS...]

CMD runs with the input on stdin, stdout and stderr merged (the prompts flush
both after each input, so the order is the order of the inputs).
--echo     CMD echoes the inputs itself (kiln-repl --echo): the transcript includes them.
--show     rewrites the input for clang-repl, which prints no values: a line without
           a final ';' becomes `show(LINE);`, or `DECL; show(NAME);` for a declaration
           `Type name = ...`. The same tutorial lines then run on both prompts.
Expected file: one line per output line, compared exactly, except
  "~ REGEX"   the line must match the Python regular expression (timings, code sizes),
  "# ..."     a comment, skipped.
Prints the time to the first prompt (kiln-repl --timing's "ready in" line, not
asserted; for other prompts the wall time of an empty session) and the whole
session's time. Exit status 0 when every line matches.
"""
import os
import re
import subprocess
import sys
import time


def to_show(lines):
    out = []
    for line in lines:
        s = line.rstrip()
        if not s or s.endswith(";") or s.endswith("{") or s.endswith("}") or s[0] in "#%." or s.startswith(" "):
            out.append(line)
            continue
        m = re.match(r"^[A-Za-z_][\w:<>]*\s+(\w+)\s*=", s)
        out.append(f"{s}; show({m.group(1)});" if m else f"show({s});")
    return out


def main(argv):
    if "--" not in argv:
        sys.exit(__doc__)
    opts, cmd = argv[: argv.index("--")], argv[argv.index("--") + 1:]
    def opt(name):
        return opts[opts.index(name) + 1]
    with open(opt("--input")) as f:
        lines = f.read().splitlines()
    if "--show" in opts:
        lines = to_show(lines)
    with open(opt("--expected")) as f:
        expected = [l for l in f.read().splitlines() if not l.startswith("# ")]

    startup = None
    if "--echo" not in opts:  # a prompt with no startup report: time an empty session
        t0 = time.time()
        subprocess.run(cmd, input="", text=True, capture_output=True, timeout=300)
        startup = time.time() - t0
    t0 = time.time()
    p = subprocess.run(cmd, input="\n".join(lines) + "\n", text=True, stdout=subprocess.PIPE,
                       stderr=subprocess.STDOUT, timeout=600)
    wall = time.time() - t0
    got = []
    for l in p.stdout.splitlines():
        m = re.match(r"kiln-repl: ready in ([0-9.]+) s$", l)
        if m:
            startup = float(m.group(1))
        else:
            got.append(l)
    while got and not got[-1].strip():
        got.pop()
    print(f"startup (to the first prompt): {startup:.2f} s; session: {wall:.2f} s; exit status {p.returncode}")

    bad = 0
    for i in range(max(len(got), len(expected))):
        e = expected[i] if i < len(expected) else None
        g = got[i] if i < len(got) else None
        if e is not None and g is not None:
            ok = re.fullmatch(e[2:], g) is not None if e.startswith("~ ") else e == g
        else:
            ok = False
        if not ok:
            bad += 1
            if bad <= 20:
                print(f"line {i + 1}:\n  expected: {e!r}\n  got:      {g!r}")
    if bad or p.returncode != 0:
        print(f"FAILED: {bad} of {max(len(got), len(expected))} lines differ; exit status {p.returncode}. Output:")
        print("\n".join(got))
        return 1
    print(f"all {len(expected)} lines match")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
