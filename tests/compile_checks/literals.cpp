// Compiled with -fsyntax-only by every installed C++ compiler (g++-12,
// clang++-14, ...; tests/compile_checks/check_literals.sh): the literal
// overloads of kiln::tensor must not be ambiguous.
#include <kiln/kiln.h>

void literals() {
  kiln::Tensor a = kiln::tensor({{1.0f, 2.0f}, {3.0f, 4.0f}});
  kiln::Tensor b = kiln::tensor({{1.0f}, {2.0f}});
  kiln::Tensor c = kiln::tensor({{{1.0f}}});
  kiln::Tensor d = kiln::tensor({1, 2, 3});
  kiln::Tensor e = kiln::tensor({{1.5, 2.5}}, kiln::DType::float32);
  kiln::Tensor f = kiln::tensor({true, false});
  (void)a, (void)b, (void)c, (void)d, (void)e, (void)f;
}
