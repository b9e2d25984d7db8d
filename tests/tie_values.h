// Test inputs for the selection ops (topk, searchsorted, pools, ...): values
// drawn from a small set so that ties, -0/+0, NaN and infinities occur often.
// Shared by the CPU-side CUDA index-logic test and the GPU tests.
#pragma once
#include <kiln/kiln.h>

#include <cmath>
#include <cstdint>
#include <limits>
#include <random>
#include <vector>

namespace kt {

/// A tensor of `shape` with values from a small set (ties, -0/+0, NaN and
/// infinities for floats; 0/1 for bool; small non-negative integers for
/// unsigned dtypes), converted to `d`; the same `seed` gives the same values.
inline kiln::Tensor tie_tensor(const kiln::Shape& shape, kiln::DType d, uint64_t seed) {
  using namespace kiln;
  std::mt19937_64 rng(seed);
  const double nan = std::numeric_limits<double>::quiet_NaN(), inf = std::numeric_limits<double>::infinity();
  const std::vector<double> fl = {-1.5, -0.0, 0.0, 1.0, 2.0, 2.0, nan, inf, -inf, 3.25};
  const std::vector<double> in = {-3, -1, 0, 1, 1, 2, 5, 7};
  std::vector<double> v(static_cast<size_t>(checked_numel(shape)));
  for (double& e : v) {
    if (d == DType::bool_) e = double(rng() & 1);
    else if (is_floating(d)) e = fl[rng() % fl.size()];
    else e = is_unsigned(d) ? std::fabs(in[rng() % in.size()]) : in[rng() % in.size()];
  }
  return Tensor::from_vector(v, shape).to(d);
}

}  // namespace kt
