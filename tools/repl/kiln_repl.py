#!/usr/bin/env python3
# kiln-repl: an interactive C++20 prompt on Cling with kiln loaded.
#
# How Cling is driven (no cppyy/CPyCppyy needed): PyPI's cppyy-cling ships
# Cling as libCling.so, and cppyy-backend's libcppyy_backend.so is its C API.
# cppyy_backend.loader.load_cpp_backend() loads both with ctypes (starting
# Cling with its precompiled header of the standard library); through the C
# function cppyy_compile() we declare one small C++ function that calls
# gInterpreter->ProcessLine(line) (TCling: Cling's line processing, with value
# printing of bare expressions and `.` commands) and stores its address where
# ctypes can read it. Every line typed then goes through that function.
#
# Finding things. Paths below are filled in by CMake (tools/repl/CMakeLists.txt);
# a relative one is relative to this file's folder, so an installed copy works
# wherever the prefix is moved. Whichever python3 starts this file, kiln-repl
# re-runs itself with $KILN_REPL_PYTHON or else the Python recorded at
# configure time (the venv of scripts/install_repl_deps.sh) when it cannot
# import cppyy_backend itself.
import ctypes
import os
import re
import sys
import tempfile
import time

CONFIG = {
    "python": "@KILN_REPL_PYTHON@",
    "include_dirs": [@KILN_REPL_INCLUDE_DIRS@],
    "library": "@KILN_REPL_LIBRARY@",
    "hook": "@KILN_REPL_HOOK@",
}
HERE = os.path.dirname(os.path.realpath(__file__))

HELP = """\
kiln-repl: C++20 on Cling, with <kiln/kiln.h> included, libkiln loaded and
`using namespace kiln;` in effect.
  an expression without ';'   prints its value (tensors: dtype, shape, device, then values)
  a line ending in ';'        runs it quietly (declarations stay for later lines)
  an unfinished { ( [          continues on the next line ("...> ")
  show(x)                      prints x as the prompt does
  timeit([] { return f(x); })  times calls (median, best); see <kiln/timeit.h>
  .help  this text     .quit (or .q, Ctrl-D)  leave
  other .commands go to Cling: .L <library>, .I <include dir>, .x <file.C>, ...
A kiln::Error (or any exception) prints its type and message; the session
goes on and everything defined before is still there."""


def path_of(p):
    return p if os.path.isabs(p) else os.path.normpath(os.path.join(HERE, p))


def ensure_backend():
    try:
        import cppyy_backend.loader  # noqa: F401
        os.environ.pop("KILN_REPL_REEXEC", None)  # not for programs started from the prompt
        return
    except ImportError:
        pass
    python = os.environ.get("KILN_REPL_PYTHON") or CONFIG["python"]
    # (A venv's python is a link to the system one: compare nothing, run it once.)
    if python and os.path.exists(python) and not os.environ.get("KILN_REPL_REEXEC"):
        os.environ["KILN_REPL_REEXEC"] = "1"
        os.execv(python, [python, os.path.realpath(__file__)] + sys.argv[1:])
    sys.exit("kiln-repl: the Python module cppyy_backend (PyPI packages cppyy-cling and cppyy-backend) "
             "was not found; `bash scripts/repl.sh` installs it into .venv-repl/, or set KILN_REPL_PYTHON "
             "to a Python that has it")


class Cling:
    """One Cling interpreter: process(code) runs a line or a block."""

    def __init__(self):
        hook = path_of(CONFIG["hook"])
        self.hook = None
        if os.path.exists(hook):
            # Before libstdc++ is loaded, so its __cxa_throw comes first (throw_hook.cpp).
            self.hook = ctypes.CDLL(hook, ctypes.RTLD_GLOBAL)
            self.hook.kiln_repl_last_throw.restype = ctypes.c_char_p
        from cppyy_backend import loader
        backend = loader.load_cpp_backend()
        backend.cppyy_compile.argtypes = [ctypes.c_char_p]
        backend.cppyy_compile.restype = ctypes.c_int
        slot = (ctypes.c_void_p * 1)()
        helper = r"""
#include "TInterpreter.h"
extern "C" long kiln_repl_process_line(const char* line, int* error) {
  try {
    return (long)gInterpreter->ProcessLine(line, error);
  } catch (...) {  // TCling catches std::exception itself; anything else lands here
    *error = 1;
    return 0;
  }
}
static int kiln_repl_helper_address = (*(void**)%dUL = (void*)&kiln_repl_process_line, 0);
""" % ctypes.addressof(slot)
        if not backend.cppyy_compile(helper.encode()) or not slot[0]:
            sys.exit("kiln-repl: could not declare the line-processing helper in Cling")
        proto = ctypes.CFUNCTYPE(ctypes.c_long, ctypes.c_char_p, ctypes.POINTER(ctypes.c_int))
        self._process = proto(slot[0])
        self._libc = ctypes.CDLL(None)

    def process(self, code):
        """Runs code; writes Cling's diagnostics (rewritten) to stderr. Returns True on success."""
        sys.stdout.flush()
        sys.stderr.flush()
        if self.hook:
            self.hook.kiln_repl_clear_throw()
        err = ctypes.c_int(0)
        # Cling's diagnostics go to fd 2: collect them to rewrite them after the call.
        with tempfile.TemporaryFile() as cap:
            saved = os.dup(2)
            os.dup2(cap.fileno(), 2)
            try:
                self._process(code.encode(), ctypes.byref(err))
                self._libc.fflush(None)
            finally:
                os.dup2(saved, 2)
                os.close(saved)
            cap.seek(0)
            diag = cap.read().decode(errors="replace")
        thrown = self.hook.kiln_repl_last_throw().decode() if self.hook else ""
        if diag:
            sys.stderr.write(self.rewrite(diag, thrown))
            sys.stderr.flush()
        return err.value == 0

    @staticmethod
    def rewrite(diag, thrown):
        out = []
        for line in diag.splitlines(keepends=True):
            m = re.match(r"compilation failed(?:: (.*)| with unknown error)", line)
            if m:  # an exception escaped the line: name its type
                what = m.group(1)
                kind = thrown or "exception"
                out.append(kind + (": " + what if what is not None else " (not a std::exception)") + "\n")
                continue
            out.append(re.sub(r"^input_line_\d+:\d+:\d+: ", "", line))
        return "".join(out)


def unfinished(code):
    """True while code has an unclosed (, [ or { outside strings and comments, or ends in a backslash."""
    depth = 0
    i, n = 0, len(code)
    while i < n:
        c = code[i]
        if code.startswith("//", i):
            j = code.find("\n", i)
            i = n if j < 0 else j
            continue
        if code.startswith("/*", i):
            j = code.find("*/", i + 2)
            if j < 0:
                return True
            i = j + 2
            continue
        if c in "\"'":
            j = i + 1
            while j < n and code[j] != c:
                j += 2 if code[j] == "\\" else 1
            i = j + 1
            continue
        if c in "([{":
            depth += 1
        elif c in ")]}":
            depth -= 1
        i += 1
    return depth > 0 or code.rstrip().endswith("\\")


class UnfinishedInput(Exception):
    """The input ended inside an unclosed (, [ or { (or after a trailing backslash): code is the part not run."""

    def __init__(self, code):
        super().__init__(code)
        self.code = code


def lines_from(stream, interactive, echo):
    """Yields complete inputs (a line, or lines until brackets close); raises
    UnfinishedInput when the input ends inside an unfinished one."""
    buf = []
    while True:
        prompt = "kiln> " if not buf else "...> "
        try:
            if interactive:
                line = input(prompt)
            else:
                line = stream.readline()
                if not line:
                    raise EOFError
                line = line.rstrip("\n")
                if echo:
                    print(prompt + line, flush=True)
        except EOFError:
            if buf:
                code = "\n".join(buf)
                if unfinished(code):
                    raise UnfinishedInput(code)
                yield code
            return
        except KeyboardInterrupt:
            print()
            buf = []
            continue
        buf.append(line)
        code = "\n".join(buf)
        if not unfinished(code):
            buf = []
            yield code


def setup_history():
    try:
        import readline
    except ImportError:
        return
    path = os.environ.get("KILN_REPL_HISTORY", os.path.expanduser("~/.kiln_repl_history"))
    try:
        readline.read_history_file(path)
    except OSError:
        pass
    readline.set_history_length(2000)
    import atexit
    atexit.register(lambda: _save_history(readline, path))
    return readline, path


def _save_history(readline, path):
    try:
        readline.write_history_file(path)
    except OSError:
        pass


def seconds_since_start(t0):
    """Age of this process (kiln-repl re-executing itself keeps its pid), else time since t0."""
    try:
        with open("/proc/self/stat") as f:
            start = int(f.read().rsplit(")", 1)[1].split()[19]) / os.sysconf("SC_CLK_TCK")
        with open("/proc/uptime") as f:
            return float(f.read().split()[0]) - start
    except (OSError, ValueError, IndexError):
        return time.time() - t0


def main(argv):
    timing = "--timing" in argv
    echo = "--echo" in argv
    if "--help" in argv or "-h" in argv:
        print("usage: kiln-repl [--timing] [--echo]\n  --timing  print the time from the process start to the first prompt\n"
              "  --echo    echo piped input lines after the prompt (for transcripts)\n\n" + HELP)
        return 0
    t0 = time.time()
    ensure_backend()
    cling = Cling()
    startup = ["#include <kiln/kiln.h>", "#include <kiln/timeit.h>", "#include <kiln/repl/kiln_repl_print.h>",
               "#include <kiln/repl/kiln_repl_jit.h>", "using namespace kiln;", "using kiln::repl::show;",
               "using kiln::repl::jit;"]
    lib = path_of(CONFIG["library"])
    ok = cling.process(".L " + lib)
    for d in CONFIG["include_dirs"]:
        ok = ok and cling.process(".I " + path_of(d))
    for line in startup:
        ok = ok and cling.process(line)
    if not ok:
        sys.stderr.write("kiln-repl: loading kiln failed (library %s)\n" % lib)
        return 1
    interactive = sys.stdin.isatty()
    if timing:
        sys.stderr.write("kiln-repl: ready in %.2f s\n" % seconds_since_start(t0))
    if interactive:
        setup_history()
        print("kiln-repl (Cling, C++20). .help for help, .quit to leave.")
    return run_inputs(lines_from(sys.stdin, interactive, echo), cling.process)


def run_inputs(inputs, process):
    """Runs each complete input through process; returns the exit status: 0,
    or 1 (with a message on stderr) when the input ended inside an unfinished
    block, which is then not run."""
    try:
        for code in inputs:
            cmd = code.strip()
            if cmd in (".q", ".quit", ".exit"):
                break
            if cmd in (".help", ".h", "?"):
                print(HELP)
                continue
            if cmd:
                try:
                    process(code)
                except KeyboardInterrupt:  # Ctrl-C while a line ran: it has finished or stopped; go on
                    print("(interrupted)")
    except UnfinishedInput as e:
        lines = e.code.split("\n")
        first = lines[0].strip()
        sys.stdout.flush()
        sys.stderr.write("kiln-repl: the input ended inside an unfinished block (an unclosed '{', '(' or '[', "
                         "or a trailing backslash): its %d line%s, starting '%s', were not run\n"
                         % (len(lines), "" if len(lines) == 1 else "s", first[:60]))
        return 1
    return 0


if __name__ == "__main__":
    rc = main(sys.argv[1:])
    sys.stdout.flush()
    sys.stderr.flush()
    # Skip interpreter teardown: Cling's global destructors at exit are slow and
    # not needed. History is written by atexit, so run those first.
    import atexit
    atexit._run_exitfuncs()
    ctypes.CDLL(None).fflush(None)
    os._exit(rc)
