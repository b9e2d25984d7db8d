#!/usr/bin/env python3
# kiln-repl's input handling without Cling (tools/repl/kiln_repl.py, loaded
# with its CMake placeholders filled by dummies): piped input that ends inside
# an unfinished block is reported on stderr with exit status 1 and not run;
# complete inputs run and exit 0. Exit 0 when every check passes.
import contextlib
import io
import sys

src_path = sys.argv[1]
src = open(src_path).read().replace("[@KILN_REPL_INCLUDE_DIRS@]", "[]")
ns = {"__name__": "kiln_repl_under_test", "__file__": src_path}
exec(compile(src, src_path, "exec"), ns)

failures = []


def check(cond, what):
    if not cond:
        failures.append(what)


def run(text):
    ran = []
    err = io.StringIO()
    with contextlib.redirect_stderr(err):
        rc = ns["run_inputs"](ns["lines_from"](io.StringIO(text), False, False), ran.append)
    return rc, ran, err.getvalue()


# Ends inside '{': the complete line before it runs, the block does not, status 1.
rc, ran, err = run("int a = 1;\nint f() {\n  return a;\n")
check(rc == 1, "unfinished '{': exit status %r, expected 1" % rc)
check(ran == ["int a = 1;"], "unfinished '{': ran %r, expected only the first line" % ran)
check("kiln-repl: the input ended inside an unfinished block" in err, "unfinished '{': stderr %r" % err)
check("its 2 lines, starting 'int f() {', were not run" in err, "unfinished '{': stderr %r" % err)
# A trailing backslash at the end is unfinished too.
rc, ran, err = run("int b = 2 + \\\n")
check(rc == 1 and ran == [], "trailing backslash: rc %r ran %r" % (rc, ran))
# A block closed before the end runs whole; status 0, nothing on stderr.
rc, ran, err = run("int g() {\n  return 3;\n}\ng()\n")
check(rc == 0, "closed block: exit status %r" % rc)
check(ran == ["int g() {\n  return 3;\n}", "g()"], "closed block: ran %r" % ran)
check(err == "", "closed block: stderr %r" % err)
# Braces inside strings and comments do not count.
rc, ran, err = run('auto s = "{";  // {\n')
check(rc == 0 and ran == ['auto s = "{";  // {'], "braces in a string/comment: rc %r ran %r" % (rc, ran))

for f in failures:
    print("FAIL:", f)
print("check_unfinished: %d failure(s)" % len(failures))
sys.exit(1 if failures else 0)
