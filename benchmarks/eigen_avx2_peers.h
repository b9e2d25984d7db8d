// kiln benchmarks: Eigen peers compiled for AVX2+FMA only (-mavx2 -mfma
// -mno-avx512f), in a small shared library of their own (kiln_bench_eigen_avx2,
// every symbol hidden except these functions), so that on an AVX-512 machine
// the rows run with KILN_JIT_TARGET=avx2 compare kiln's AVX2 code with Eigen's
// AVX2 packet math rather than with the AVX-512 Eigen of the -march=native
// benchmark programs. The elementwise and row functions are single-threaded
// over the range given (the benchmarks split ranges between threads with
// OpenMP as for the other peers); the digits step's GEMMs use this library's
// Eigen threads (set_threads), as BM_eigen_digits_step's use the program's.
#pragma once
#include <cstdint>
#include <vector>

#include "bench_digits.h"

namespace kb::eigen_avx2 {
/// Eigen's SIMD instruction set in this library ("AVX2 FMA" expected; the
/// benchmarks refuse to run these peers if it says AVX512).
const char* simd_instruction_sets();
/// y[i] = tanh(a[i]*b[i] + c[i])*0.5 + exp(-a[i]), i in [0, n).
void chain(const float* a, const float* b, const float* c, float* y, int64_t n);
/// Row-wise softmax of the rows [r0, r1) of x (row-major, `cols` columns) into y.
void softmax_rows(const float* x, float* y, int64_t r0, int64_t r1, int64_t cols);
/// Row-wise layer norm (no affine, eps 1e-5) of the rows [r0, r1) of x into y.
void layernorm_rows(const float* x, float* y, int64_t r0, int64_t r1, int64_t cols);
/// y = exp(x) / tanh(x) / sqrt(x) on [0, n).
void exp(const float* x, float* y, int64_t n);
void tanh(const float* x, float* y, int64_t n);
void sqrt(const float* x, float* y, int64_t n);
/// y = x on [0, n) (the copy loop built for AVX2).
void copy(const float* x, float* y, int64_t n);

/// c = a * b, all n x n row-major float32 (Eigen's GEMM built for AVX2+FMA,
/// on the threads set_threads gave it).
void gemm(const float* a, const float* b, float* c, int64_t n);

/// Sets the threads this library's Eigen uses (its GEMMs split among the
/// OpenMP threads; Eigen::setNbThreads in the benchmark programs sets their
/// own Eigen's count, not this one's).
void set_threads(int n);

/// The hand-written Eigen digits training step of eigen_digits_step.h (the
/// same source as bench_digits.cpp's BM_eigen_digits_step) built for AVX2+FMA:
/// an opaque handle made from a starting point (momenta zero).
struct DigitsStep;
DigitsStep* digits_step_new(const kb::digits_bench::Start& s);
void digits_step_delete(DigitsStep* d);
/// One training step; returns its loss.
float digits_step(DigitsStep* d);
/// The weights w1 | b1 | w2 | b2 concatenated (row-major).
std::vector<float> digits_step_weights(const DigitsStep* d);
}  // namespace kb::eigen_avx2
