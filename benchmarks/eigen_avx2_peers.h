// kiln benchmarks: Eigen peers compiled for AVX2+FMA only (-mavx2 -mfma
// -mno-avx512f), in a small shared library of their own (kiln_bench_eigen_avx2,
// every symbol hidden except these functions), so that on an AVX-512 machine
// the rows run with KILN_JIT_TARGET=avx2 compare kiln's AVX2 code with Eigen's
// AVX2 packet math rather than with the AVX-512 Eigen of the -march=native
// benchmark programs. The functions are single-threaded over the range given;
// the benchmarks split ranges between threads (OpenMP) as for the other peers.
#pragma once
#include <cstdint>

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
}  // namespace kb::eigen_avx2
