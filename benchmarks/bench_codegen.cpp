// The asmjit code generator at kernel level (backends/cpu/jit), with its
// peers in the same run:
// - y = tanh(a*b + c)*0.5 + exp(-a) over 16M float32 through run_loop (1 and
//   2 threads), beside a plain copy loop, an AVX-512/AVX2 triad with
//   streaming stores and Eigen's ArrayXf expression of the same formula;
// - single vector-math ops on an L2-resident array (ns per element) beside
//   Eigen's;
// - generation time of a 20-op program.
// Counters: bytes_per_second counts the bytes the loop moves (16 per element
// for the chain: three inputs, one output).
#include <benchmark/benchmark.h>
#include <immintrin.h>
#include <omp.h>

#include <Eigen/Core>
#include <cmath>
#include <cstdlib>
#include <memory>

#include "../jit/program_builder.h"
#include "../backends/cpu/strided_loop.h"
#include "../jit/elementwise_program.h"

namespace {

using namespace kiln;
using namespace kiln::codegen;

constexpr int64_t kN = int64_t(16) << 20;
constexpr DType F = DType::float32;

struct Arrays {
  Tensor a = Tensor::empty({kN}, F), b = Tensor::empty({kN}, F), c = Tensor::empty({kN}, F), y = Tensor::empty({kN}, F);
  Arrays() {
    float *pa = a.data<float>(), *pb = b.data<float>(), *pc = c.data<float>(), *py = y.data<float>();
    for (int64_t i = 0; i < kN; ++i) {
      pa[i] = std::sin(float(i) * 1e-3f);
      pb[i] = 0.5f + 1e-3f * float(i % 100);
      pc[i] = std::cos(float(i) * 2e-3f);
      py[i] = 0;
    }
  }
};
Arrays& arrays() {
  static Arrays A;
  return A;
}


ElementwiseProgram chain_program(bool streaming) {
  ProgramBuilder b({F, F, F, F}, 1);
  b.p.streaming_stores = streaming;
  const int x = b.load(1, F), y = b.load(2, F), z = b.load(3, F);
  const int t = b.op(OpId::Tanh, F, b.op(OpId::Add, F, b.op(OpId::Mul, F, x, y), z));
  const int half = b.imm(0.5, F);
  b.store(0, b.op(OpId::Add, F, b.op(OpId::Mul, F, t, half), b.op(OpId::Exp, F, b.op(OpId::Neg, F, x))));
  return b.p;
}

void set_threads(benchmark::State& st) { omp_set_num_threads(int(st.range(0))); }

void BM_chain_generated(benchmark::State& st) {
  set_threads(st);
  Arrays& A = arrays();
  auto k = generate_elementwise(chain_program(true), detect_cpu_target());
  auto L = cpu::make_loop<4>(A.y.shape(), {&A.y, &A.a, &A.b, &A.c});
  InnerLoopFn fn = k->fn();
  for (auto _ : st) cpu::run_loop(L, [fn](char** p, const int64_t* s, int64_t n) { fn(p, s, n); });
  st.SetBytesProcessed(st.iterations() * kN * 16);
}

void BM_chain_eigen(benchmark::State& st) {
  set_threads(st);
  Arrays& A = arrays();
  for (auto _ : st) {
#pragma omp parallel
    {
      const int T = omp_get_num_threads(), id = omp_get_thread_num();
      const int64_t lo = kN * id / T, hi = kN * (id + 1) / T;
      Eigen::Map<Eigen::ArrayXf> Y(A.y.data<float>() + lo, hi - lo);
      Eigen::Map<const Eigen::ArrayXf> X(A.a.data<float>() + lo, hi - lo), B(A.b.data<float>() + lo, hi - lo),
          C(A.c.data<float>() + lo, hi - lo);
      Y = (X * B + C).tanh() * 0.5f + (-X).exp();
    }
  }
  st.SetBytesProcessed(st.iterations() * kN * 16);
}

// The chain's loop alone, 1 thread, one call over n elements: n = 16K (256
// KiB in all, L2-resident: the code's own speed) and n = 1M (16 MiB, as
// bench_compile's compiled 1M row without the call around it).
// Inputs uniform in [0, 1) as in bench_compile's chain rows.
constexpr int64_t kL2 = 1 << 20;
struct L2Arrays {
  Tensor a = Tensor::empty({kL2}, F), b = Tensor::empty({kL2}, F), c = Tensor::empty({kL2}, F), y = Tensor::empty({kL2}, F);
  L2Arrays() {
    uint32_t r = 12345;
    auto u = [&] { r = r * 1664525u + 1013904223u; return float(r >> 8) * 0x1p-24f; };
    for (int64_t i = 0; i < kL2; ++i) {
      a.data<float>()[i] = u();
      b.data<float>()[i] = u();
      c.data<float>()[i] = u();
      y.data<float>()[i] = 0;
    }
  }
};
void BM_chain_generated_1thread(benchmark::State& st) {
  static L2Arrays A;
  auto k = generate_elementwise(chain_program(false), detect_cpu_target());
  char* p[4] = {reinterpret_cast<char*>(A.y.data<float>()), reinterpret_cast<char*>(A.a.data<float>()),
                reinterpret_cast<char*>(A.b.data<float>()), reinterpret_cast<char*>(A.c.data<float>())};
  const int64_t s[4] = {4, 4, 4, 4};
  InnerLoopFn fn = k->fn();
  for (auto _ : st) {
    fn(p, s, st.range(0));
    benchmark::ClobberMemory();
  }
  st.counters["ns_per_element"] =
      benchmark::Counter(double(st.iterations()) * st.range(0), benchmark::Counter::kIsRate | benchmark::Counter::kInvert);
}
void BM_chain_eigen_1thread(benchmark::State& st) {
  static L2Arrays A;
  for (auto _ : st) {
    const int64_t n = st.range(0);
    Eigen::Map<Eigen::ArrayXf> Y(A.y.data<float>(), n);
    Eigen::Map<const Eigen::ArrayXf> X(A.a.data<float>(), n), B(A.b.data<float>(), n), C(A.c.data<float>(), n);
    Y = (X * B + C).tanh() * 0.5f + (-X).exp();
    benchmark::ClobberMemory();
  }
  st.counters["ns_per_element"] =
      benchmark::Counter(double(st.iterations()) * st.range(0), benchmark::Counter::kIsRate | benchmark::Counter::kInvert);
}
BENCHMARK(BM_chain_generated_1thread)->Arg(16384)->Arg(1 << 20)->Unit(benchmark::kMicrosecond);
BENCHMARK(BM_chain_eigen_1thread)->Arg(16384)->Arg(1 << 20)->Unit(benchmark::kMicrosecond);

void BM_copy(benchmark::State& st) {
  set_threads(st);
  Arrays& A = arrays();
  const float* a = A.a.data<float>();
  float* y = A.y.data<float>();
  for (auto _ : st) {
#pragma omp parallel for schedule(static)
    for (int64_t i = 0; i < kN; ++i) y[i] = a[i];
  }
  st.SetBytesProcessed(st.iterations() * kN * 8);
}

/// y = a*0.5 + b with streaming stores: the bandwidth the chain should approach.
void BM_triad_streaming(benchmark::State& st) {
  set_threads(st);
  Arrays& A = arrays();
  const float *a = A.a.data<float>(), *b = A.b.data<float>();
  float* y = A.y.data<float>();
  for (auto _ : st) {
#pragma omp parallel for schedule(static)
    for (int64_t i = 0; i < kN; i += 8) {
      __m256 v = _mm256_fmadd_ps(_mm256_load_ps(a + i), _mm256_set1_ps(0.5f), _mm256_load_ps(b + i));
      _mm256_stream_ps(y + i, v);
    }
    _mm_sfence();
  }
  st.SetBytesProcessed(st.iterations() * kN * 12);
}

// ---- single ops, L2 resident ----------------------------------------------------------------
constexpr int64_t kSmall = 1 << 15;

void BM_op_generated(benchmark::State& st) {
  const OpId op = OpId(st.range(0));
  const CpuTarget t = CpuTarget(st.range(1));
  if (t > detect_cpu_target()) {
    st.SkipWithError("target not supported here");
    return;
  }
  ProgramBuilder b({F, F}, 1);
  b.store(0, b.op(op, F, b.load(1, F)));
  auto k = generate_elementwise(b.p, t);
  std::vector<float> x(kSmall), y(kSmall);
  for (int64_t i = 0; i < kSmall; ++i) x[i] = 3.0f * std::sin(float(i) * 1e-3f);
  char* p[2] = {reinterpret_cast<char*>(y.data()), reinterpret_cast<char*>(x.data())};
  const int64_t s[2] = {4, 4};
  for (auto _ : st) {
    k->fn()(p, s, kSmall);
    benchmark::DoNotOptimize(y.data());
  }
  st.SetLabel(std::string(op_name(op)) + " " + cpu_target_name(t));
  st.SetItemsProcessed(st.iterations() * kSmall);
}

void BM_op_eigen(benchmark::State& st) {
  const OpId op = OpId(st.range(0));
  Eigen::ArrayXf x(kSmall), y(kSmall);
  for (int64_t i = 0; i < kSmall; ++i) x[i] = 3.0f * std::sin(float(i) * 1e-3f);
  for (auto _ : st) {
    switch (op) {
      case OpId::Exp: y = x.exp(); break;
      case OpId::Log: y = x.abs().log(); break;
      case OpId::Tanh: y = x.tanh(); break;
      case OpId::Sigmoid: y = 1.0f / (1.0f + (-x).exp()); break;
      case OpId::Sin: y = x.sin(); break;
      default: y = x; break;
    }
    benchmark::DoNotOptimize(y.data());
  }
  st.SetLabel(std::string(op_name(op)) + " eigen");
  st.SetItemsProcessed(st.iterations() * kSmall);
}

void op_args(benchmark::internal::Benchmark* b, bool targets) {
  for (OpId op : {OpId::Exp, OpId::Log, OpId::Tanh, OpId::Sigmoid, OpId::Sin}) {
    if (!targets) {
      b->Args({int64_t(op)});
      continue;
    }
    for (CpuTarget t : {CpuTarget::sse2, CpuTarget::avx2, CpuTarget::avx512}) b->Args({int64_t(op), int64_t(t)});
  }
}

/// Code generation of a 20-op elementwise program (cold: a new program each time).
void BM_generate_20_ops(benchmark::State& st) {
  ProgramBuilder b({F, F, F}, 1);
  int x = b.load(1, F), y = b.load(2, F);
  const OpId ops[] = {OpId::Mul, OpId::Add, OpId::Tanh, OpId::Sub, OpId::Exp, OpId::Maximum, OpId::Sigmoid,
                      OpId::Mul, OpId::Abs, OpId::Add, OpId::Sqrt, OpId::Minimum, OpId::Neg, OpId::Div,
                      OpId::Relu, OpId::Add, OpId::Log1p, OpId::Mul, OpId::Erf, OpId::Sub};
  for (OpId op : ops) {
    const int r = op_info(op).arity == 2 ? b.op(op, F, x, y) : b.op(op, F, x);
    y = x;
    x = r;
  }
  b.store(0, x);
  const CpuTarget t = detect_cpu_target();
  size_t bytes = 0;
  for (auto _ : st) {
    auto k = generate_elementwise(b.p, t);
    bytes = k->code_size();
  }
  st.counters["code_bytes"] = double(bytes);
}

}  // namespace

BENCHMARK(BM_chain_generated)->Arg(1)->Arg(2)->Unit(benchmark::kMillisecond)->UseRealTime();
BENCHMARK(BM_chain_eigen)->Arg(1)->Arg(2)->Unit(benchmark::kMillisecond)->UseRealTime();
BENCHMARK(BM_triad_streaming)->Arg(1)->Arg(2)->Unit(benchmark::kMillisecond)->UseRealTime();
BENCHMARK(BM_copy)->Arg(1)->Arg(2)->Unit(benchmark::kMillisecond)->UseRealTime();
BENCHMARK(BM_op_generated)->Apply([](benchmark::internal::Benchmark* b) { op_args(b, true); });
BENCHMARK(BM_op_eigen)->Apply([](benchmark::internal::Benchmark* b) { op_args(b, false); });
BENCHMARK(BM_generate_20_ops)->Unit(benchmark::kMicrosecond);

BENCHMARK_MAIN();
