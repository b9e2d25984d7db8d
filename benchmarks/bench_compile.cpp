// Issue 4 speed figures, each beside its peers in the same run: compile
// time of a 20-op elementwise graph (vs the system C++ compiler building the
// same kernel, and TorchScript's first call when LibTorch is installed),
// cached-call overhead, the fused chain y = tanh(a*b + c)*0.5 + exp(-a) on 1M
// and 16M float32 (vs Eigen, a plain C++ loop and LibTorch, with a
// streaming-store triad as the bandwidth reference), and softmax/layer_norm rows.
#include <benchmark/benchmark.h>
#include <immintrin.h>
#include <omp.h>

#include <Eigen/Core>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <fstream>
#include <kiln/kiln.h>
#include <unistd.h>
#include <vector>

#include "bench_peers.h"
#include "bench_report.h"
#include "eigen_avx2_peers.h"

// A training step's argument shape (examples/digits): two structs of four tensors.
struct BenchParams {
  kiln::Tensor w1, b1, w2, b2;
};
KILN_PYTREE(BenchParams, w1, b1, w2, b2);

namespace {
constexpr int64_t kBig = 16 << 20;
using kiln::Tensor;

Tensor chain(const Tensor& a, const Tensor& b, const Tensor& c) { return kiln::tanh(a * b + c) * 0.5f + kiln::exp(-a); }

// 20 elementwise ops.
Tensor twenty(const Tensor& a, const Tensor& b) {
  Tensor x = a * b + 1.0f;
  for (int i = 0; i < 6; ++i) x = kiln::tanh(x) * 0.9f + a;
  return x - b;
}

// ---- compile time -------------------------------------------------------------------------
void BM_kiln_compile_20op(benchmark::State& st) {
  auto spec = kiln::TensorLayout(kiln::DType::float32, {1024});
  for (auto _ : st) {
    kiln::CompiledCallable c = kiln::compile([](Tensor a, Tensor b) { return twenty(a, b); })(spec, spec);
    benchmark::DoNotOptimize(&c);
  }
}
BENCHMARK(BM_kiln_compile_20op)->Unit(benchmark::kMicrosecond)->UseRealTime();

// Compile time of a function returning n results (v * i): its own peer is
// the same row at another n. Linear in n: the 8000 row takes about 4x the
// 2000 row (us_per_result about equal); it took 16x while the fusion
// planner's group splits and the result bookkeeping were O(n^2).
void BM_kiln_compile_many_results(benchmark::State& st) {
  const int n = static_cast<int>(st.range(0));
  auto spec = kiln::TensorLayout(kiln::DType::float32, {8});
  auto f = [n](Tensor v) {
    std::vector<Tensor> r;
    for (int i = 0; i < n; ++i) r.push_back(v * float(i));
    return r;
  };
  for (auto _ : st) {
    kiln::CompiledCallable c = kiln::compile(f)(spec);
    benchmark::DoNotOptimize(&c);
  }
  st.counters["s_per_result"] =
      benchmark::Counter(double(n), benchmark::Counter::kIsIterationInvariantRate | benchmark::Counter::kInvert);
}
BENCHMARK(BM_kiln_compile_many_results)->Arg(2000)->Arg(8000)->Unit(benchmark::kMillisecond)->UseRealTime();

// The route MLX's CPU compile and Inductor take: write C++ for the fused
// loop, run the system compiler at -O3 into a shared object.
void BM_cxx_O3_compile_20op(benchmark::State& st) {
  const char* src = R"(#include <cmath>
extern "C" void k(const float* a, const float* b, float* y, long n) {
  for (long i = 0; i < n; ++i) { float x = a[i] * b[i] + 1.0f;
    for (int r = 0; r < 6; ++r) x = std::tanh(x) * 0.9f + a[i];
    y[i] = x - b[i]; } })";
  std::string dir = "/tmp/kiln_bench_cxx_" + std::to_string(getpid());
  std::string mk = "mkdir -p " + dir;
  if (std::system(mk.c_str()) != 0) st.SkipWithError("mkdir failed");
  { std::ofstream(dir + "/k.cpp") << src; }
  std::string cmd = "c++ -O3 -march=native -shared -fPIC -o " + dir + "/k.so " + dir + "/k.cpp";
  for (auto _ : st)
    if (std::system(cmd.c_str()) != 0) st.SkipWithError("system c++ failed");
  std::string rm = "rm -rf " + dir;
  if (std::system(rm.c_str()) != 0) {}
}
BENCHMARK(BM_cxx_O3_compile_20op)->Unit(benchmark::kMillisecond)->UseRealTime()->Iterations(3);

// ---- cached call overhead on 1-element inputs ------------------------------------------------
void BM_kiln_cached_call_1elem(benchmark::State& st) {
  kb::set_threads(1);
  auto spec = kiln::TensorLayout(kiln::DType::float32, {1});
  kiln::CompiledCallable c = kiln::compile([](Tensor a, Tensor b) { return a + b; })(spec, spec);
  Tensor a = kiln::ones({1}), b = kiln::ones({1});
  for (auto _ : st) benchmark::DoNotOptimize(c(a, b).leaves[0].data_ptr());
}
BENCHMARK(BM_kiln_cached_call_1elem);
void BM_kiln_execute_raw_1elem(benchmark::State& st) {
  kb::set_threads(1);
  auto spec = kiln::TensorLayout(kiln::DType::float32, {1});
  kiln::CompiledCallable c = kiln::compile([](Tensor a, Tensor b) { return a + b; })(spec, spec);
  std::vector<Tensor> in = {kiln::ones({1}), kiln::ones({1})};
  for (auto _ : st) benchmark::DoNotOptimize(c.execute_raw(std::span<const Tensor>(in))[0].data_ptr());
}
BENCHMARK(BM_kiln_execute_raw_1elem);
// The call path of a training step's signature: (params, momenta, x, y), two
// KILN_PYTREE structs of four tensors and two tensors, 1 element each,
// returning (params, momenta, loss) as a tuple rebuilt from the result tree.
// Against execute_raw of the same callable on its flat leaves (no tree, no
// checks), the row shows what the argument tree, the checks and the result
// rebuild cost per call (issue 18: digits step overhead).
using StructResult = std::tuple<BenchParams, BenchParams, Tensor>;
kiln::CompiledCallable struct_callable() {
  auto spec = kiln::TensorLayout(kiln::DType::float32, {1});
  BenchParams p{kiln::ones({1}), kiln::ones({1}), kiln::ones({1}), kiln::ones({1})};
  return kiln::compile([](BenchParams p, BenchParams v, Tensor x, Tensor y) {
    BenchParams v2{v.w1 * 0.9f + x, v.b1 * 0.9f + y, v.w2 * 0.9f + x, v.b2 * 0.9f + y};
    BenchParams p2{p.w1 - v2.w1, p.b1 - v2.b1, p.w2 - v2.w2, p.b2 - v2.b2};
    return StructResult{p2, v2, x + y};
  })(p, p, spec, spec);
}
void BM_kiln_cached_call_struct_1elem(benchmark::State& st) {
  kb::set_threads(1);
  kiln::CompiledCallable c = struct_callable();
  BenchParams p{kiln::ones({1}), kiln::ones({1}), kiln::ones({1}), kiln::ones({1})}, v = p;
  Tensor x = kiln::ones({1}), y = kiln::ones({1});
  for (auto _ : st) {
    auto [p2, v2, loss] = c(p, v, x, y).as<StructResult>();
    p = p2;
    v = v2;
    benchmark::DoNotOptimize(loss.data_ptr());
  }
}
BENCHMARK(BM_kiln_cached_call_struct_1elem);
void BM_kiln_execute_raw_struct_1elem(benchmark::State& st) {
  kb::set_threads(1);
  kiln::CompiledCallable c = struct_callable();
  std::vector<Tensor> in;
  for (int i = 0; i < 10; ++i) in.push_back(kiln::ones({1}));
  for (auto _ : st) {
    std::vector<Tensor> out = c.execute_raw(std::span<const Tensor>(in));
    for (size_t i = 0; i < 8; ++i) in[i] = out[i];
    benchmark::DoNotOptimize(out[8].data_ptr());
  }
}
BENCHMARK(BM_kiln_execute_raw_struct_1elem);
// The aliasing guard's cost (jit/write_alias.h): a function that writes an
// argument in place looks for overlaps on every call; one that writes
// nothing pays one emptiness test. jit's cached path, both kinds.
void BM_kiln_cached_call_write_1elem(benchmark::State& st) {
  kb::set_threads(1);
  auto spec = kiln::TensorLayout(kiln::DType::float32, {1});
  kiln::CompiledCallable c = kiln::compile([](Tensor a, Tensor b) {
    a.add_(b);
    return a * 2.0f;
  })(spec, spec);
  Tensor a = kiln::ones({1}), b = kiln::zeros({1});
  for (auto _ : st) benchmark::DoNotOptimize(c(a, b).leaves[0].data_ptr());
}
BENCHMARK(BM_kiln_cached_call_write_1elem);
void BM_kiln_jit_cached_call_1elem(benchmark::State& st) {
  kb::set_threads(1);
  auto f = kiln::jit([](Tensor a, Tensor b) { return a + b; });
  Tensor a = kiln::ones({1}), b = kiln::ones({1});
  for (auto _ : st) benchmark::DoNotOptimize(f(a, b).leaves[0].data_ptr());
}
BENCHMARK(BM_kiln_jit_cached_call_1elem);
// The same with a number for the second Tensor parameter and an int8 tensor:
// the number is range-checked for int8 per call (trace/weak_scalar.h).
void BM_kiln_jit_cached_call_number_1elem(benchmark::State& st) {
  kb::set_threads(1);
  auto f = kiln::jit([](Tensor a, Tensor s) { return a + s; });
  Tensor a = kiln::ones({1}, kiln::DType::int8);
  for (auto _ : st) benchmark::DoNotOptimize(f(a, 27).leaves[0].data_ptr());
}
BENCHMARK(BM_kiln_jit_cached_call_number_1elem);
void BM_kiln_jit_cached_call_write_1elem(benchmark::State& st) {
  kb::set_threads(1);
  auto f = kiln::jit([](Tensor a, Tensor b) {
    a.add_(b);
    return a * 2.0f;
  });
  Tensor a = kiln::ones({1}), b = kiln::zeros({1});
  for (auto _ : st) benchmark::DoNotOptimize(f(a, b).leaves[0].data_ptr());
}
BENCHMARK(BM_kiln_jit_cached_call_write_1elem);
// Many tiny in-place writes to captured tensors (tester N8): 50 float32[4]
// tensors a jit function captures and writes (each a mutable weight the
// call writes back), vs the same function run eagerly.
constexpr int kCapturedWrites = 50;
std::vector<Tensor> captured_state() {
  std::vector<Tensor> s;
  for (int i = 0; i < kCapturedWrites; ++i) s.push_back(kiln::zeros({4}));
  return s;
}
Tensor write_captured(const std::vector<Tensor>& s, const Tensor& x) {
  for (const Tensor& t : s) t.add_(1.0f);
  return x * 2.0f;
}
void BM_kiln_jit_captured_writes_50(benchmark::State& st) {
  kb::set_threads(1);
  const std::vector<Tensor> s = captured_state();
  auto f = kiln::jit([&s](Tensor x) { return write_captured(s, x); });
  Tensor x = kiln::ones({4});
  for (auto _ : st) benchmark::DoNotOptimize(f(x).leaves[0].data_ptr());
}
BENCHMARK(BM_kiln_jit_captured_writes_50)->Unit(benchmark::kMicrosecond);
void BM_kiln_eager_captured_writes_50(benchmark::State& st) {
  kb::set_threads(1);
  const std::vector<Tensor> s = captured_state();
  Tensor x = kiln::ones({4});
  for (auto _ : st) benchmark::DoNotOptimize(write_captured(s, x).data_ptr());
}
BENCHMARK(BM_kiln_eager_captured_writes_50)->Unit(benchmark::kMicrosecond);
void BM_kiln_eager_add_1elem(benchmark::State& st) {
  kb::set_threads(1);
  Tensor a = kiln::ones({1}), b = kiln::ones({1});
  for (auto _ : st) benchmark::DoNotOptimize((a + b).data_ptr());
}
BENCHMARK(BM_kiln_eager_add_1elem);

// ---- the fused chain on 1M and 16M float32 ----------------------------------------------------
constexpr int64_t kMid = 1 << 20;  // 1M elements
template <int64_t N>
void BM_triad_stream(benchmark::State& st) {
  kb::set_threads(static_cast<int>(st.range(0)));
  float* a = static_cast<float*>(std::aligned_alloc(64, N * 4));
  float* b = static_cast<float*>(std::aligned_alloc(64, N * 4));
  float* c = static_cast<float*>(std::aligned_alloc(64, N * 4));
  for (int64_t i = 0; i < N; ++i) b[i] = c[i] = 1.0f;
  for (auto _ : st) {
#pragma omp parallel for schedule(static)
    for (int64_t i = 0; i < N; i += 16) {
#ifdef __AVX512F__
      _mm512_stream_ps(a + i, _mm512_fmadd_ps(_mm512_set1_ps(3.0f), _mm512_load_ps(c + i), _mm512_load_ps(b + i)));
#else
      for (int j = 0; j < 16; ++j) a[i + j] = b[i + j] + 3.0f * c[i + j];
#endif
    }
    _mm_sfence();
    benchmark::ClobberMemory();
  }
  st.SetBytesProcessed(st.iterations() * N * 12);
  std::free(a);
  std::free(b);
  std::free(c);
}

template <int64_t N>
void BM_kiln_compiled_chain(benchmark::State& st) {
  kb::set_threads(static_cast<int>(st.range(0)));
  auto spec = kiln::TensorLayout(kiln::DType::float32, {N});
  kiln::CompiledCallable run = kiln::compile(chain)(spec, spec, spec);
  Tensor a = kiln::random::uniform({N}), b = kiln::random::uniform({N}), c = kiln::random::uniform({N});
  run(a, b, c);  // warm-up: the first call's one-time costs are not the steady state
  // Peak memory of one call beyond its inputs (issue: inputs + output + at
  // most one planned scratch buffer): the counter is in units of the output.
  kiln::reset_peak_memory();
  const size_t before = kiln::memory_stats().bytes_in_use;
  { auto r = run(a, b, c); }
  const double extra = static_cast<double>(kiln::memory_stats().peak_bytes_in_use - before);
  for (auto _ : st) benchmark::DoNotOptimize(run(a, b, c).leaves[0].data_ptr());
  st.SetBytesProcessed(st.iterations() * N * 16);
  st.counters["peak_extra_per_output"] = extra / (static_cast<double>(N) * sizeof(float));
}

template <int64_t N>
void BM_kiln_eager_chain(benchmark::State& st) {
  kb::set_threads(static_cast<int>(st.range(0)));
  Tensor a = kiln::random::uniform({N}), b = kiln::random::uniform({N}), c = kiln::random::uniform({N});
  chain(a, b, c);  // warm-up (first use of each eager kernel)
  for (auto _ : st) benchmark::DoNotOptimize(chain(a, b, c).data_ptr());
  st.SetBytesProcessed(st.iterations() * N * 16);
}

template <int64_t N>
void BM_eigen_chain(benchmark::State& st) {
  const int threads = static_cast<int>(st.range(0));
  kb::set_threads(threads);
  Eigen::ArrayXf a = Eigen::ArrayXf::Random(N).abs(), b = Eigen::ArrayXf::Random(N).abs(),
                 c = Eigen::ArrayXf::Random(N).abs(), y(N);
  for (auto _ : st) {
    // Eigen does not thread coefficient-wise expressions: split the range.
#pragma omp parallel num_threads(threads)
    {
      int t = omp_get_thread_num(), nt = omp_get_num_threads();
      int64_t lo = N * t / nt, hi = N * (t + 1) / nt;
      auto A = a.segment(lo, hi - lo), B = b.segment(lo, hi - lo), C = c.segment(lo, hi - lo);
      y.segment(lo, hi - lo) = (A * B + C).tanh() * 0.5f + (-A).exp();
    }
    benchmark::ClobberMemory();
  }
  st.SetBytesProcessed(st.iterations() * N * 16);
}

// The plain C++ loop a user would write (std::tanh/std::exp, OpenMP, -O3 -march=native).
template <int64_t N>
void BM_loop_chain(benchmark::State& st) {
  kb::set_threads(static_cast<int>(st.range(0)));
  std::vector<float> a(N), b(N), c(N), y(N);
  for (int64_t i = 0; i < N; ++i) a[i] = b[i] = c[i] = static_cast<float>(i % 1000) * 1e-3f;
  for (auto _ : st) {
    const float *pa = a.data(), *pb = b.data(), *pc = c.data();
    float* py = y.data();
#pragma omp parallel for schedule(static)
    for (int64_t i = 0; i < N; ++i) py[i] = std::tanh(pa[i] * pb[i] + pc[i]) * 0.5f + std::exp(-pa[i]);
    benchmark::ClobberMemory();
  }
  st.SetBytesProcessed(st.iterations() * N * 16);
}

#define CHAIN(fn)                                                                                                  \
  BENCHMARK_TEMPLATE(fn, kBig)->Name(#fn "_16M")->Arg(1)->Arg(2)->UseRealTime()->Unit(benchmark::kMillisecond); \
  BENCHMARK_TEMPLATE(fn, kMid)->Name(#fn "_1M")->Arg(1)->Arg(2)->UseRealTime()->Unit(benchmark::kMicrosecond)
CHAIN(BM_triad_stream);
CHAIN(BM_kiln_compiled_chain);
CHAIN(BM_kiln_eager_chain);
CHAIN(BM_eigen_chain);
CHAIN(BM_loop_chain);

// ---- softmax and layer_norm rows, 1024 x 1024 -------------------------------------------------------
void BM_kiln_softmax_rows(benchmark::State& st) {
  kb::set_threads(static_cast<int>(st.range(0)));
  auto spec = kiln::TensorLayout(kiln::DType::float32, {1024, 1024});
  auto run = kiln::compile([](Tensor x) { return kiln::softmax(x, -1); })(spec);
  Tensor x = kiln::random::normal({1024, 1024});
  for (auto _ : st) benchmark::DoNotOptimize(run(x).leaves[0].data_ptr());
}
void BM_kiln_layernorm_rows(benchmark::State& st) {
  kb::set_threads(static_cast<int>(st.range(0)));
  auto spec = kiln::TensorLayout(kiln::DType::float32, {1024, 1024});
  auto run = kiln::compile([](Tensor x) { return kiln::layer_norm(x); })(spec);
  Tensor x = kiln::random::normal({1024, 1024});
  for (auto _ : st) benchmark::DoNotOptimize(run(x).leaves[0].data_ptr());
}
void BM_kiln_eager_softmax_rows(benchmark::State& st) {
  kb::set_threads(static_cast<int>(st.range(0)));
  Tensor x = kiln::random::normal({1024, 1024});
  for (auto _ : st) benchmark::DoNotOptimize(kiln::softmax(x, -1).data_ptr());
}
void BM_kiln_eager_layernorm_rows(benchmark::State& st) {
  kb::set_threads(static_cast<int>(st.range(0)));
  Tensor x = kiln::random::normal({1024, 1024});
  for (auto _ : st) benchmark::DoNotOptimize(kiln::layer_norm(x).data_ptr());
}
// The Eigen peers of the row benchmarks: row_op(x.row(r), y.row(r)) for
// each row of a 1024 x 1024 float32 array, the rows split among the threads.
template <class RowOp>
void eigen_rows(benchmark::State& st, RowOp row_op) {
  kb::set_threads(static_cast<int>(st.range(0)));
  using M = Eigen::Array<float, Eigen::Dynamic, Eigen::Dynamic, Eigen::RowMajor>;
  M x = M::Random(1024, 1024), y(1024, 1024);
  for (auto _ : st) {
#pragma omp parallel for schedule(static)
    for (int r = 0; r < 1024; ++r) row_op(x.row(r), y.row(r));
    benchmark::ClobberMemory();
  }
}
void BM_eigen_softmax_rows(benchmark::State& st) {
  eigen_rows(st, [](const auto& row, auto y) {
    float m = row.maxCoeff();
    y = (row - m).exp();
    y /= y.sum();
  });
}
void BM_eigen_layernorm_rows(benchmark::State& st) {
  eigen_rows(st, [](const auto& row, auto y) {
    float mu = row.mean();
    float var = (row - mu).square().mean();
    y = (row - mu) / std::sqrt(var + 1e-5f);
  });
}
// The memory bound of the rows above: y = x, 1024 x 1024 float32 in
// kiln-allocated tensors (as the kiln rows'), row by row with memcpy, the
// rows split among the threads as the Eigen peers split them.
void BM_copy_rows(benchmark::State& st) {
  kb::set_threads(static_cast<int>(st.range(0)));
  Tensor x = kiln::random::normal({1024, 1024}), y = kiln::Tensor::empty({1024, 1024}, kiln::DType::float32);
  const float* px = x.data<float>();
  float* py = y.data<float>();
  for (auto _ : st) {
#pragma omp parallel for schedule(static)
    for (int r = 0; r < 1024; ++r) std::memcpy(py + r * 1024, px + r * 1024, 1024 * sizeof(float));
    benchmark::ClobberMemory();
  }
}
BENCHMARK(BM_kiln_softmax_rows)->Arg(1)->Arg(2)->UseRealTime()->Unit(benchmark::kMicrosecond);
BENCHMARK(BM_copy_rows)->Arg(1)->Arg(2)->UseRealTime()->Unit(benchmark::kMicrosecond);
BENCHMARK(BM_kiln_eager_softmax_rows)->Arg(1)->Arg(2)->UseRealTime()->Unit(benchmark::kMicrosecond);
BENCHMARK(BM_kiln_eager_layernorm_rows)->Arg(1)->Arg(2)->UseRealTime()->Unit(benchmark::kMicrosecond);
BENCHMARK(BM_eigen_softmax_rows)->Arg(1)->Arg(2)->UseRealTime()->Unit(benchmark::kMicrosecond);
BENCHMARK(BM_kiln_layernorm_rows)->Arg(1)->Arg(2)->UseRealTime()->Unit(benchmark::kMicrosecond);
BENCHMARK(BM_eigen_layernorm_rows)->Arg(1)->Arg(2)->UseRealTime()->Unit(benchmark::kMicrosecond);

// ---- the same peers with Eigen built for AVX2+FMA (registered under KILN_JIT_TARGET=avx2) -------------
bool jit_target_avx2() {
  const char* e = std::getenv("KILN_JIT_TARGET");
  return e && std::string(e) == "avx2";
}
// Splits [0, n) between the threads as the Eigen peers above do.
template <class F>
void split(int threads, int64_t n, F f) {
#pragma omp parallel num_threads(threads)
  {
    int t = omp_get_thread_num(), nt = omp_get_num_threads();
    f(n * t / nt, n * (t + 1) / nt);
  }
}
void BM_eigen_avx2_chain_1M(benchmark::State& st) {
  const int threads = static_cast<int>(st.range(0));
  kb::set_threads(threads);
  Eigen::ArrayXf a = Eigen::ArrayXf::Random(kMid).abs(), b = Eigen::ArrayXf::Random(kMid).abs(),
                 c = Eigen::ArrayXf::Random(kMid).abs(), y(kMid);
  for (auto _ : st) {
    split(threads, kMid, [&](int64_t lo, int64_t hi) {
      kb::eigen_avx2::chain(a.data() + lo, b.data() + lo, c.data() + lo, y.data() + lo, hi - lo);
    });
    benchmark::ClobberMemory();
  }
  st.SetBytesProcessed(st.iterations() * kMid * 16);
}
template <bool Softmax>
void BM_eigen_avx2_rows(benchmark::State& st) {
  const int threads = static_cast<int>(st.range(0));
  kb::set_threads(threads);
  using M = Eigen::Array<float, Eigen::Dynamic, Eigen::Dynamic, Eigen::RowMajor>;
  M x = M::Random(1024, 1024), y(1024, 1024);
  for (auto _ : st) {
    split(threads, 1024, [&](int64_t lo, int64_t hi) {
      if (Softmax) kb::eigen_avx2::softmax_rows(x.data(), y.data(), lo, hi, 1024);
      else kb::eigen_avx2::layernorm_rows(x.data(), y.data(), lo, hi, 1024);
    });
    benchmark::ClobberMemory();
  }
}
void register_avx2_peers() {
  if (std::string(kb::eigen_avx2::simd_instruction_sets()).find("AVX512") != std::string::npos) {
    std::fprintf(stderr, "bench_compile: kiln_bench_eigen_avx2 was built with AVX-512; AVX2 peers not run\n");
    return;
  }
  benchmark::RegisterBenchmark("BM_eigen_avx2_chain_1M", BM_eigen_avx2_chain_1M)
      ->Arg(1)->Arg(2)->UseRealTime()->Unit(benchmark::kMicrosecond);
  benchmark::RegisterBenchmark("BM_eigen_avx2_softmax_rows", BM_eigen_avx2_rows<true>)
      ->Arg(1)->Arg(2)->UseRealTime()->Unit(benchmark::kMicrosecond);
  benchmark::RegisterBenchmark("BM_eigen_avx2_layernorm_rows", BM_eigen_avx2_rows<false>)
      ->Arg(1)->Arg(2)->UseRealTime()->Unit(benchmark::kMicrosecond);
}
}  // namespace

int main(int argc, char** argv) {
  using kb::compare;
  const bool avx2 = jit_target_avx2();
  if (avx2) register_avx2_peers();
  compare({"compile a 20-op elementwise graph (cold)", "BM_kiln_compile_20op/real_time",
           {"BM_cxx_O3_compile_20op/iterations:3/real_time", "BM_torchscript_first_call_20op/real_time"}, "<= 1 ms", "",
           true});
  compare({"cached compiled call, 1-element inputs", "BM_kiln_cached_call_1elem", {"BM_torch_add_1elem"}, "<= 1 us",
           "BM_kiln_eager_add_1elem"});
  compare({"execute_raw, 1-element inputs", "BM_kiln_execute_raw_1elem", {"BM_torch_add_1elem"}, "<= 0.3 us",
           "BM_kiln_eager_add_1elem"});
  compare({"cached compiled call, struct arguments (2 structs of 4 + 2 tensors, 1 element), vs execute_raw",
           "BM_kiln_cached_call_struct_1elem", {"BM_kiln_execute_raw_struct_1elem"},
           "<= 1.3x execute_raw of the same callable", "", true});
  for (const char* n : {"1M", "16M"})
    for (int t : {1, 2}) {
      std::string s = std::string("_") + n + "/" + std::to_string(t) + "/real_time";
      compare({std::string("tanh(a*b+c)*0.5+exp(-a), ") + n + " f32, " + std::to_string(t) + " thread(s)",
               "BM_kiln_compiled_chain" + s, {"BM_eigen_chain" + s, "BM_loop_chain" + s, "BM_torch_chain" + s},
               "faster than Eigen; >= 80% of triad bandwidth (BM_triad_stream" + s + " GB/s)",
               "BM_kiln_eager_chain" + s});
      if (avx2 && std::string(n) == "1M")  // kiln's AVX2 code against Eigen's AVX2 packet math
        compare({std::string("tanh(a*b+c)*0.5+exp(-a), 1M f32, ") + std::to_string(t) +
                     " thread(s), vs Eigen built for AVX2",
                 "BM_kiln_compiled_chain" + s, {"BM_eigen_avx2_chain" + s}, "faster than Eigen (AVX2)",
                 "BM_kiln_eager_chain" + s});
    }
  for (int t : {1, 2}) {
    std::string s = "/" + std::to_string(t) + "/real_time";
    compare({"softmax rows 1024x1024, " + std::to_string(t) + " thread(s)", "BM_kiln_softmax_rows" + s,
             {"BM_eigen_softmax_rows" + s, "BM_torch_softmax_rows" + s}, "faster than LibTorch and Eigen",
             "BM_kiln_eager_softmax_rows" + s});
    compare({"layer_norm rows 1024x1024, " + std::to_string(t) + " thread(s)", "BM_kiln_layernorm_rows" + s,
             {"BM_eigen_layernorm_rows" + s, "BM_torch_layernorm_rows" + s}, "faster than LibTorch and Eigen",
             "BM_kiln_eager_layernorm_rows" + s});
    compare({"layer_norm rows 1024x1024, " + std::to_string(t) + " thread(s), vs the copy loop (y = x: its memory bound)",
             "BM_kiln_layernorm_rows" + s, {"BM_copy_rows" + s}, "reported (the bound: about 1x)",
             "BM_kiln_eager_layernorm_rows" + s});
    if (avx2) {
      compare({"softmax rows 1024x1024, " + std::to_string(t) + " thread(s), vs Eigen built for AVX2",
               "BM_kiln_softmax_rows" + s, {"BM_eigen_avx2_softmax_rows" + s}, "faster than Eigen (AVX2)",
               "BM_kiln_eager_softmax_rows" + s});
      compare({"layer_norm rows 1024x1024, " + std::to_string(t) + " thread(s), vs Eigen built for AVX2",
               "BM_kiln_layernorm_rows" + s, {"BM_eigen_avx2_layernorm_rows" + s}, "faster than Eigen (AVX2)",
               "BM_kiln_eager_layernorm_rows" + s});
    }
  }
  return kb::run_main(argc, argv, "Compiled (issue 4)");
}
