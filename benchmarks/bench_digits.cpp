// The main job's speed figures: one training step of examples/digits.cpp
// (64-128-10 MLP, tanh hidden layer, softmax cross-entropy, hand-derived
// gradients, momentum SGD) at batch 64: kiln eager and kiln compiled run
// digits::sgd_step from examples/digits_model.h itself; the peers do the same
// math by hand: Eigen (here) and LibTorch eager and TorchScript
// (bench_digits_torch.cpp, built when LibTorch is installed). Also the
// compile time of the step. Before benchmarking, every implementation runs
// 10 steps from the same start and its weights are checked against kiln
// eager's. Data: the first batch of the example's training split when
// data/digits.csv.gz exists, else random inputs of the same shapes.
#include <benchmark/benchmark.h>
#include <omp.h>
#include <unistd.h>

#include <Eigen/Core>
#include <algorithm>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <string>
#include <kiln/kiln.h>

#ifdef KILN_BENCH_HAVE_CBLAS
#include <cblas.h>
#endif

#include "bench_digits.h"
#include "bench_peers.h"
#include "bench_report.h"
#include "digits_model.h"
#include "eigen_avx2_peers.h"
#include "eigen_digits_step.h"

#ifndef KILN_SOURCE_DIR
#define KILN_SOURCE_DIR "."
#endif

namespace kb {
namespace digits_bench {
__attribute__((weak)) std::vector<std::pair<std::string, std::vector<float>>> torch_runs(int) { return {}; }

const Start& start() {
  static const Start s = [] {
    constexpr int64_t kBatch = 64;
    const std::string path = KILN_SOURCE_DIR "/data/digits.csv.gz";
    kiln::Tensor x, y;
    bool real = access(path.c_str(), R_OK) == 0;
    if (real) {  // the example's split and its first 64 training rows
      digits::Split d = digits::split_dataset(kiln::read_csv_dataset(path, digits::kClasses), 0.2, 20240601);
      x = kiln::slice(d.x_train, 0, 0, kBatch).contiguous();
      y = digits::one_hot_targets(kiln::slice(d.y_train, 0, 0, kBatch).contiguous());
    } else {
      kiln::random::Generator gen(1);
      x = kiln::random::uniform({kBatch, digits::kInputs}, 0.0, 1.0, kiln::DType::float32, &gen);
      std::vector<int64_t> labels(kBatch);
      for (int64_t i = 0; i < kBatch; ++i) labels[static_cast<size_t>(i)] = (i * 7) % digits::kClasses;
      y = digits::one_hot_targets(kiln::Tensor::from_vector(labels));
    }
    digits::Mlp p = digits::init_mlp(7);
    digits::Hyper hp;
    return Start{kBatch, digits::kInputs, digits::kHidden, digits::kClasses, x.to_vector<float>(),
                 y.contiguous().to_vector<float>(), p.w1.to_vector<float>(), p.b1.to_vector<float>(),
                 p.w2.to_vector<float>(), p.b2.to_vector<float>(), hp.lr, hp.momentum, real};
  }();
  return s;
}
}  // namespace digits_bench
}  // namespace kb

namespace {
using kb::digits_bench::start;
using kiln::Tensor;

// ---- kiln: digits::sgd_step, eagerly and compiled ----------------------------------------
struct KilnStart {
  digits::Mlp p, v;
  Tensor x, y;
};
KilnStart kiln_start() {
  const auto& s = start();
  digits::Mlp p{Tensor::from_vector(s.w1, {s.inputs, s.hidden}), Tensor::from_vector(s.b1, {s.hidden}),
                Tensor::from_vector(s.w2, {s.hidden, s.classes}), Tensor::from_vector(s.b2, {s.classes})};
  return {p, digits::zeros_like(p), Tensor::from_vector(s.x, {s.batch, s.inputs}),
          Tensor::from_vector(s.y, {s.batch, s.classes})};
}
digits::Hyper hyper() { return {start().lr, start().momentum}; }

// Runs `step` like digits::train_epoch does (weights and momenta in and out).
void kiln_loop(benchmark::State& st, const digits::StepFn& step, KilnStart k) {
  std::get<2>(step(k.p, k.v, k.x, k.y)).realize();  // warm-up (first use of each kernel)
  for (auto _ : st) {
    auto [p, v, loss] = step(k.p, k.v, k.x, k.y);
    loss.realize();
    k.p = p;
    k.v = v;
  }
}
void BM_kiln_eager_digits_step(benchmark::State& st) {
  kb::set_threads(static_cast<int>(st.range(0)));
  kiln_loop(st, digits::eager_step(hyper()), kiln_start());
}
void BM_kiln_compiled_digits_step(benchmark::State& st) {
  kb::set_threads(static_cast<int>(st.range(0)));
  KilnStart k = kiln_start();
  kiln_loop(st, digits::compiled_step(hyper(), k.p, k.v, k.x, k.y), k);
}
// Compile time of the step: stage + optimise + generate code, from scratch each time.
void BM_kiln_compile_digits_step(benchmark::State& st) {
  kb::set_threads(1);
  KilnStart k = kiln_start();
  for (auto _ : st) benchmark::DoNotOptimize(digits::compiled_step(hyper(), k.p, k.v, k.x, k.y));
}

// ---- Eigen: the same step by hand (eigen_digits_step.h), built for this CPU --------------------
using EigenStep = kb::digits_bench::EigenStep;
void BM_eigen_digits_step(benchmark::State& st) {
  kb::set_threads(static_cast<int>(st.range(0)));
  EigenStep e(start());
  e.step();  // warm-up
  for (auto _ : st) {
    e.step();
    benchmark::DoNotOptimize(e.loss);
  }
}

// ---- the same Eigen step built for AVX2+FMA (eigen_avx2_peers.h; registered under KILN_JIT_TARGET=avx2) ----
void BM_eigen_avx2_digits_step(benchmark::State& st) {
  const int threads = static_cast<int>(st.range(0));
  kb::set_threads(threads);
  kb::eigen_avx2::set_threads(threads);
  kb::eigen_avx2::DigitsStep* e = kb::eigen_avx2::digits_step_new(start());
  kb::eigen_avx2::digits_step(e);  // warm-up
  for (auto _ : st) benchmark::DoNotOptimize(kb::eigen_avx2::digits_step(e));
  kb::eigen_avx2::digits_step_delete(e);
}
// True under KILN_JIT_TARGET=avx2 when the AVX2 library is AVX2 indeed: then
// the step's Eigen peer is BM_eigen_avx2_digits_step.
bool register_avx2_peers() {
  const char* t = std::getenv("KILN_JIT_TARGET");
  if (!t || std::string(t) != "avx2") return false;
  if (std::string(kb::eigen_avx2::simd_instruction_sets()).find("AVX512") != std::string::npos) {
    std::fprintf(stderr, "bench_digits: kiln_bench_eigen_avx2 was built with AVX-512; AVX2 peer not run\n");
    return false;
  }
  benchmark::RegisterBenchmark("BM_eigen_avx2_digits_step", BM_eigen_avx2_digits_step)
      ->Arg(1)->Arg(2)->UseRealTime()->Unit(benchmark::kMicrosecond);
  return true;
}

#ifdef KILN_BENCH_HAVE_CBLAS
// The step's GEMM floor (issue 18): its five GEMMs, with their transposes,
// through OpenBLAS directly: x W1, h W2, h^T dz2, dz2 W2^T, x^T dz1.
void BM_digits_gemm_floor(benchmark::State& st) {
  kb::set_threads(static_cast<int>(st.range(0)));
  const kb::digits_bench::Start& s = start();
  const int B = 64, I = int(s.inputs), H = int(s.hidden), C = int(s.classes);
  std::vector<float> x(size_t(B * I), 0.5f), w1(size_t(I * H), 0.1f), h(size_t(B * H)), w2(size_t(H * C), 0.1f),
      z2(size_t(B * C)), dz2(size_t(B * C), 0.01f), dw2(size_t(H * C)), dh(size_t(B * H)), dw1(size_t(I * H));
  const auto N = CblasNoTrans, T = CblasTrans;
  for (auto _ : st) {
    cblas_sgemm(CblasRowMajor, N, N, B, H, I, 1.0f, x.data(), I, w1.data(), H, 0.0f, h.data(), H);
    cblas_sgemm(CblasRowMajor, N, N, B, C, H, 1.0f, h.data(), H, w2.data(), C, 0.0f, z2.data(), C);
    cblas_sgemm(CblasRowMajor, T, N, H, C, B, 1.0f, h.data(), H, dz2.data(), C, 0.0f, dw2.data(), C);
    cblas_sgemm(CblasRowMajor, N, T, B, H, C, 1.0f, dz2.data(), C, w2.data(), C, 0.0f, dh.data(), H);
    cblas_sgemm(CblasRowMajor, T, N, I, H, B, 1.0f, x.data(), I, dh.data(), H, 0.0f, dw1.data(), H);
    benchmark::ClobberMemory();
  }
}
#endif

#define STEP_ARGS ->Arg(1)->Arg(2)->UseRealTime()->Unit(benchmark::kMicrosecond)
#ifdef KILN_BENCH_HAVE_CBLAS
BENCHMARK(BM_digits_gemm_floor) STEP_ARGS;
#endif
BENCHMARK(BM_kiln_eager_digits_step) STEP_ARGS;
BENCHMARK(BM_kiln_compiled_digits_step) STEP_ARGS;
BENCHMARK(BM_eigen_digits_step) STEP_ARGS;
BENCHMARK(BM_kiln_compile_digits_step)->UseRealTime()->Unit(benchmark::kMillisecond);

// ---- the same math? 10 steps from the same start, weights against kiln eager's ----------------
std::vector<float> flat(const digits::Mlp& p) {
  std::vector<float> out;
  for (const Tensor* t : {&p.w1, &p.b1, &p.w2, &p.b2}) {
    auto v = t->to_vector<float>();
    out.insert(out.end(), v.begin(), v.end());
  }
  return out;
}
std::string check_same_math(bool avx2_peer) {
  constexpr int kSteps = 10;
  constexpr double kTolerance = 1e-4;  // float32 rounding only: measured ~1e-7
  std::string bad;
  kb::set_threads(1);
  auto run_kiln = [&](const digits::StepFn& step) {
    KilnStart k = kiln_start();
    for (int i = 0; i < kSteps; ++i) {
      auto [p, v, loss] = step(k.p, k.v, k.x, k.y);
      k.p = p;
      k.v = v;
    }
    return flat(k.p);
  };
  std::vector<float> ref = run_kiln(digits::eager_step(hyper()));
  KilnStart k = kiln_start();
  std::vector<std::pair<std::string, std::vector<float>>> runs = {
      {"kiln compiled", run_kiln(digits::compiled_step(hyper(), k.p, k.v, k.x, k.y))}};
  EigenStep e(start());
  for (int i = 0; i < kSteps; ++i) e.step();
  runs.emplace_back("Eigen", e.weights());
  if (avx2_peer) {
    kb::eigen_avx2::set_threads(1);
    kb::eigen_avx2::DigitsStep* e2 = kb::eigen_avx2::digits_step_new(start());
    for (int i = 0; i < kSteps; ++i) kb::eigen_avx2::digits_step(e2);
    runs.emplace_back("Eigen (AVX2)", kb::eigen_avx2::digits_step_weights(e2));
    kb::eigen_avx2::digits_step_delete(e2);
  }
  for (auto& r : kb::digits_bench::torch_runs(kSteps)) runs.push_back(std::move(r));
  std::string out = "Same math: largest |w - w(kiln eager)| after " + std::to_string(kSteps) + " steps:";
  for (const auto& [name, w] : runs) {
    double worst = w.size() == ref.size() ? 0.0 : INFINITY;
    for (size_t i = 0; i < w.size() && i < ref.size(); ++i)
      worst = std::max(worst, std::fabs(static_cast<double>(w[i]) - ref[i]));
    char b[96];
    std::snprintf(b, sizeof b, " %s %.2g%s;", name.c_str(), worst, worst > kTolerance ? " (MISMATCH)" : "");
    out += b;
    if (worst > kTolerance) bad += " " + name;
  }
  if (!bad.empty())
    out += "\n\n**WARNING: not the same math (largest difference above 1e-4):" + bad +
           ". Its timings above measure a wrong result.**";
  return out;
}
}  // namespace

int main(int argc, char** argv) {
  using kb::compare;
  const std::string data = start().real_data ? "data/digits.csv.gz" : "random data (data/digits.csv.gz missing)";
  // Under KILN_JIT_TARGET=avx2 the Eigen peer is the step built for AVX2+FMA
  // (BM_eigen_avx2_digits_step), and run_benchmarks.sh runs with
  // OPENBLAS_CORETYPE=Haswell (OpenBLAS's AVX2 kernels, those of an AVX2-only
  // CPU) for the GEMM floor; the row titles name both.
  const bool avx2 = register_avx2_peers();
  const std::string eigen = avx2 ? "BM_eigen_avx2_digits_step" : "BM_eigen_digits_step";
  const std::string eigen_words = avx2 ? "Eigen's hand-written step built for AVX2+FMA" : "Eigen's hand-written step";
#ifdef KILN_BENCH_HAVE_CBLAS
  const std::string blas_core = openblas_get_corename();
#else
  const std::string blas_core = "no OpenBLAS";
#endif
  for (int t : {1, 2}) {
    std::string s = "/" + std::to_string(t) + "/real_time", th = std::to_string(t) + " thread(s)";
    compare({"digits training step, batch 64, " + th, "BM_kiln_compiled_digits_step" + s,
             {eigen + s, "BM_torch_digits_step" + s, "BM_torch_digits_step_inplace" + s,
              "BM_torchscript_digits_step" + s},
             ">= 3x faster than kiln eager (eager/compiled >= 3)", "BM_kiln_eager_digits_step" + s});
    compare({"digits training step vs its GEMM floor (the five GEMMs through OpenBLAS, " + blas_core + " kernels), " + th,
             "BM_kiln_compiled_digits_step" + s, {"BM_digits_gemm_floor" + s}, "<= 1.2x the GEMM floor",
             "BM_kiln_eager_digits_step" + s});
    compare({"digits training step vs " + eigen_words + ", " + th, "BM_kiln_compiled_digits_step" + s,
             {eigen + s}, "<= 0.8x Eigen's step", "BM_kiln_eager_digits_step" + s});
    compare({"digits training step vs LibTorch eager only, " + th, "BM_kiln_compiled_digits_step" + s,
             {"BM_torch_digits_step" + s, "BM_torch_digits_step_inplace" + s},
             "faster than LibTorch eager (ratio < 1)", "BM_kiln_eager_digits_step" + s});
  }
  compare({"compile the digits training step (cold)", "BM_kiln_compile_digits_step/real_time",
           {"BM_torchscript_compile_digits_step/real_time"}, "reported (no target)", "", true});
  kb::note("Digits step data: " + data + ". " + check_same_math(avx2));
  return kb::run_main(argc, argv, "Digits training step (main job)");
}
