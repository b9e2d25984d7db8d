// kiln benchmarks: Eigen peers built for AVX2+FMA (eigen_avx2_peers.h). This
// file is compiled with -mavx2 -mfma -mno-avx512f and -fvisibility=hidden:
// Eigen's inline templates instantiated here stay inside the library and never
// meet the AVX-512 instantiations of the benchmark programs.
#include "eigen_avx2_peers.h"

#include <Eigen/Core>
#include <cmath>

#include "eigen_digits_step.h"

#if defined(__AVX512F__) || !defined(__AVX2__) || !defined(__FMA__)
#error "eigen_avx2_peers.cpp must be compiled with -mavx2 -mfma -mno-avx512f"
#endif

#define KB_API __attribute__((visibility("default")))

namespace kb::eigen_avx2 {
namespace {
using Arr = Eigen::Array<float, Eigen::Dynamic, 1>;
using CMap = Eigen::Map<const Arr, Eigen::Unaligned>;
using Map = Eigen::Map<Arr, Eigen::Unaligned>;
}  // namespace

KB_API const char* simd_instruction_sets() { return Eigen::SimdInstructionSetsInUse(); }

KB_API void chain(const float* a, const float* b, const float* c, float* y, int64_t n) {
  CMap A(a, n), B(b, n), C(c, n);
  Map(y, n) = (A * B + C).tanh() * 0.5f + (-A).exp();
}

KB_API void softmax_rows(const float* x, float* y, int64_t r0, int64_t r1, int64_t cols) {
  for (int64_t r = r0; r < r1; ++r) {
    CMap row(x + r * cols, cols);
    Map out(y + r * cols, cols);
    const float m = row.maxCoeff();
    out = (row - m).exp();
    out /= out.sum();
  }
}

KB_API void layernorm_rows(const float* x, float* y, int64_t r0, int64_t r1, int64_t cols) {
  for (int64_t r = r0; r < r1; ++r) {
    CMap row(x + r * cols, cols);
    const float mu = row.mean();
    const float var = (row - mu).square().mean();
    Map(y + r * cols, cols) = (row - mu) / std::sqrt(var + 1e-5f);
  }
}

KB_API void exp(const float* x, float* y, int64_t n) { Map(y, n) = CMap(x, n).exp(); }
KB_API void tanh(const float* x, float* y, int64_t n) { Map(y, n) = CMap(x, n).tanh(); }
KB_API void sqrt(const float* x, float* y, int64_t n) { Map(y, n) = CMap(x, n).sqrt(); }
KB_API void copy(const float* x, float* y, int64_t n) { Map(y, n) = CMap(x, n); }

KB_API void gemm(const float* a, const float* b, float* c, int64_t n) {
  using M = Eigen::Matrix<float, Eigen::Dynamic, Eigen::Dynamic, Eigen::RowMajor>;
  Eigen::Map<M>(c, n, n).noalias() = Eigen::Map<const M>(a, n, n) * Eigen::Map<const M>(b, n, n);
}

KB_API void set_threads(int n) { Eigen::setNbThreads(n); }

struct DigitsStep {
  kb::digits_bench::EigenStep step;
};
KB_API DigitsStep* digits_step_new(const kb::digits_bench::Start& s) { return new DigitsStep{kb::digits_bench::EigenStep(s)}; }
KB_API void digits_step_delete(DigitsStep* d) { delete d; }
KB_API float digits_step(DigitsStep* d) {
  d->step.step();
  return d->step.loss;
}
KB_API std::vector<float> digits_step_weights(const DigitsStep* d) { return d->step.weights(); }

}  // namespace kb::eigen_avx2
