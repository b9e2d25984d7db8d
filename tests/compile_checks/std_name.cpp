// Compiled with -fsyntax-only by every installed C++ compiler
// (tests/compile_checks/check_std_name.sh): under `using namespace kiln`,
// kiln::std(x) and x.std() compile next to <cmath> and std:: names. With
// -DKILN_UNQUALIFIED_STD the unqualified std(x) is compiled instead, which
// the script expects to fail as ambiguous (the rule tensor/ops.h and the
// README document; if it ever compiles, that text is wrong).
#include <kiln/kiln.h>

#include <cmath>
#include <vector>

using namespace kiln;

Tensor spread(const Tensor& x) {
#ifdef KILN_UNQUALIFIED_STD
  return std(x);
#else
  std::vector<double> scale{std::sqrt(2.0)};
  return kiln::std(x) + x.std({0}) + kiln::std(x, {0}, 0.0, true) * scale[0];
#endif
}
