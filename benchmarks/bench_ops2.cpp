// Issue 17 speed figures: conv2d (ResNet 3x3 block) and a batched attention
// einsum beside LibTorch (bench_ops2_torch.cpp, when LibTorch is installed),
// sort / topk of 16M float32 beside std::sort / std::nth_element, max_pool2d
// (ResNet's stem pool) beside LibTorch and a plain loop, and
// linalg::solve 512x512 beside LAPACK's dgesv called directly (and Eigen's
// PartialPivLU, the engine kiln's solve runs on).
#include <benchmark/benchmark.h>

#include <Eigen/LU>
#include <algorithm>
#include <limits>
#include <kiln/kiln.h>
#include <random>
#include <vector>

#include "bench_peers.h"
#include "bench_report.h"

extern "C" void dgesv_(const int* n, const int* nrhs, double* a, const int* lda, int* ipiv, double* b, const int* ldb,
                       int* info);

namespace {
constexpr int64_t kSort = 16 << 20;

// ---- conv2d: x [8, 64, 56, 56], w [64, 64, 3, 3], padding 1 ----------------------------------
void BM_kiln_conv2d(benchmark::State& st) {
  kb::set_threads(static_cast<int>(st.range(0)));
  kiln::Tensor x = kiln::random::normal({8, 64, 56, 56}), w = kiln::random::normal({64, 64, 3, 3});
  for (auto _ : st) benchmark::DoNotOptimize(kiln::conv2d(x, w, {}, {1, 1}, {1, 1}).realize());
  st.SetItemsProcessed(st.iterations() * 2 * 8 * 64 * 56 * 56 * 64 * 9);
}
BENCHMARK(BM_kiln_conv2d)->Arg(1)->Arg(2)->UseRealTime()->Unit(benchmark::kMillisecond);

void BM_kiln_conv2d_compiled(benchmark::State& st) {
  kb::set_threads(static_cast<int>(st.range(0)));
  kiln::Tensor x = kiln::random::normal({8, 64, 56, 56}), w = kiln::random::normal({64, 64, 3, 3});
  auto f = [](kiln::Tensor a, kiln::Tensor b) { return kiln::conv2d(a, b, {}, {1, 1}, {1, 1}); };
  kiln::CompiledCallable run =
      kiln::compile(f)(kiln::TensorLayout(kiln::DType::float32, x.shape()), kiln::TensorLayout(kiln::DType::float32, w.shape()));
  for (auto _ : st) benchmark::DoNotOptimize(run(x, w));
  st.SetItemsProcessed(st.iterations() * 2 * 8 * 64 * 56 * 56 * 64 * 9);
}
BENCHMARK(BM_kiln_conv2d_compiled)->Arg(1)->Arg(2)->UseRealTime()->Unit(benchmark::kMillisecond);

// ---- einsum 'bhqd,bhkd->bhqk', 8 x 12 x 128 x 64 ----------------------------------------------
void BM_kiln_einsum_attn(benchmark::State& st) {
  kb::set_threads(static_cast<int>(st.range(0)));
  kiln::Tensor q = kiln::random::normal({8, 12, 128, 64}), k = kiln::random::normal({8, 12, 128, 64});
  for (auto _ : st) benchmark::DoNotOptimize(kiln::einsum("bhqd,bhkd->bhqk", {q, k}).realize());
  st.SetItemsProcessed(st.iterations() * 2 * 8 * 12 * 128 * 128 * 64);
}
BENCHMARK(BM_kiln_einsum_attn)->Arg(1)->Arg(2)->UseRealTime()->Unit(benchmark::kMicrosecond);

// ---- sort / topk of 16M float32 ----------------------------------------------------------------
std::vector<float> sort_data() {
  std::vector<float> v(kSort);
  std::mt19937 rng(1);
  std::normal_distribution<float> nd;
  for (float& e : v) e = nd(rng);
  return v;
}
void BM_kiln_sort_16M(benchmark::State& st) {
  kb::set_threads(static_cast<int>(st.range(0)));
  kiln::Tensor x = kiln::Tensor::from_vector(sort_data());
  for (auto _ : st) benchmark::DoNotOptimize(kiln::sort(x).realize());
}
BENCHMARK(BM_kiln_sort_16M)->Arg(1)->Arg(2)->UseRealTime()->Unit(benchmark::kMillisecond);
void BM_std_sort_16M(benchmark::State& st) {
  const std::vector<float> v = sort_data();
  for (auto _ : st) {
    std::vector<float> c = v;  // kiln's sort writes a new tensor too
    std::sort(c.begin(), c.end());
    benchmark::DoNotOptimize(c.data());
  }
}
BENCHMARK(BM_std_sort_16M)->UseRealTime()->Unit(benchmark::kMillisecond);
void BM_kiln_topk100_16M(benchmark::State& st) {
  kb::set_threads(static_cast<int>(st.range(0)));
  kiln::Tensor x = kiln::Tensor::from_vector(sort_data());
  for (auto _ : st) {
    kiln::TopK t = kiln::topk(x, 100);
    benchmark::DoNotOptimize(t.values.realize());
  }
}
BENCHMARK(BM_kiln_topk100_16M)->Arg(1)->Arg(2)->UseRealTime()->Unit(benchmark::kMillisecond);
void BM_std_nth_element_topk100_16M(benchmark::State& st) {
  const std::vector<float> v = sort_data();
  for (auto _ : st) {
    std::vector<float> c = v;
    std::nth_element(c.begin(), c.begin() + 99, c.end(), std::greater<float>());
    std::sort(c.begin(), c.begin() + 100, std::greater<float>());  // topk's sorted order
    benchmark::DoNotOptimize(c.data());
  }
}
BENCHMARK(BM_std_nth_element_topk100_16M)->UseRealTime()->Unit(benchmark::kMillisecond);

// ---- max_pool2d 3x3 stride 2 padding 1 of 1x64x112x112 float32 (ResNet's stem pool) ----------
constexpr int64_t kPc = 64, kPh = 112, kPo = 56;
void BM_kiln_max_pool2d(benchmark::State& st) {
  kb::set_threads(static_cast<int>(st.range(0)));
  kiln::Tensor x = kiln::random::normal({1, kPc, kPh, kPh});
  for (auto _ : st) benchmark::DoNotOptimize(kiln::max_pool2d(x, {3, 3}, {2, 2}, {1, 1}).realize());
  st.SetItemsProcessed(st.iterations() * kPc * kPo * kPo * 9);
}
BENCHMARK(BM_kiln_max_pool2d)->Arg(1)->Arg(2)->UseRealTime()->Unit(benchmark::kMicrosecond);
// The peer without LibTorch: the plain loop one writes by hand (one thread,
// taps clipped per output, NaN propagating as torch's and kiln's).
void BM_loop_max_pool2d(benchmark::State& st) {
  std::vector<float> x(size_t(kPc * kPh * kPh)), y(size_t(kPc * kPo * kPo));
  std::mt19937 rng(3);
  std::normal_distribution<float> nd;
  for (float& e : x) e = nd(rng);
  for (auto _ : st) {
    for (int64_t c = 0; c < kPc; ++c)
      for (int64_t oy = 0; oy < kPo; ++oy)
        for (int64_t ox = 0; ox < kPo; ++ox) {
          float m = -std::numeric_limits<float>::infinity();
          const int64_t y0 = oy * 2 - 1, x0 = ox * 2 - 1;
          for (int64_t i = std::max<int64_t>(y0, 0); i < std::min<int64_t>(y0 + 3, kPh); ++i)
            for (int64_t j = std::max<int64_t>(x0, 0); j < std::min<int64_t>(x0 + 3, kPh); ++j) {
              const float v = x[size_t((c * kPh + i) * kPh + j)];
              if (v > m || v != v) m = v;
            }
          y[size_t((c * kPo + oy) * kPo + ox)] = m;
        }
    benchmark::DoNotOptimize(y.data());
    benchmark::ClobberMemory();
  }
  st.SetItemsProcessed(st.iterations() * kPc * kPo * kPo * 9);
}
BENCHMARK(BM_loop_max_pool2d)->UseRealTime()->Unit(benchmark::kMicrosecond);

// ---- solve 512 x 512, one right-hand side, float64 --------------------------------------------
constexpr int kN = 512;
std::vector<double> solve_matrix() {
  std::vector<double> a(size_t(kN) * kN);
  std::mt19937 rng(2);
  std::normal_distribution<double> nd;
  for (double& e : a) e = nd(rng);
  for (int i = 0; i < kN; ++i) a[size_t(i) * kN + i] += kN;
  return a;
}
void BM_kiln_solve_512(benchmark::State& st) {
  kb::set_threads(static_cast<int>(st.range(0)));
  kiln::Tensor a = kiln::Tensor::from_vector(solve_matrix(), {kN, kN});
  kiln::Tensor b = kiln::ones({kN}, kiln::DType::float64);
  for (auto _ : st) benchmark::DoNotOptimize(kiln::linalg::solve(a, b).realize());
}
BENCHMARK(BM_kiln_solve_512)->Arg(1)->Arg(2)->UseRealTime()->Unit(benchmark::kMillisecond);
void BM_lapack_dgesv_512(benchmark::State& st) {
  kb::set_threads(static_cast<int>(st.range(0)));
  const std::vector<double> a0 = solve_matrix();
  std::vector<int> ipiv(kN);
  for (auto _ : st) {
    std::vector<double> a = a0, b(kN, 1.0);  // dgesv overwrites both, as kiln copies its inputs
    const int n = kN, nrhs = 1;
    int info = 0;
    dgesv_(&n, &nrhs, a.data(), &n, ipiv.data(), b.data(), &n, &info);
    benchmark::DoNotOptimize(b.data());
  }
}
BENCHMARK(BM_lapack_dgesv_512)->Arg(1)->Arg(2)->UseRealTime()->Unit(benchmark::kMillisecond);
void BM_eigen_lu_solve_512(benchmark::State& st) {
  kb::set_threads(static_cast<int>(st.range(0)));
  const std::vector<double> a0 = solve_matrix();
  const Eigen::Map<const Eigen::Matrix<double, Eigen::Dynamic, Eigen::Dynamic, Eigen::RowMajor>> a(a0.data(), kN, kN);
  const Eigen::VectorXd b = Eigen::VectorXd::Ones(kN);
  for (auto _ : st) {
    Eigen::VectorXd x = Eigen::PartialPivLU<Eigen::MatrixXd>(a).solve(b);
    benchmark::DoNotOptimize(x.data());
  }
}
BENCHMARK(BM_eigen_lu_solve_512)->Arg(1)->Arg(2)->UseRealTime()->Unit(benchmark::kMillisecond);
}  // namespace

int main(int argc, char** argv) {
  using kb::compare;
  for (int t : {1, 2}) {
    const std::string s = "/" + std::to_string(t) + "/real_time", th = ", " + std::to_string(t) + " thread(s)";
    compare({"conv2d 3x3 64->64, 8x64x56x56, pad 1, float32" + th, "BM_kiln_conv2d_compiled" + s,
             {"BM_torch_conv2d" + s}, "no slower than LibTorch (ratio <= 1)", "BM_kiln_conv2d" + s});
    compare({"einsum bhqd,bhkd->bhqk 8x12x128x64 float32" + th, "BM_kiln_einsum_attn" + s,
             {"BM_torch_einsum_attn" + s}, "no slower than LibTorch (ratio <= 1)"});
    compare({"sort 16M float32" + th, "BM_kiln_sort_16M" + s, {"BM_std_sort_16M/real_time"}, "beside std::sort"});
    compare({"topk k=100 of 16M float32" + th, "BM_kiln_topk100_16M" + s, {"BM_std_nth_element_topk100_16M/real_time"},
             "beside std::nth_element"});
    compare({"max_pool2d 3x3 s2 p1, 1x64x112x112 float32" + th, "BM_kiln_max_pool2d" + s,
             {"BM_torch_max_pool2d" + s, "BM_loop_max_pool2d/real_time"}, "beside LibTorch and a plain loop"});
    compare({"linalg::solve 512x512 float64, 1 rhs" + th, "BM_kiln_solve_512" + s,
             {"BM_lapack_dgesv_512" + s, "BM_eigen_lu_solve_512" + s}, "beside LAPACK dgesv"});
  }
  return kb::run_main(argc, argv, "Sort, einsum, conv2d, linalg (issue 17)");
}
