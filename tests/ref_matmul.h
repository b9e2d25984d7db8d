// kiln tests: the float64 reference of a matrix product, by explicit loops.
#pragma once
#include <cstdint>
#include <vector>

namespace kt {
/// x @ w for row-major x [m, k] and w [k, n] given as values (kt::values).
inline std::vector<double> ref_matmul(const std::vector<double>& x, const std::vector<double>& w, int64_t m,
                                      int64_t k, int64_t n) {
  std::vector<double> r(static_cast<size_t>(m * n), 0.0);
  for (int64_t i = 0; i < m; ++i)
    for (int64_t kk = 0; kk < k; ++kk)
      for (int64_t j = 0; j < n; ++j)
        r[static_cast<size_t>(i * n + j)] += x[static_cast<size_t>(i * k + kk)] * w[static_cast<size_t>(kk * n + j)];
  return r;
}
}  // namespace kt
