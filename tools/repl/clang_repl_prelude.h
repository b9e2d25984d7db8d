// kiln: what kiln-clang-repl force-includes (-include) into clang-repl-19: the
// same start as kiln-repl's. clang-repl prints no values; show(x) does.
#pragma once
#include <kiln/kiln.h>
#include <kiln/timeit.h>
#include <kiln/repl/kiln_repl_print.h>
#include <kiln/repl/kiln_repl_jit.h>
using namespace kiln;
using kiln::repl::show;
using kiln::repl::jit;
