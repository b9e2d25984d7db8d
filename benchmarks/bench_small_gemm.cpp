// Issue 18, item 1: the generated small GEMMs (backends/cpu/jit/small_gemm.h)
// against OpenBLAS's sgemm on the same problems, 1 and 2 threads: square
// 32..256 (where the plan's size threshold kSmallGemmMaxMacs is chosen), the
// five GEMMs of the digits step at batch 64 (with their transposes; together
// and each alone), and a
// compiled matmul (what a plan picks: the generated GEMM or the BLAS call),
// also with B passed as a transposed view.
// The CPU target follows KILN_JIT_TARGET (avx2 / avx512).
#include <cblas.h>

#include <cstdlib>
#include <memory>
#include <string>
#include <vector>

#include "../backends/cpu/jit/small_gemm.h"
#include "bench_peers.h"
#include "bench_report.h"
#include <kiln/kiln.h>

namespace {

using namespace kiln::codegen;

struct Problem {
  int64_t m, n, k;
  bool ta, tb;
};

// the five GEMMs of the digits step (examples/digits_model.h) at batch 64
const Problem kDigits[5] = {
    {64, 128, 64, false, false},  // x W1
    {64, 10, 128, false, false},  // h W2
    {128, 10, 64, true, false},   // h^T dz2
    {64, 128, 10, false, true},   // dz2 W2^T
    {64, 128, 64, true, false},   // x^T dz1
};

struct Data {
  std::vector<float> a, b, c;
  explicit Data(const Problem& p)
      : a(size_t(p.m * p.k), 0.5f), b(size_t(p.k * p.n), 0.25f), c(size_t(p.m * p.n)) {}
};

int64_t lda(const Problem& p) { return p.ta ? p.m : p.k; }
int64_t ldb(const Problem& p) { return p.tb ? p.k : p.n; }

void blas(const Problem& p, Data& d) {
  cblas_sgemm(CblasRowMajor, p.ta ? CblasTrans : CblasNoTrans, p.tb ? CblasTrans : CblasNoTrans, int(p.m), int(p.n),
              int(p.k), 1.0f, d.a.data(), int(lda(p)), d.b.data(), int(ldb(p)), 0.0f, d.c.data(), int(p.n));
}

std::unique_ptr<SmallGemm> generated(const Problem& p) {
  return generate_small_gemm(plain_gemm_key(detect_cpu_target(), p.m, p.n, p.k, p.ta, p.tb, lda(p), ldb(p), p.n));
}

void BM_generated_sgemm(benchmark::State& st) {
  const int64_t n = st.range(0);
  kb::set_threads(int(st.range(1)));
  const Problem p{n, n, n, false, false};
  Data d(p);
  const auto g = generated(p);
  char* ptrs[1] = {reinterpret_cast<char*>(d.c.data())};
  for (auto _ : st) {
    g->run(d.a.data(), d.b.data(), ptrs);
    benchmark::ClobberMemory();
  }
  st.SetItemsProcessed(st.iterations() * 2 * n * n * n);
}
void BM_blas_sgemm(benchmark::State& st) {
  const int64_t n = st.range(0);
  kb::set_threads(int(st.range(1)));
  const Problem p{n, n, n, false, false};
  Data d(p);
  for (auto _ : st) {
    blas(p, d);
    benchmark::ClobberMemory();
  }
  st.SetItemsProcessed(st.iterations() * 2 * n * n * n);
}
// a plan's matmul: kiln::compile of a @ b (the plan picks the generated GEMM or OpenBLAS)
void BM_compiled_matmul(benchmark::State& st) {
  const int64_t n = st.range(0);
  kb::set_threads(int(st.range(1)));
  kiln::Tensor a = kiln::random::normal({n, n}), b = kiln::random::normal({n, n});
  const auto spec = kiln::TensorLayout(kiln::DType::float32, {n, n});
  kiln::CompiledCallable f = kiln::compile([](kiln::Tensor x, kiln::Tensor y) { return kiln::matmul(x, y); })(spec, spec);
  f(a, b);  // warm-up
  for (auto _ : st) benchmark::DoNotOptimize(f(a, b).leaves[0].data_ptr());
  st.SetItemsProcessed(st.iterations() * 2 * n * n * n);
}
// a @ b^T with b^T passed as a transposed view, strict: the plan makes
// eager's call for the view (the BLAS's NT call, or the generated GEMM for a
// transposed B, reading it in place); range(2) = 1: float64
void BM_compiled_matmul_bt_view(benchmark::State& st) {
  const int64_t n = st.range(0);
  kb::set_threads(int(st.range(1)));
  const kiln::DType dt = st.range(2) ? kiln::DType::float64 : kiln::DType::float32;
  kiln::Tensor a = kiln::random::normal({n, n}, 0.0, 1.0, dt), bt = kiln::random::normal({n, n}, 0.0, 1.0, dt).transpose();
  kiln::CompileOptions o;
  o.session = std::make_shared<kiln::InferenceSession>(kiln::KernelOptions{.strict = true});
  kiln::CompiledCallable f =
      kiln::compile([](kiln::Tensor x, kiln::Tensor y) { return kiln::matmul(x, y); }, o)(a.layout(), bt.layout());
  f(a, bt);  // warm-up
  for (auto _ : st) benchmark::DoNotOptimize(f(a, bt).leaves[0].data_ptr());
  st.SetItemsProcessed(st.iterations() * 2 * n * n * n);
}
BENCHMARK(BM_compiled_matmul_bt_view)
    ->Args({16, 1, 0})->Args({64, 1, 0})->Args({256, 1, 0})->Args({16, 1, 1})->Args({64, 1, 1})->Args({256, 1, 1})
    ->Unit(benchmark::kMicrosecond);
// eager matmul of a @ b: the generated GEMM from eager's kernel cache plus
// the op's dispatch (against BM_generated_sgemm: the dispatch and cache
// lookup per call)
void BM_eager_matmul(benchmark::State& st) {
  const int64_t n = st.range(0);
  kb::set_threads(int(st.range(1)));
  kiln::Tensor a = kiln::random::normal({n, n}), b = kiln::random::normal({n, n});
  for (auto _ : st) benchmark::DoNotOptimize(kiln::matmul(a, b).data_ptr());
  st.SetItemsProcessed(st.iterations() * 2 * n * n * n);
}
BENCHMARK(BM_eager_matmul)->Args({32, 1})->Args({64, 1})->Args({64, 2})->Unit(benchmark::kMicrosecond);
#define SQUARE_ARGS                                                                                         \
  ->Args({32, 1})->Args({64, 1})->Args({64, 2})->Args({96, 1})->Args({128, 1})->Args({128, 2})->Args({160, 1}) \
      ->Args({192, 1})->Args({256, 1})->Args({256, 2})->Unit(benchmark::kMicrosecond)
BENCHMARK(BM_generated_sgemm) SQUARE_ARGS;
BENCHMARK(BM_blas_sgemm) SQUARE_ARGS;
BENCHMARK(BM_compiled_matmul) SQUARE_ARGS;

void BM_digits_gemms_generated(benchmark::State& st) {
  kb::set_threads(int(st.range(0)));
  std::vector<Data> d;
  std::vector<std::unique_ptr<SmallGemm>> g;
  for (const Problem& p : kDigits) {
    d.emplace_back(p);
    g.push_back(generated(p));
  }
  for (auto _ : st) {
    for (size_t i = 0; i < 5; ++i) {
      char* ptrs[1] = {reinterpret_cast<char*>(d[i].c.data())};
      g[i]->run(d[i].a.data(), d[i].b.data(), ptrs);
    }
    benchmark::ClobberMemory();
  }
}
void BM_digits_gemms_blas(benchmark::State& st) {
  kb::set_threads(int(st.range(0)));
  std::vector<Data> d;
  for (const Problem& p : kDigits) d.emplace_back(p);
  for (auto _ : st) {
    for (size_t i = 0; i < 5; ++i) blas(kDigits[i], d[i]);
    benchmark::ClobberMemory();
  }
}
// each of the five alone (range(0): its index in kDigits), 1 thread
void BM_digits_gemm_generated(benchmark::State& st) {
  kb::set_threads(1);
  const Problem& p = kDigits[st.range(0)];
  Data d(p);
  const auto g = generated(p);
  char* ptrs[1] = {reinterpret_cast<char*>(d.c.data())};
  for (auto _ : st) {
    g->run(d.a.data(), d.b.data(), ptrs);
    benchmark::ClobberMemory();
  }
}
void BM_digits_gemm_blas(benchmark::State& st) {
  kb::set_threads(1);
  const Problem& p = kDigits[st.range(0)];
  Data d(p);
  for (auto _ : st) {
    blas(p, d);
    benchmark::ClobberMemory();
  }
}
BENCHMARK(BM_digits_gemm_generated)->DenseRange(0, 4)->Unit(benchmark::kMicrosecond);
BENCHMARK(BM_digits_gemm_blas)->DenseRange(0, 4)->Unit(benchmark::kMicrosecond);
BENCHMARK(BM_digits_gemms_generated)->Arg(1)->Arg(2)->Unit(benchmark::kMicrosecond);
BENCHMARK(BM_digits_gemms_blas)->Arg(1)->Arg(2)->Unit(benchmark::kMicrosecond);

// Issue 18, item 5: a compiled (a b, c d) (two independent n^3 GEMMs) on 2
// threads with inter-op pairing (range(1) = 1: the two run at once, one per
// thread) and without (KILN_JIT_INTEROP=0: in order, each on one thread as
// the generated GEMM runs below 128^3). Sets jit/step_pairs.h's
// kInteropMinMacs.
void BM_compiled_two_gemms(benchmark::State& st) {
  const int64_t n = st.range(0);
  kb::set_threads(2);
  setenv("KILN_JIT_INTEROP", st.range(1) ? "1" : "0", 1);
  kiln::Tensor a = kiln::random::normal({n, n}), b = kiln::random::normal({n, n});
  kiln::Tensor c = kiln::random::normal({n, n}), d = kiln::random::normal({n, n});
  const auto spec = kiln::TensorLayout(kiln::DType::float32, {n, n});
  kiln::CompiledCallable f = kiln::compile([](kiln::Tensor w, kiln::Tensor x, kiln::Tensor y, kiln::Tensor z) {
    return std::make_tuple(kiln::matmul(w, x), kiln::matmul(y, z));
  })(spec, spec, spec, spec);
  unsetenv("KILN_JIT_INTEROP");
  f(a, b, c, d);  // warm-up
  for (auto _ : st) benchmark::DoNotOptimize(f(a, b, c, d).leaves[0].data_ptr());
  st.SetItemsProcessed(st.iterations() * 4 * n * n * n);
}
BENCHMARK(BM_compiled_two_gemms)
    ->ArgsProduct({{32, 40, 48, 56, 64, 80, 96, 112}, {0, 1}})
    ->Unit(benchmark::kMicrosecond);

}  // namespace

int main(int argc, char** argv) {
  using kb::compare;
  const std::string isa = cpu_target_name(detect_cpu_target());
  for (int n : {32, 64, 96, 128, 160, 192, 256})
    for (int t : {1, 2}) {
      if (t == 2 && n != 64 && n != 128 && n != 256) continue;
      const std::string s = "/" + std::to_string(n) + "/" + std::to_string(t);
      compare({"generated sgemm " + std::to_string(n) + ", " + std::to_string(t) + " thread(s), " + isa,
               "BM_generated_sgemm" + s, {"BM_blas_sgemm" + s}, "reported (sets kSmallGemmMaxMacs)", {}, false, {},
               true});
      compare({"compiled matmul " + std::to_string(n) + " float32, " + std::to_string(t) + " thread(s), " + isa,
               "BM_compiled_matmul" + s, {"BM_blas_sgemm" + s}, ">= 0.95x OpenBLAS (ratio <= 1.05)", {}, true, {},
               true});
    }
  for (int t : {1, 2})
    compare({"the digits step's five GEMMs, generated, " + std::to_string(t) + " thread(s), " + isa,
             "BM_digits_gemms_generated/" + std::to_string(t), {"BM_digits_gemms_blas/" + std::to_string(t)},
             "reported", {}, false, {}, true});
  const char* names[5] = {"x W1 (64x128x64)", "h W2 (64x10x128)", "h^T dz2 (128x10x64, A^T)", "dz2 W2^T (64x128x10, B^T)",
                          "x^T dz1 (64x128x64, A^T)"};
  for (int i = 0; i < 5; ++i)
    compare({std::string("digits GEMM ") + names[i] + ", generated, 1 thread, " + isa,
             "BM_digits_gemm_generated/" + std::to_string(i), {"BM_digits_gemm_blas/" + std::to_string(i)}, "reported",
             {}, false, {}, true});
  for (int n : {32, 40, 48, 56, 64, 80, 96, 112})
    compare({"(a b, c d) compiled, " + std::to_string(n) + "^3 each, 2 threads, GEMMs at once vs in order, " + isa,
             "BM_compiled_two_gemms/" + std::to_string(n) + "/1", {"BM_compiled_two_gemms/" + std::to_string(n) + "/0"},
             "reported (sets kInteropMinMacs)", {}, false, {}, true});
  return kb::run_main(argc, argv, "Small GEMMs generated with their epilogues, inter-op pairs (issue 18)");
}
