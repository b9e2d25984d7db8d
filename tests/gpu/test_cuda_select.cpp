// CUDA kernels of the selection, window and matrix-structure rows
// (backends/cuda/select.cu: topk, searchsorted, max_pool2d, avg_pool2d,
// tril, triu, diag, nan_to_num, cross) against the CPU kernels, bit for
// bit (each is exact: positions, copied bits, float64 sums in the CPU's
// order, products rounded without contraction), over the CUDA dtypes,
// strided and negative-stride device views, ties, NaN, -0/+0, empty
// tensors and k at and beyond the extent. Label `gpu`; skipped without a
// device.
#include <cmath>
#include <functional>
#include <limits>
#include <random>

#include "../same_bits.h"
#include "gpu_util.h"
#include "../tie_values.h"

namespace {
using namespace kiln;
using kt::tie_tensor;

const std::vector<DType> kDTypes = {DType::float32, DType::float16, DType::bfloat16, DType::float64, DType::int32,
                                    DType::int64,   DType::int8,    DType::uint8,    DType::bool_};


/// A view applied to the CPU tensor and, after the copy, to the CUDA one
/// (so the kernel sees the strides).
using View = std::function<Tensor(const Tensor&)>;
const View as_is = [](const Tensor& t) { return t; };
const View flipped = [](const Tensor& t) { return flip(t); };  // negative strides
const View every_other_last = [](const Tensor& t) {           // a strided view (last axis extent halves)
  return slice(t, t.ndim() - 1, 0, std::nullopt, 2);
};

/// f on CPU inputs and on their CUDA copies (with the same view): both
/// succeed with the same bits, or both raise the same kind of error.
template <class F>
int compare(const std::vector<Tensor>& base, const View& view, F f, const std::string& what) {
  std::vector<Tensor> cpu_in, gpu_in;
  for (const Tensor& t : base) {
    cpu_in.push_back(view(t));
    gpu_in.push_back(view(t.cuda()));
  }
  const auto r = kt::run_on_cpu_and_cuda(f, cpu_in, gpu_in, /*shape_errors=*/true);
  if (!r) return 0;
  const Tensor &want = r->first, &got = r->second;
  CHECK_MESSAGE(got.device() == Device::cuda(0), what);
  const Tensor back = got.cpu();
  CHECK_MESSAGE(kt::same_bits(back, want), what << ": CUDA " << back << "\nCPU " << want);
  return 1;
}
}  // namespace

TEST_SUITE("gpu") {
  TEST_CASE("topk on CUDA gives the CPU's positions and values: ties, NaN, k = 0 .. n, long lines, views") {
    if (!kt::gpu_or_skip()) return;
    int n = 0;
    for (DType d : kDTypes) {
      for (const Shape& s : std::vector<Shape>{{17}, {4, 9}, {3, 6, 5}, {1}, {2, 0, 3}, {3, 2000}}) {
        const Tensor x = tie_tensor(s, d, 7);
        for (int64_t axis = 0; axis < int64_t(s.size()); ++axis) {
          const int64_t e = s[size_t(axis)];
          for (int64_t k : {int64_t(0), int64_t(1), e / 3, e, e + 1}) {  // e + 1: ValueError on both
            for (bool largest : {true, false}) {
              CAPTURE(d);
              CAPTURE(shape_str(s));
              CAPTURE(axis);
              CAPTURE(k);
              CAPTURE(largest);
              for (const View& v : {as_is, flipped}) {
                n += compare({x}, v, [&](const std::vector<Tensor>& in) { return topk(in[0], k, axis, largest).indices; },
                             "topk indices");
                n += compare({x}, v, [&](const std::vector<Tensor>& in) { return topk(in[0], k, axis, largest).values; },
                             "topk values");
              }
            }
          }
        }
      }
    }
    CHECK(n > 500);
  }

  TEST_CASE("searchsorted on CUDA gives the CPU's positions: left/right, NaN last, batched, empty") {
    if (!kt::gpu_or_skip()) return;
    const double nan = std::numeric_limits<double>::quiet_NaN(), inf = std::numeric_limits<double>::infinity();
    int n = 0;
    for (DType d : kDTypes) {
      const std::vector<double> sorted = is_floating(d) ? std::vector<double>{-inf, -1, 0, 0, 2, 2, 2, 5, inf, nan, nan}
                                                        : std::vector<double>{0, 1, 1, 2, 5, 5, 7};
      const Tensor seq = Tensor::from_vector(sorted, {int64_t(sorted.size())}).to(d);
      const Tensor rows = sort(tie_tensor({4, 300}, d, 9), -1);
      for (bool right : {false, true}) {
        CAPTURE(d);
        CAPTURE(right);
        auto f = [&](const std::vector<Tensor>& in) { return searchsorted(in[0], in[1], right); };
        n += compare({seq, tie_tensor({3, 5}, d, 5)}, as_is, f, "1-d seq");
        n += compare({seq, tie_tensor({3, 10}, d, 5)}, every_other_last, f, "1-d seq, strided values");
        n += compare({seq, Tensor::empty({0}, d)}, as_is, f, "no values");
        n += compare({Tensor::empty({0}, d), tie_tensor({6}, d, 3)}, as_is, f, "empty seq");
        n += compare({rows, tie_tensor({4, 7}, d, 13)}, as_is, f, "batched");
      }
    }
    CHECK(n == 90);
  }

  TEST_CASE("max_pool2d and avg_pool2d on CUDA give the CPU's bits: padding, stride, dilation, NaN, views") {
    if (!kt::gpu_or_skip()) return;
    struct P {
      std::vector<int64_t> k, s, p, dl;
    };
    const std::vector<P> params = {{{2, 2}, {2, 2}, {0, 0}, {1, 1}}, {{3, 3}, {1, 1}, {1, 1}, {1, 1}},
                                   {{3, 2}, {2, 1}, {1, 0}, {2, 1}}, {{5, 3}, {3, 2}, {2, 1}, {1, 2}},
                                   {{1, 1}, {1, 1}, {0, 0}, {1, 1}}, {{4, 4}, {3, 3}, {2, 2}, {1, 1}},
                                   {{9, 9}, {1, 1}, {0, 0}, {1, 1}}};  // the last: larger than x (ShapeError on both)
    int n = 0;
    for (DType d : kDTypes) {
      for (const Shape& s : std::vector<Shape>{{2, 3, 7, 16}, {0, 2, 6, 6}, {1, 1, 64, 64}}) {
        const Tensor x = is_floating(d) ? kt::random_tensor(s, d, 3, true) : tie_tensor(s, d, 21);
        for (const P& p : params) {
          CAPTURE(d);
          CAPTURE(shape_str(s));
          CAPTURE(p.k[0]);
          for (const View& v : {as_is, flipped, every_other_last}) {
            n += compare({x}, v, [&](const std::vector<Tensor>& in) { return max_pool2d(in[0], p.k, p.s, p.p, p.dl); },
                         "max_pool2d");
            for (bool inc : {true, false})
              n += compare({x}, v, [&](const std::vector<Tensor>& in) { return avg_pool2d(in[0], p.k, p.s, p.p, inc); },
                           "avg_pool2d");
          }
        }
      }
    }
    CHECK(n > 300);
  }

  TEST_CASE("tril, triu and diag on CUDA give the CPU's bits for every k, batches and views") {
    if (!kt::gpu_or_skip()) return;
    int n = 0;
    for (DType d : kDTypes) {
      for (const Shape& s : std::vector<Shape>{{5, 8}, {2, 4, 6}, {3, 0, 4}, {1, 1}}) {
        const Tensor x = tie_tensor(s, d, 31);
        for (int64_t k : {-9, -2, -1, 0, 1, 3, 9}) {
          CAPTURE(d);
          CAPTURE(shape_str(s));
          CAPTURE(k);
          for (const View& v : {as_is, flipped, every_other_last}) {
            n += compare({x}, v, [&](const std::vector<Tensor>& in) { return tril(in[0], k); }, "tril");
            n += compare({x}, v, [&](const std::vector<Tensor>& in) { return triu(in[0], k); }, "triu");
            n += compare({x}, v, [&](const std::vector<Tensor>& in) { return tril(in[0].transpose(), k); }, "tril^T");
          }
        }
      }
      for (const Shape& s : std::vector<Shape>{{4}, {0}, {3, 6}, {6, 3}, {0, 2}}) {
        const Tensor x = tie_tensor(s, d, 41);
        for (int64_t k : {-7, -2, -1, 0, 1, 2, 7}) {
          CAPTURE(d);
          CAPTURE(shape_str(s));
          CAPTURE(k);
          for (const View& v : {as_is, flipped, every_other_last})
            n += compare({x}, v, [&](const std::vector<Tensor>& in) { return diag(in[0], k); }, "diag");
        }
      }
    }
    CHECK(n == 9 * (4 * 7 * 3 * 3 + 5 * 7 * 3));
  }

  TEST_CASE("nan_to_num and cross on CUDA give the CPU's bits: defaults, explicit values, mixed dtypes, broadcast") {
    if (!kt::gpu_or_skip()) return;
    const double inf = std::numeric_limits<double>::infinity();
    int n = 0;
    for (DType d : kDTypes) {
      const Tensor x = is_floating(d) ? kt::random_tensor({6, 10}, d, 51, true) : tie_tensor({6, 10}, d, 51);
      for (const View& v : {as_is, flipped, every_other_last}) {
        CAPTURE(d);
        n += compare({x}, v, [](const std::vector<Tensor>& in) { return nan_to_num(in[0]); }, "nan_to_num defaults");
        n += compare({x}, v, [](const std::vector<Tensor>& in) { return nan_to_num(in[0], -7.5, 1e300, -0.0); },
                     "nan_to_num explicit");
        n += compare({x}, v, [&](const std::vector<Tensor>& in) { return nan_to_num(in[0], inf, 2.0, -inf); },
                     "nan_to_num infinities");
      }
      n += compare({Tensor::empty({0, 3}, d)}, as_is, [](const std::vector<Tensor>& in) { return nan_to_num(in[0]); },
                   "nan_to_num empty");
      for (DType e : {d, DType::float32, DType::int32}) {
        const Tensor a = is_floating(d) ? kt::random_tensor({4, 3, 6}, d, 61, true) : tie_tensor({4, 3, 6}, d, 61);
        const Tensor b = is_floating(e) ? kt::random_tensor({3, 1}, e, 62) : tie_tensor({3, 1}, e, 62);
        CAPTURE(d);
        CAPTURE(e);
        n += compare({a, b}, as_is, [](const std::vector<Tensor>& in) { return cross(in[0], in[1], 1); }, "cross");
        n += compare({a, b}, flipped, [](const std::vector<Tensor>& in) { return cross(in[0], in[1], -2); },
                     "cross flipped");
        n += compare({a.transpose(1, 2).contiguous(), b.reshape({1, 3})}, as_is,
                     [](const std::vector<Tensor>& in) { return cross(in[0], in[1], -1); }, "cross last axis");
        n += compare({Tensor::empty({0, 3}, d), b.reshape({1, 3})}, as_is,
                     [](const std::vector<Tensor>& in) { return cross(in[0], in[1], 1); }, "cross empty");
      }
    }
    CHECK(n > 9 * 10);
  }
}
