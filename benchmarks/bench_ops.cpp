// Issue 2 speed figures: eager dispatch, elementwise bandwidth and matmul,
// each beside its peers in the same run (a plain loop, Eigen, OpenBLAS; the
// LibTorch peers are in bench_ops_torch.cpp when LibTorch is installed).
#include <benchmark/benchmark.h>
#include <cblas.h>
#include <omp.h>

#include <Eigen/Core>
#include <cmath>
#include <cstdlib>
#include <string>
#include <vector>
#include <kiln/kiln.h>

#include "../jit/elementwise_program.h"
#include "../jit/program_builder.h"
#include "bench_peers.h"
#include "bench_report.h"
#include "eigen_avx2_peers.h"

namespace {
constexpr int64_t kBig = 16 << 20;  // 16M elements

// ---- eager dispatch --------------------------------------------------------------------
void BM_kiln_add_1elem(benchmark::State& st) {
  kb::set_threads(1);
  kiln::Tensor a = kiln::ones({1}), b = kiln::ones({1});
  for (auto _ : st) benchmark::DoNotOptimize(a + b);
}
BENCHMARK(BM_kiln_add_1elem);

// A lazy scope on tiny tensors: record two ops, end the scope, read the
// result (the realization runs both ops with the eager kernels). Beside
// BM_kiln_add_1elem it gives what recording and realizing add per op.
void BM_kiln_lazy_2ops_1elem(benchmark::State& st) {
  kb::set_threads(1);
  kiln::Tensor a = kiln::ones({1}), b = kiln::ones({1});
  for (auto _ : st) {
    kiln::Tensor c;
    {
      auto scope = kiln::lazy();
      c = (a + b) * a;
    }
    benchmark::DoNotOptimize(c.item<float>());
  }
}
BENCHMARK(BM_kiln_lazy_2ops_1elem);

// ---- bandwidth: a plain parallel copy loop is the reference ----------------------------------
void BM_copy_loop(benchmark::State& st) {
  kb::set_threads(static_cast<int>(st.range(0)));
  std::vector<float> in(kBig, 1.0f), out(kBig);
  for (auto _ : st) {
    const float* s = in.data();
    float* d = out.data();
#pragma omp parallel for schedule(static)
    for (int64_t i = 0; i < kBig; ++i) d[i] = s[i];
    benchmark::ClobberMemory();
  }
  st.SetBytesProcessed(st.iterations() * kBig * 8);
}
BENCHMARK(BM_copy_loop)->Arg(1)->Arg(2)->UseRealTime()->Unit(benchmark::kMillisecond);

template <int Op>
void BM_kiln_ew(benchmark::State& st) {
  kb::set_threads(static_cast<int>(st.range(0)));
  kiln::Tensor a = kiln::random::uniform({kBig}, 0.5, 1.5), b = kiln::random::uniform({kBig}, 0.5, 1.5);
  int64_t bytes = 0;
  for (auto _ : st) {
    kiln::Tensor r;
    switch (Op) {
      case 0: r = a + b; bytes = 12; break;
      case 1: r = a * b; bytes = 12; break;
      case 2: r = -a; bytes = 8; break;
      case 3: r = kiln::exp(a); bytes = 8; break;
      case 4: r = kiln::tanh(a); bytes = 8; break;
      case 5: r = kiln::sqrt(a); bytes = 8; break;
    }
    benchmark::DoNotOptimize(r.data_ptr());
  }
  st.SetBytesProcessed(st.iterations() * kBig * bytes);
}
BENCHMARK_TEMPLATE(BM_kiln_ew, 0)->Name("BM_kiln_add_16M")->Arg(2)->UseRealTime()->Unit(benchmark::kMillisecond);
BENCHMARK_TEMPLATE(BM_kiln_ew, 1)->Name("BM_kiln_mul_16M")->Arg(2)->UseRealTime()->Unit(benchmark::kMillisecond);
BENCHMARK_TEMPLATE(BM_kiln_ew, 2)->Name("BM_kiln_neg_16M")->Arg(2)->UseRealTime()->Unit(benchmark::kMillisecond);
BENCHMARK_TEMPLATE(BM_kiln_ew, 3)->Name("BM_kiln_exp_16M")->Arg(1)->Arg(2)->UseRealTime()->Unit(benchmark::kMillisecond);
BENCHMARK_TEMPLATE(BM_kiln_ew, 4)->Name("BM_kiln_tanh_16M")->Arg(1)->Arg(2)->UseRealTime()->Unit(benchmark::kMillisecond);
BENCHMARK_TEMPLATE(BM_kiln_ew, 5)->Name("BM_kiln_sqrt_16M")->Arg(2)->UseRealTime()->Unit(benchmark::kMillisecond);

// ---- vector math in L1: the generated kernel of y = op(x) on 1024 float32 (the one eager exp and tanh
// run; KILN_JIT_TARGET picks the target), one thread, values in [-3, 3]: ns per element, without dispatch ----
template <int Op>
void BM_gen_unary_1k(benchmark::State& st) {
  using namespace kiln::codegen;
  constexpr int64_t n = 1024;
  const kiln::OpId op = Op == 0 ? kiln::OpId::Exp : kiln::OpId::Tanh;
  ProgramBuilder b({kiln::DType::float32, kiln::DType::float32}, 1);
  b.store(0, b.op(op, kiln::DType::float32, b.load(1, kiln::DType::float32)));
  auto k = generate_elementwise(b.p, detect_cpu_target());
  std::vector<float> x(n), y(n);
  for (int64_t i = 0; i < n; ++i) x[size_t(i)] = 3.0f * std::sin(float(i) * 0.37f);
  char* p[2] = {reinterpret_cast<char*>(y.data()), reinterpret_cast<char*>(x.data())};
  const int64_t strides[2] = {4, 4};
  for (auto _ : st) {
    k->fn()(p, strides, n);
    benchmark::DoNotOptimize(y.data());
  }
  st.SetItemsProcessed(st.iterations() * n);
}
BENCHMARK_TEMPLATE(BM_gen_unary_1k, 0)->Name("BM_gen_exp_1k");
BENCHMARK_TEMPLATE(BM_gen_unary_1k, 1)->Name("BM_gen_tanh_1k");

// ---- softmax over [64, 128] float32 rows (in L1), one thread, compiled: Arg 0 unmasked (normal values),
// Arg 1 with 96 of each row's 128 entries at -3.4e38 (an attention mask's padding: exp's input far
// below the point where it gives +0; vmath_alg.h: exp_signed_zeroing). CPU time per row ----
void BM_kiln_softmax_128_rows(benchmark::State& st) {
  kb::set_threads(1);
  constexpr int64_t rows = 64, cols = 128;
  auto run = kiln::compile([](kiln::Tensor x) { return kiln::softmax(x, -1); })(
      kiln::TensorLayout(kiln::DType::float32, {rows, cols}));
  kiln::Tensor x = kiln::random::normal({rows, cols});
  if (st.range(0) == 1) {
    float* px = static_cast<float*>(x.data_ptr());
    for (int64_t i = 0; i < rows; ++i)
      for (int64_t j = cols - 96; j < cols; ++j) px[i * cols + j] = -3.4e38f;
  }
  for (auto _ : st) benchmark::DoNotOptimize(run(x).leaves[0].data_ptr());
  st.counters["per_row"] =
      benchmark::Counter(double(rows), benchmark::Counter::kIsIterationInvariantRate | benchmark::Counter::kInvert);
}
BENCHMARK(BM_kiln_softmax_128_rows)->Arg(0)->Arg(1)->Unit(benchmark::kMicrosecond);

// ---- matmul ---------------------------------------------------------------------------------------
void BM_kiln_matmul(benchmark::State& st) {
  const int64_t n = st.range(0);
  kb::set_threads(static_cast<int>(st.range(1)));
  kiln::Tensor a = kiln::random::normal({n, n}), b = kiln::random::normal({n, n});
  for (auto _ : st) benchmark::DoNotOptimize(kiln::matmul(a, b).data_ptr());
  st.SetItemsProcessed(st.iterations() * 2 * n * n * n);
}
void BM_openblas_sgemm(benchmark::State& st) {
  const int64_t n = st.range(0);
  kb::set_threads(static_cast<int>(st.range(1)));
  std::vector<float> a(n * n, 0.5f), b(n * n, 0.25f), c(n * n);
  for (auto _ : st) {
    cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasNoTrans, n, n, n, 1.0f, a.data(), n, b.data(), n, 0.0f, c.data(), n);
    benchmark::ClobberMemory();
  }
  st.SetItemsProcessed(st.iterations() * 2 * n * n * n);
}
void BM_eigen_gemm(benchmark::State& st) {
  const int64_t n = st.range(0);
  kb::set_threads(static_cast<int>(st.range(1)));
  using M = Eigen::Matrix<float, Eigen::Dynamic, Eigen::Dynamic, Eigen::RowMajor>;
  M a = M::Random(n, n), b = M::Random(n, n), c(n, n);
  for (auto _ : st) {
    c.noalias() = a * b;
    benchmark::ClobberMemory();
  }
  st.SetItemsProcessed(st.iterations() * 2 * n * n * n);
}
#define MATMUL_ARGS ->Args({256, 1})->Args({256, 2})->Args({512, 1})->Args({512, 2})->Args({1024, 1})->Args({1024, 2})->UseRealTime()->Unit(benchmark::kMicrosecond)
BENCHMARK(BM_kiln_matmul) MATMUL_ARGS;
BENCHMARK(BM_openblas_sgemm) MATMUL_ARGS;
BENCHMARK(BM_eigen_gemm) MATMUL_ARGS;

// ---- AVX2 peers (registered under KILN_JIT_TARGET=avx2): Eigen's exp/tanh/sqrt and the copy loop built for
// AVX2+FMA (eigen_avx2_peers.h), beside kiln's eager rows run with the JIT capped at AVX2 ----------------------
template <int Op>
void BM_eigen_avx2_ew(benchmark::State& st) {
  const int threads = static_cast<int>(st.range(0));
  kb::set_threads(threads);
  std::vector<float> in(kBig), out(kBig);
  for (int64_t i = 0; i < kBig; ++i) in[i] = 0.5f + static_cast<float>(i % 1000) * 1e-3f;
  for (auto _ : st) {
#pragma omp parallel num_threads(threads)
    {
      const int t = omp_get_thread_num(), nt = omp_get_num_threads();
      const int64_t lo = kBig * t / nt, hi = kBig * (t + 1) / nt;
      const float* s = in.data() + lo;
      float* d = out.data() + lo;
      switch (Op) {
        case 0: kb::eigen_avx2::copy(s, d, hi - lo); break;
        case 1: kb::eigen_avx2::exp(s, d, hi - lo); break;
        case 2: kb::eigen_avx2::tanh(s, d, hi - lo); break;
        case 3: kb::eigen_avx2::sqrt(s, d, hi - lo); break;
      }
    }
    benchmark::ClobberMemory();
  }
  st.SetBytesProcessed(st.iterations() * kBig * 8);
}
// Eigen's GEMM built for AVX2+FMA: the AVX2 table's matmul rows compare kiln
// (JIT capped at AVX2, OpenBLAS on its Haswell kernels) with AVX2 peers only.
void BM_eigen_avx2_gemm(benchmark::State& st) {
  const int64_t n = st.range(0);
  kb::set_threads(static_cast<int>(st.range(1)));
  kb::eigen_avx2::set_threads(static_cast<int>(st.range(1)));
  std::vector<float> a(n * n), b(n * n), c(n * n);
  for (int64_t i = 0; i < n * n; ++i) a[i] = static_cast<float>(i % 17) * 0.1f - 0.8f, b[i] = static_cast<float>(i % 13) * 0.1f - 0.6f;
  for (auto _ : st) {
    kb::eigen_avx2::gemm(a.data(), b.data(), c.data(), n);
    benchmark::ClobberMemory();
  }
  st.SetItemsProcessed(st.iterations() * 2 * n * n * n);
}
bool register_avx2_peers() {
  const char* e = std::getenv("KILN_JIT_TARGET");
  if (!e || std::string(e) != "avx2") return false;
  if (std::string(kb::eigen_avx2::simd_instruction_sets()).find("AVX512") != std::string::npos) return false;
  benchmark::RegisterBenchmark("BM_eigen_avx2_copy_16M", BM_eigen_avx2_ew<0>)->Arg(2)->UseRealTime()->Unit(benchmark::kMillisecond);
  benchmark::RegisterBenchmark("BM_eigen_avx2_exp_16M", BM_eigen_avx2_ew<1>)->Arg(2)->UseRealTime()->Unit(benchmark::kMillisecond);
  benchmark::RegisterBenchmark("BM_eigen_avx2_tanh_16M", BM_eigen_avx2_ew<2>)->Arg(2)->UseRealTime()->Unit(benchmark::kMillisecond);
  benchmark::RegisterBenchmark("BM_eigen_avx2_sqrt_16M", BM_eigen_avx2_ew<3>)->Arg(2)->UseRealTime()->Unit(benchmark::kMillisecond);
  benchmark::RegisterBenchmark("BM_eigen_avx2_gemm", BM_eigen_avx2_gemm) MATMUL_ARGS;
  return true;
}
}  // namespace

int main(int argc, char** argv) {
  using kb::compare;
  const bool avx2 = register_avx2_peers();
  compare({"eager add, 1-element float32 (dispatch)", "BM_kiln_add_1elem", {"BM_torch_add_1elem"},
           "<= 1 us and no slower than at::add"});
  // The copy loop moves 8 bytes per element; binary ops move 12: its time is
  // scaled to the op's bytes, so the ratio is copy-loop bandwidth / kiln's.
  for (const char* op : {"add", "mul", "neg", "exp", "tanh", "sqrt"}) {
    const bool binary = std::string(op) == "add" || std::string(op) == "mul";
    compare({std::string(op) + " 16M float32, 2 threads (bandwidth vs the copy loop's)",
             std::string("BM_kiln_") + op + "_16M/2/real_time",
             {"BM_copy_loop/2/real_time", std::string("BM_torch_") + op + "_16M/2/real_time"},
             ">= 0.8x copy-loop bandwidth (ratio <= 1.25)", {}, false,
             {{"BM_copy_loop/2/real_time", binary ? 1.5 : 1.0}}});
    const std::string o(op);
    if (avx2 && (o == "exp" || o == "tanh" || o == "sqrt"))
      compare({o + " 16M float32, 2 threads, vs Eigen and the copy loop built for AVX2",
               "BM_kiln_" + o + "_16M/2/real_time",
               {"BM_eigen_avx2_copy_16M/2/real_time", "BM_eigen_avx2_" + o + "_16M/2/real_time"},
               ">= 0.8x copy-loop bandwidth (ratio <= 1.25 vs the copy loop)"});
  }
  for (int n : {256, 512, 1024})
    for (int t : {1, 2}) {
      std::string s = "/" + std::to_string(n) + "/" + std::to_string(t) + "/real_time";
      // Under KILN_JIT_TARGET=avx2 the peers are AVX2 builds (OpenBLAS's Haswell kernels, LibTorch capped at
      // AVX2 by run_benchmarks.sh, Eigen built for AVX2), not the -march=native Eigen.
      const std::string eigen = avx2 ? "BM_eigen_avx2_gemm" : "BM_eigen_gemm";
      compare({"matmul " + std::to_string(n) + " float32, " + std::to_string(t) + " thread(s)" + (avx2 ? ", AVX2 peers" : ""),
               "BM_kiln_matmul" + s, {"BM_openblas_sgemm" + s, eigen + s, "BM_torch_mm" + s},
               ">= 0.9x best BLAS (ratio <= 1.11)"});
    }
  return kb::run_main(argc, argv, "Eager ops (issue 2)");
}
