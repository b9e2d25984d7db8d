// einsum against brute-force float64 loops over every label assignment (30
// random subscript strings and hand-picked ones), conv2d/conv1d against a
// direct 7-loop float64 reference, pooling against window loops; eager and
// compiled.
#include <map>
#include <random>

#include "../jit/elementwise_program.h"
#include "op_table_checks.h"
#include "test_util.h"

using namespace kiln;
using kt::random_tensor;
using kt::values;

namespace {

// Row-major flat index of `idx` in `shape`.
int64_t flat(const Shape& shape, const std::vector<int64_t>& idx) {
  int64_t f = 0;
  for (size_t d = 0; d < shape.size(); ++d) f = f * shape[d] + idx[d];
  return f;
}

// einsum by loops: every assignment of every label, products summed into
// the output element the output labels pick.
std::vector<double> ref_einsum(const std::vector<std::string>& ins, const std::string& out,
                               const std::vector<Tensor>& ops, const std::map<char, int64_t>& ext) {
  std::vector<char> labels;  // the labels some operand or the output uses
  for (const auto& [c, n] : ext) {
    bool used = out.find(c) != std::string::npos;
    for (const std::string& t : ins) used = used || t.find(c) != std::string::npos;
    if (used) labels.push_back(c);
  }
  Shape oshape;
  for (char c : out) oshape.push_back(ext.at(c));
  std::vector<double> r(static_cast<size_t>(checked_numel(oshape)), 0.0);
  std::vector<std::vector<double>> v;
  for (const Tensor& t : ops) v.push_back(values(t));
  std::map<char, int64_t> at;
  for (char c : labels) at[c] = 0;
  int64_t total = 1;
  for (char c : labels) total *= ext.at(c);
  for (int64_t step = 0; step < total; ++step) {
    double p = 1;
    for (size_t k = 0; k < ops.size(); ++k) {
      std::vector<int64_t> idx;
      for (char c : ins[k]) idx.push_back(at[c]);
      p *= v[k][static_cast<size_t>(flat(ops[k].shape(), idx))];
    }
    std::vector<int64_t> oi;
    for (char c : out) oi.push_back(at[c]);
    r[static_cast<size_t>(flat(oshape, oi))] += p;
    for (auto it = labels.rbegin(); it != labels.rend(); ++it) {
      if (++at[*it] < ext.at(*it)) break;
      at[*it] = 0;
    }
  }
  return r;
}

void check_einsum(const std::vector<std::string>& ins, const std::string& out, const std::map<char, int64_t>& ext,
                  DType dt, uint64_t seed) {
  std::string spec;
  std::vector<Tensor> ops;
  for (size_t k = 0; k < ins.size(); ++k) {
    Shape s;
    for (char c : ins[k]) s.push_back(ext.at(c));
    ops.push_back(random_tensor(s, dt, seed + k, false, 1.0, -3, 3).reshape(s));  // reshape: 0-d operands too
    spec += (k ? "," : "") + ins[k];
  }
  spec += "->" + out;
  CAPTURE(spec);
  Tensor got = einsum(spec, ops);
  Shape oshape;
  for (char c : out) oshape.push_back(ext.at(c));
  REQUIRE(got.shape() == oshape);
  kt::check_all_close(got, ref_einsum(ins, out, ops, ext), is_floating(dt) ? 1e-5 : 0, is_floating(dt) ? 1e-5 : 0,
                      spec.c_str());
}

// conv2d by the definition, in float64. With `zeros_times_w` a window
// position in the padding contributes 0 * w (NaN for an infinite or NaN
// weight, as an implementation that pads the input gives: PyTorch's and
// kiln's); without, it is skipped.
std::vector<double> ref_conv2d(const Tensor& x, const Tensor& w, const Tensor& b, int64_t sh, int64_t sw, int64_t ph,
                               int64_t pw, int64_t dh, int64_t dw, int64_t g, Shape& out_shape,
                               bool zeros_times_w = false, std::vector<double>* abs_sum = nullptr) {
  const int64_t n = x.shape()[0], c = x.shape()[1], h = x.shape()[2], wd = x.shape()[3];
  const int64_t oc = w.shape()[0], cg = w.shape()[1], kh = w.shape()[2], kw = w.shape()[3];
  const int64_t oh = (h + 2 * ph - dh * (kh - 1) - 1) / sh + 1, ow = (wd + 2 * pw - dw * (kw - 1) - 1) / sw + 1;
  out_shape = {n, oc, oh, ow};
  const std::vector<double> xv = values(x), wv = values(w), bv = b.defined() ? values(b) : std::vector<double>(oc, 0.0);
  std::vector<double> r(static_cast<size_t>(n * oc * oh * ow));
  if (abs_sum) abs_sum->assign(r.size(), 0.0);
  const int64_t ocg = oc / g;
  for (int64_t in = 0; in < n; ++in)
    for (int64_t o = 0; o < oc; ++o)
      for (int64_t y = 0; y < oh; ++y)
        for (int64_t z = 0; z < ow; ++z) {
          double acc = bv[o], mag = std::fabs(bv[o]);
          const int64_t grp = o / ocg;
          for (int64_t ci = 0; ci < cg; ++ci)
            for (int64_t i = 0; i < kh; ++i)
              for (int64_t j = 0; j < kw; ++j) {
                const int64_t yy = y * sh - ph + i * dh, zz = z * sw - pw + j * dw;
                const double wij = wv[((o * cg + ci) * kh + i) * kw + j];
                if (yy < 0 || yy >= h || zz < 0 || zz >= wd) {
                  if (zeros_times_w) acc += 0.0 * wij;
                  continue;
                }
                const int64_t cin = grp * cg + ci;
                const double xij = xv[((in * c + cin) * h + yy) * wd + zz];
                acc += xij * wij;
                mag += std::fabs(xij * wij);
              }
          const size_t at = static_cast<size_t>(((in * oc + o) * oh + y) * ow + z);
          r[at] = acc;
          if (abs_sum) (*abs_sum)[at] = mag;
        }
  return r;
}

}  // namespace

namespace kt {
// The Conv2d row in the table walk (tests/test_shape.cpp): x of shape s
// (made 4-d with leading 1s; an empty s is [1, 1, 1, 1]) laid out as k, a
// weight of the same layout, two geometries (padding with a full group;
// stride, dilation and depthwise groups), every dtype, NaN and +-inf among
// float values, against the float64 loops. Integer dtypes accumulate
// exactly (matmul's wrapping int64, then wrapped to the dtype), bool is
// refused (DTypeError); float results are within a few units of their dtype's rounding
// of the sum of |x w|.
int check_conv2d_row(DType d, const Shape& s, ViewKind k, uint64_t seed) {
  Shape xs = s;
  while (xs.size() < 4) xs.insert(xs.begin(), 1);
  const int64_t c = xs[1];
  struct Geo { int64_t o, g, kh, kw, sh, sw, ph, pw, dh, dw; };
  const Geo geos[] = {{2, 1, 2, 2, 1, 1, 1, 1, 1, 1}, {2 * c, c, 1, 2, 2, 1, 1, 1, 1, 2}};
  int cases = 0;
  for (const Geo& q : geos) {
    const Tensor x = relayout(random_tensor(xs, d, seed, true), k);
    const Tensor w = relayout(random_tensor({q.o, c / q.g, q.kh, q.kw}, d, seed + 1, true), k);
    Shape want_shape;
    std::vector<double> mag;
    const std::vector<double> want =
        ref_conv2d(x, w, Tensor(), q.sh, q.sw, q.ph, q.pw, q.dh, q.dw, q.g, want_shape, true, &mag);
    Attrs a;
    a.ints = {q.sh, q.sw, q.ph, q.pw, q.dh, q.dw};
    a.axis = q.g;
    const std::string what = "conv2d " + std::string(name(d)) + " x " + shape_str(xs) + " " + view_name(k) +
                             " groups " + std::to_string(q.g);
    ++cases;
    if (d == DType::bool_) {  // the Promote rule refuses bool, as the arithmetic rows do
      CHECK_THROWS_AS(apply(OpId::Conv2d, x, w, a), DTypeError);
      continue;
    }
    const Tensor got = apply(OpId::Conv2d, x, w, a);
    CHECK_MESSAGE(got.dtype() == d, what);
    REQUIRE_MESSAGE(got.shape() == want_shape, what << ": shape " << shape_str(got.shape()));
    const std::vector<double> g = values(got);
    int bad = 0;
    for (size_t i = 0; i < g.size() && bad < 3; ++i) {
      double expect = want[i];
      if (d == DType::bool_) expect = expect != 0 ? 1.0 : 0.0;
      if (!is_floating(d) && d != DType::bool_) {  // the exact sum wrapped to the dtype's width
        const int bits = static_cast<int>(8 * size_of(d));
        uint64_t u = static_cast<uint64_t>(static_cast<int64_t>(expect));
        if (bits < 64) u &= (uint64_t{1} << bits) - 1;
        const bool neg = !is_unsigned(d) && bits < 64 && (u >> (bits - 1)) != 0;
        expect = neg ? static_cast<double>(static_cast<int64_t>(u) - (int64_t{1} << bits))
                     : is_unsigned(d) ? static_cast<double>(u) : static_cast<double>(static_cast<int64_t>(u));
      }
      const double tol = is_floating(d) ? 4 * rtol_for(d) * mag[i] : 0.0;
      if (!close(g[i], expect, 0.0, tol)) {
        ++bad;
        FAIL_CHECK(what << ": element " << i << " got " << g[i] << " want " << expect);
      }
    }
  }
  return cases;
}
}  // namespace kt

TEST_SUITE("einsum and conv") {
  TEST_CASE("einsum: hand-picked subscripts against loops") {
    const std::map<char, int64_t> ext = {{'i', 3}, {'j', 4}, {'k', 2}, {'l', 5}, {'b', 2}};
    check_einsum({"ij", "jk"}, "ik", ext, DType::float32, 1);      // matmul
    check_einsum({"bij", "bjk"}, "bik", ext, DType::float64, 2);   // batched
    check_einsum({"ij"}, "ji", ext, DType::float32, 3);            // transpose
    check_einsum({"ij"}, "", ext, DType::float64, 4);              // total sum
    check_einsum({"i", "j"}, "ij", ext, DType::float32, 5);        // outer
    check_einsum({"ij", "ij"}, "", ext, DType::float64, 6);        // Frobenius inner product
    check_einsum({"ij", "jk", "kl"}, "il", ext, DType::float64, 7); // chain
    check_einsum({"bij", "bkj"}, "bik", ext, DType::int32, 8);     // attention scores, integers exact
    check_einsum({"ij", "jk", "k"}, "i", ext, DType::float32, 9);
    // diagonals and traces
    Tensor a = reshape(arange(9, DType::float32), {3, 3});
    CHECK(einsum("ii->i", {a}).to_vector<float>() == std::vector<float>{0, 4, 8});
    CHECK(einsum("ii", {a}).item<float>() == 12.0f);
    CHECK(einsum("ij->", {a}).item<float>() == 36.0f);
    // implicit output: letters used once, in order
    Tensor x = random_tensor({2, 3}, DType::float32, 10), y = random_tensor({3, 4}, DType::float32, 11);
    CHECK(einsum("ij,jk", {x, y}).shape() == Shape{2, 4});
    CHECK(einsum("ba", {x}).shape() == Shape{3, 2});  // implicit "ab": transpose
    // ellipsis: broadcast leading axes
    Tensor p = random_tensor({5, 2, 3}, DType::float64, 12), q = random_tensor({3, 4}, DType::float64, 13);
    Tensor e = einsum("...ij,jk->...ik", {p, q});
    kt::check_all_close(e, values(matmul(p, q)), 1e-12, 1e-12, "ellipsis matmul");
    Tensor bc = einsum("...j,j->...", {p, random_tensor({3}, DType::float64, 14)});
    CHECK(bc.shape() == Shape{5, 2});
  }

  TEST_CASE("einsum: 30 random subscript strings against loops") {
    std::mt19937_64 rng(2026);
    const std::string alphabet = "abcdef";
    for (int t = 0; t < 30; ++t) {
      std::map<char, int64_t> ext;
      for (char c : alphabet) ext[c] = 1 + static_cast<int64_t>(rng() % 3);
      const int nops = 1 + static_cast<int>(rng() % 3);
      std::vector<std::string> ins;
      std::string used;
      for (int k = 0; k < nops; ++k) {
        std::string term;
        const int rank = static_cast<int>(rng() % 4);
        for (int r = 0; r < rank; ++r) {
          char c = alphabet[rng() % alphabet.size()];
          if (term.find(c) != std::string::npos && rng() % 3 != 0) continue;  // repeats sometimes (diagonals)
          term += c;
          if (used.find(c) == std::string::npos) used += c;
        }
        ins.push_back(term);
      }
      std::string out;
      for (char c : used)
        if (rng() % 2) out += c;
      std::shuffle(out.begin(), out.end(), rng);
      // repeated labels need equal extents: they are (one extent per label)
      check_einsum(ins, out, ext, t % 2 ? DType::float64 : DType::float32, 100 + t);
    }
  }

  TEST_CASE("einsum errors name what is wrong") {
    Tensor a = zeros({2, 3});
    CHECK_THROWS_WITH_AS(einsum("ij,jk->ik", {a}), doctest::Contains("names 2 operands, got 1"), ValueError);
    CHECK_THROWS_WITH_AS(einsum("ijk->i", {a}), doctest::Contains("operand 0 has 2 axes but its subscripts name 3"),
                         ValueError);
    CHECK_THROWS_WITH_AS(einsum("ij->iz", {a}), doctest::Contains("output letter 'z' appears in no input"), ValueError);
    CHECK_THROWS_WITH_AS(einsum("ij->ii", {a}), doctest::Contains("is repeated"), ValueError);
    CHECK_THROWS_WITH_AS(einsum("i3->i", {a}), doctest::Contains("invalid subscript character '3'"), ValueError);
    CHECK_THROWS_WITH_AS(einsum("ij,ij->", {a, zeros({3, 3})}), doctest::Contains("label 'i' has extent 2"), ShapeError);
    CHECK_THROWS_AS(einsum("ii->i", {a}), ShapeError);
  }

  TEST_CASE("conv2d against the direct float64 loops: stride, padding, dilation, groups, bias") {
    struct Case { Shape x, w; int64_t sh, sw, ph, pw, dh, dw, g; bool bias; };
    const std::vector<Case> cases = {
        {{2, 3, 7, 6}, {4, 3, 3, 3}, 1, 1, 0, 0, 1, 1, 1, true},
        {{1, 4, 9, 9}, {6, 2, 3, 2}, 2, 1, 1, 2, 1, 2, 2, false},
        {{2, 2, 5, 8}, {2, 1, 1, 3}, 1, 3, 0, 1, 1, 1, 2, true},
        {{1, 1, 4, 4}, {1, 1, 4, 4}, 1, 1, 0, 0, 1, 1, 1, false},  // kernel = input
        {{3, 4, 6, 5}, {8, 4, 2, 2}, 2, 2, 1, 1, 2, 1, 1, true},
        {{2, 5, 6, 7}, {3, 5, 1, 1}, 1, 1, 0, 0, 1, 1, 1, true},   // 1x1
        {{2, 6, 8, 8}, {6, 1, 3, 3}, 1, 1, 1, 1, 1, 1, 6, false},  // depthwise
        {{1, 2, 3, 3}, {2, 2, 2, 2}, 1, 1, 3, 2, 1, 1, 1, true},   // padding wider than the kernel
        {{2, 3, 11, 9}, {4, 3, 3, 3}, 3, 2, 2, 0, 2, 3, 1, false}, // stride and dilation on both axes
        {{1, 8, 14, 14}, {16, 4, 3, 3}, 2, 2, 1, 1, 1, 1, 2, true},
    };
    uint64_t seed = 40;
    for (const Case& c : cases) {
      for (DType dt : {DType::float32, DType::float64}) {
        Tensor x = random_tensor(c.x, dt, ++seed), w = random_tensor(c.w, dt, ++seed);
        Tensor b = c.bias ? random_tensor({c.w[0]}, dt, ++seed) : Tensor();
        Shape s;
        const std::vector<double> want = ref_conv2d(x, w, b, c.sh, c.sw, c.ph, c.pw, c.dh, c.dw, c.g, s);
        Tensor got = conv2d(x, w, b, {c.sh, c.sw}, {c.ph, c.pw}, {c.dh, c.dw}, c.g);
        CAPTURE(shape_str(c.x));
        REQUIRE(got.shape() == s);
        kt::check_all_close(got, want, dt == DType::float32 ? 1e-5 : 1e-12, dt == DType::float32 ? 1e-4 : 1e-12, "conv2d");
      }
    }
  }

  TEST_CASE("the Conv2d row: every dtype, layout and walk shape against the loops (the table walk's check)") {
    // 13 dtypes x 5 shapes x 4 layouts x 2 geometries
    CHECK(kt::check_data_op(OpId::Conv2d) == 13 * 5 * 4 * 2);
  }

  TEST_CASE("conv2d: empty extents, strided and negative-stride views, mixed dtypes, NaN, compiled") {
    // empty batch, no output channels, no input channels (a sum of nothing: 0)
    CHECK(conv2d(zeros({0, 3, 5, 5}), ones({2, 3, 3, 3})).shape() == Shape{0, 2, 3, 3});
    CHECK(conv2d(ones({2, 3, 5, 5}), ones({0, 3, 3, 3})).shape() == Shape{2, 0, 3, 3});
    Tensor none = conv2d(ones({1, 0, 4, 4}), ones({2, 0, 3, 3}), ones({2}), {1, 1}, {1, 1});
    CHECK(none.shape() == Shape{1, 2, 4, 4});
    CHECK(values(none) == std::vector<double>(32, 1.0));  // the bias alone
    // every layout of x and w, against the loops on the same values
    uint64_t seed = 300;
    for (kt::ViewKind k : {kt::ViewKind::transposed, kt::ViewKind::strided, kt::ViewKind::negative}) {
      Tensor x = kt::relayout(random_tensor({2, 4, 7, 6}, DType::float64, ++seed), k);
      Tensor w = kt::relayout(random_tensor({6, 2, 3, 2}, DType::float64, ++seed), k);
      Shape s;
      const std::vector<double> want = ref_conv2d(x, w, Tensor(), 2, 1, 1, 0, 1, 2, 2, s);
      Tensor got = conv2d(x, w, {}, {2, 1}, {1, 0}, {1, 2}, 2);
      REQUIRE(got.shape() == s);
      kt::check_all_close(got, want, 1e-12, 1e-12, std::string("conv2d ") + kt::view_name(k));
    }
    // int32 x and float32 w promote as numpy does (to float64, numpy.promote_types); integers stay exact
    Tensor xi = random_tensor({1, 2, 4, 4}, DType::int32, 7), wf = random_tensor({3, 2, 2, 2}, DType::float32, 8);
    Tensor mixed = conv2d(xi, wf, {}, {1, 1}, {1, 1});
    CHECK(mixed.dtype() == DType::float64);
    Shape s;
    kt::check_all_close(mixed, ref_conv2d(xi, wf, Tensor(), 1, 1, 1, 1, 1, 1, 1, s), 1e-5, 1e-4, "int32 * float32");
    Tensor ii = conv2d(xi, random_tensor({3, 2, 2, 2}, DType::int32, 9));
    CHECK(ii.dtype() == DType::int32);
    // NaN in x reaches exactly the outputs whose window covers it
    Tensor xn = zeros({1, 1, 5, 5}, DType::float32);
    xn[0][0][1][1] = std::numeric_limits<double>::quiet_NaN();
    const std::vector<double> yn = values(conv2d(xn, ones({1, 1, 3, 3}), {}, {2, 2}));  // 2x2 windows
    CHECK(std::isnan(yn[0]));
    CHECK(yn[1] == 0.0);
    CHECK(yn[2] == 0.0);
    CHECK(yn[3] == 0.0);
    // compiled: stride, dilation, groups and bias give eager's values
    auto f = [](Tensor x, Tensor w, Tensor b) { return conv2d(x, w, b, {2, 1}, {1, 2}, {2, 1}, 2); };
    Tensor x = random_tensor({3, 4, 9, 8}, DType::float32, 11), w = random_tensor({6, 2, 3, 3}, DType::float32, 12),
           b = random_tensor({6}, DType::float32, 13);
    CompiledCallable run = compile(f)(x.layout(), w.layout(), b.layout());
    Tensor got = run(x, w, b).tensor();
    const std::vector<double> want = ref_conv2d(x, w, b, 2, 1, 1, 2, 2, 1, 2, s);
    REQUIRE(got.shape() == s);
    kt::check_all_close(got, want, 1e-5, 1e-4, "compiled conv2d");
    CHECK(values(got) == values(f(x, w, b)));
  }

  TEST_CASE("conv2d paths: bands, taps, groups, dilation, 1x1, stride 2, float64; the same bits at 1 and 2 threads") {
    // Shapes for each CPU path: stride 1 with >= 16 input channels per group
    // (float32: one GEMM per kernel tap on a padded slab, several bands with
    // a shorter last one), stride 2 and few channels (float32: column
    // matrices per band, items split among threads), float64 (the BLAS).
    // Against the float64 loops within the float32 rounding of sum |x w|,
    // compiled bitwise eager, and float32 bitwise the same at 1 and 2
    // threads where the code generator runs (the BLAS, taken by float64 and
    // without the generator, threads its own calls and promises no bits).
    struct Case { Shape x, w; int64_t sh, sw, ph, pw, dh, dw, g; kt::ViewKind view; };
    using V = kt::ViewKind;
    const std::vector<Case> cases = {
        {{2, 16, 9, 10}, {8, 16, 3, 3}, 1, 1, 1, 1, 1, 1, 1, V::contiguous},     // ResNet-style block, small
        {{1, 16, 20, 30}, {16, 16, 3, 3}, 1, 1, 1, 1, 1, 1, 1, V::contiguous},   // bands of 12 and 8 rows
        {{3, 32, 7, 6}, {6, 16, 3, 3}, 1, 1, 1, 1, 1, 1, 2, V::contiguous},      // groups 2
        {{2, 16, 9, 9}, {4, 16, 3, 3}, 1, 1, 2, 2, 2, 2, 1, V::contiguous},      // dilation 2
        {{2, 20, 5, 7}, {12, 20, 1, 1}, 1, 1, 0, 0, 1, 1, 1, V::contiguous},     // 1x1
        {{1, 20, 5, 7}, {12, 20, 1, 1}, 1, 1, 1, 2, 1, 1, 1, V::contiguous},     // 1x1 with padding
        {{2, 16, 13, 17}, {5, 16, 2, 3}, 1, 1, 0, 2, 1, 1, 1, V::contiguous},    // 2x3 kernel, padding on one axis
        {{1, 16, 5, 5}, {3, 16, 3, 3}, 1, 1, 1, 1, 1, 1, 1, V::contiguous},      // batch 1, 25 output columns
        {{2, 16, 8, 9}, {7, 16, 3, 3}, 1, 1, 1, 1, 1, 1, 1, V::transposed},      // x a transposed view
        {{2, 16, 8, 9}, {7, 16, 3, 3}, 1, 1, 1, 0, 1, 1, 1, V::negative},        // negative strides
        {{2, 16, 11, 11}, {8, 16, 3, 3}, 2, 2, 1, 1, 1, 1, 1, V::contiguous},    // stride 2: column matrices
        {{2, 4, 30, 31}, {6, 4, 3, 3}, 1, 1, 1, 1, 1, 1, 1, V::contiguous},      // few channels: column matrices
        {{1, 64, 20, 20}, {64, 64, 3, 3}, 1, 1, 1, 1, 1, 1, 1, V::contiguous},   // 576-long sums
        {{1, 8, 40, 40}, {600, 8, 3, 3}, 2, 2, 1, 1, 1, 1, 1, V::contiguous},   // columns: GEMM in 2 row chunks
    };
    const int before = get_num_threads();
    uint64_t seed = 900;
    for (const Case& c : cases)
      for (DType dt : {DType::float32, DType::float64}) {
        const Tensor x = kt::relayout(random_tensor(c.x, dt, ++seed), c.view), w = random_tensor(c.w, dt, ++seed);
        Shape s;
        std::vector<double> mag;
        const std::vector<double> want =
            ref_conv2d(x, w, Tensor(), c.sh, c.sw, c.ph, c.pw, c.dh, c.dw, c.g, s, false, &mag);
        auto f = [&c](Tensor a, Tensor b) {
          return conv2d(a, b, {}, {c.sh, c.sw}, {c.ph, c.pw}, {c.dh, c.dw}, c.g);
        };
        set_num_threads(1);
        const Tensor one = f(x, w).realize();
        CompiledCallable run = compile(f)(x.layout(), w.layout());
        const Tensor compiled = run(x, w).tensor();
        set_num_threads(2);
        const Tensor two = f(x, w).realize();
        set_num_threads(before);
        CAPTURE(shape_str(c.x));
        CAPTURE(shape_str(c.w));
        CAPTURE(name(dt));
        REQUIRE(one.shape() == s);
        const std::vector<double> g1 = values(one);
        const double eps = dt == DType::float32 ? 0x1p-24 : 0x1p-53;
        const double terms = double(c.w[1] * c.w[2] * c.w[3]);
        int bad = 0;
        for (size_t i = 0; i < g1.size() && bad < 3; ++i)
          if (!(std::fabs(g1[i] - want[i]) <= 2 * terms * eps * mag[i])) {
            ++bad;
            FAIL_CHECK("element " << i << " got " << g1[i] << " want " << want[i]);
          }
        if (dt == DType::float32 && codegen::detect_cpu_target() >= codegen::CpuTarget::avx2)
          CHECK(g1 == values(two));
        CHECK(g1 == values(compiled));
      }
  }

  TEST_CASE("conv1d is conv2d over one row; bad arguments are errors") {
    Tensor x = random_tensor({2, 4, 10}, DType::float64, 1), w = random_tensor({6, 2, 3}, DType::float64, 2);
    Shape s;
    const std::vector<double> want =
        ref_conv2d(unsqueeze(x, 2), unsqueeze(w, 2), Tensor(), 1, 2, 0, 1, 1, 2, 2, s);
    Tensor got = conv1d(x, w, {}, 2, 1, 2, 2);
    CHECK(got.shape() == Shape{s[0], s[1], s[3]});
    kt::check_all_close(got, want, 1e-12, 1e-12, "conv1d");
    CHECK_THROWS_WITH_AS(conv2d(zeros({1, 3, 5, 5}), zeros({2, 2, 3, 3})), doctest::Contains("expects 2 input channels"),
                         ShapeError);
    CHECK_THROWS_AS(conv2d(zeros({1, 4, 5, 5}), zeros({3, 2, 3, 3}), {}, {1, 1}, {0, 0}, {1, 1}, 2), ShapeError);
    CHECK_THROWS_AS(conv2d(zeros({1, 1, 2, 2}), zeros({1, 1, 3, 3})), ShapeError);
    CHECK_THROWS_AS(conv2d(zeros({1, 1, 5, 5}), zeros({1, 1, 3, 3}), {}, {0, 1}), ValueError);
    CHECK_THROWS_AS(conv2d(zeros({1, 1, 5, 5}), zeros({1, 1, 3, 3}), zeros({2})), ShapeError);
    CHECK_THROWS_AS(conv1d(zeros({1, 5}), zeros({1, 1, 3})), ShapeError);
  }

  TEST_CASE("conv2d/conv1d: extents whose arithmetic overflows int64 are ShapeErrors naming the op; huge strides work") {
    constexpr int64_t kMax = std::numeric_limits<int64_t>::max();
    const int64_t big = int64_t{1} << 62;
    Tensor x = random_tensor({1, 1, 4, 4}, DType::float64, 11), w = random_tensor({1, 1, 3, 3}, DType::float64, 12);
    // dilation 2^63 - 1: the dilated kernel spans far more than the 4-row input (was a [1, 1, 6, 2] result)
    CHECK_THROWS_WITH_AS(conv2d(x, w, {}, {1, 1}, {0, 0}, {kMax, 1}),
                         doctest::Contains("conv2d: the kernel's height span (dilation 9223372036854775807 x (kernel 3 - 1) "
                                           "+ 1) exceeds 2^63 - 1"),
                         ShapeError);
    CHECK_THROWS_WITH_AS(conv2d(x, w, {}, {1, 1}, {0, 0}, {1, big}),
                         doctest::Contains("conv2d: the kernel's width span"), ShapeError);
    // padding 2^62: 4 + 2^63 does not fit (was "the padded input is -9223372036854775804x4")
    CHECK_THROWS_WITH_AS(conv2d(x, w, {}, {1, 1}, {big, 0}),
                         doctest::Contains("conv2d: the padded input's height (4 + 2 x 4611686018427387904) exceeds 2^63 - 1"),
                         ShapeError);
    // dilation 2^61: the span 2^62 + 1 fits but exceeds the input
    CHECK_THROWS_WITH_AS(conv2d(x, w, {}, {1, 1}, {0, 0}, {big / 2, 1}),
                         doctest::Contains("conv2d: the kernel spans 4611686018427387905x3 but the padded input is 4x4"),
                         ShapeError);
    // conv1d's errors name conv1d and its own shapes
    Tensor x1 = random_tensor({1, 2, 5}, DType::float64, 13), w1 = random_tensor({3, 2, 3}, DType::float64, 14);
    CHECK_THROWS_WITH_AS(conv1d(x1, w1, {}, 1, 0, kMax),
                         doctest::Contains("conv1d: the kernel's span (dilation 9223372036854775807 x (kernel 3 - 1) + 1) "
                                           "exceeds 2^63 - 1 (x shape [1, 2, 5], weight shape [3, 2, 3])"),
                         ShapeError);
    CHECK_THROWS_WITH_AS(conv1d(x1, w1, {}, 1, big),
                         doctest::Contains("conv1d: the padded input's length (5 + 2 x 4611686018427387904) exceeds 2^63 - 1"),
                         ShapeError);
    CHECK_THROWS_WITH_AS(conv1d(x1, w1, {}, 1, 0, 3),
                         "conv1d: the kernel spans 7 but the padded input is 5 (x shape [1, 2, 5], weight shape [3, 2, 3], "
                         "padding 0, dilation 3)",
                         ShapeError);
    CHECK_THROWS_WITH_AS(conv1d(x1, random_tensor({3, 1, 3}, DType::float64, 15)),
                         doctest::Contains("conv1d: weight shape [3, 1, 3] expects 1 input channels"), ShapeError);
    CHECK_THROWS_WITH_AS(conv1d(x1, w1, {}, 0), "conv1d: stride and dilation must be positive, got stride 0, dilation 1",
                         ValueError);
    CHECK_THROWS_WITH_AS(conv1d(x1, w1, zeros({2}, DType::float64)), "conv1d: bias must have shape [3], got [2]",
                         ShapeError);
    // a stride of 2^63 - 1 is valid: one output per axis, the window at the (padded) origin
    for (DType dt : {DType::float32, DType::float64}) {
      CAPTURE(name(dt));
      Tensor xd = x.to(dt), wd = w.to(dt);
      for (int64_t pad : {0, 1}) {
        Shape s;
        const std::vector<double> want = ref_conv2d(x, w, Tensor(), kMax, kMax, pad, pad, 1, 1, 1, s);
        Tensor got = conv2d(xd, wd, {}, {kMax, kMax}, {pad, pad});
        REQUIRE(got.shape() == Shape{1, 1, 1, 1});
        REQUIRE(s == got.shape());
        kt::check_all_close(got, want, dt == DType::float32 ? 1e-5 : 1e-12, 1e-6, "conv2d stride 2^63 - 1");
      }
      Shape s1;
      const std::vector<double> want1 = ref_conv2d(unsqueeze(x1, 2), unsqueeze(w1, 2), Tensor(), 1, kMax, 0, 1, 1, 1, 1, s1);
      Tensor got1 = conv1d(x1.to(dt), w1.to(dt), {}, kMax, 1);
      CHECK(got1.shape() == Shape{1, 3, 1});
      kt::check_all_close(got1, want1, dt == DType::float32 ? 1e-5 : 1e-12, 1e-6, "conv1d stride 2^63 - 1");
    }
  }

  TEST_CASE("pools: a stride or dilation of 2^63 - 1 gives the window at the origin (was -inf)") {
    constexpr int64_t kMax = std::numeric_limits<int64_t>::max();
    // x[0, 0] = [[0, 1, 2, 3], [4, 5, 6, 7], [8, 9, 10, 11]] - 20 (all negative, so -inf or 0 would show)
    for (DType dt : {DType::float32, DType::float64}) {
      CAPTURE(name(dt));
      Tensor x = (arange(12, dt) - 20.0).reshape({1, 1, 3, 4});
      CHECK(values(max_pool2d(x, {1}, {kMax})) == std::vector<double>{-20});
      CHECK(values(max_pool2d(x, {2}, {kMax})) == std::vector<double>{-15});  // max of rows 0-1, cols 0-1
      CHECK(values(max_pool2d(x, {2}, {kMax}, {1})) == std::vector<double>{-20});  // the window [-1, 0] x [-1, 0]
      CHECK(values(max_pool2d(x, {2, 2}, {1, kMax})) == std::vector<double>{-15, -11});
      // kernel 1, dilation 2^63 - 1: every tap is its own window: x itself
      CHECK(values(max_pool2d(x, {1}, {1}, {0}, {kMax})) == values(x));
      CHECK(values(avg_pool2d(x, {2}, {kMax})) == std::vector<double>{(-20 - 19 - 16 - 15) / 4.0});
      CHECK(values(avg_pool2d(x, {2}, {kMax}, {1})) == std::vector<double>{-20 / 4.0});
      CHECK(values(avg_pool2d(x, {2}, {kMax}, {1}, false)) == std::vector<double>{-20});
    }
  }

  TEST_CASE("max_pool2d and avg_pool2d against window loops") {
    Tensor x = random_tensor({2, 3, 7, 6}, DType::float32, 5);
    const std::vector<double> v = values(x);
    Tensor mx = max_pool2d(x, {3, 2}, {2, 2}, {1, 0});
    Tensor av = avg_pool2d(x, {3, 2}, {2, 2}, {1, 0});
    const int64_t oh = (7 + 2 - 3) / 2 + 1, ow = (6 - 2) / 2 + 1;
    REQUIRE(mx.shape() == Shape{2, 3, oh, ow});
    const std::vector<double> m = values(mx), a = values(av);
    for (int64_t nc = 0; nc < 6; ++nc)
      for (int64_t y = 0; y < oh; ++y)
        for (int64_t z = 0; z < ow; ++z) {
          double best = -INFINITY, sum = 0;
          for (int64_t i = 0; i < 3; ++i)
            for (int64_t j = 0; j < 2; ++j) {
              const int64_t yy = y * 2 - 1 + i, zz = z * 2 + j;
              if (yy < 0 || yy >= 7) continue;  // padding: -inf for max, 0 counted for avg
              best = std::max(best, v[(nc * 7 + yy) * 6 + zz]);
              sum += v[(nc * 7 + yy) * 6 + zz];
            }
          CHECK(m[(nc * oh + y) * ow + z] == best);
          CHECK(a[(nc * oh + y) * ow + z] == doctest::Approx(sum / 6).epsilon(1e-6));
        }
    CHECK(max_pool2d(tensor({1, 5, 3, 2}).reshape({1, 1, 2, 2}), {2, 2}).item<int32_t>() == 5);
    CHECK_THROWS_AS(max_pool2d(zeros({2, 2}), {2, 2}), ShapeError);
  }

  TEST_CASE("einsum, conv2d and pooling compile to the eager bits") {
    auto f = [](Tensor x, Tensor w, Tensor q, Tensor k) {
      return std::make_tuple(conv2d(x, w, {}, {1, 1}, {1, 1}), max_pool2d(x, {2, 2}),
                             einsum("bhqd,bhkd->bhqk", {q, k}));
    };
    Tensor x = random_tensor({2, 3, 6, 6}, DType::float32, 1), w = random_tensor({4, 3, 3, 3}, DType::float32, 2);
    Tensor q = random_tensor({2, 2, 5, 4}, DType::float32, 3), k = random_tensor({2, 2, 6, 4}, DType::float32, 4);
    auto want = f(x, w, q, k);
    auto L = [](const Tensor& t) { return TensorLayout(t.dtype(), t.shape()); };
    CompiledCallable run = compile(f)(L(x), L(w), L(q), L(k));
    const std::vector<Tensor> got = run(x, w, q, k).leaves;
    REQUIRE(got.size() == 3);
    kt::check_all_close(got[0], values(std::get<0>(want)), 1e-6, 1e-6, "compiled conv2d");
    CHECK(values(got[1]) == values(std::get<1>(want)));
    kt::check_all_close(got[2], values(std::get<2>(want)), 1e-6, 1e-6, "compiled einsum");
  }
}
