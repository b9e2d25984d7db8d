// kiln tests: numpy indexing (tensor/indexing.h), the method forms of the op
// table's rows (tensor/method_rows.h), the operators %, &, |, ^, !, ~ and the
// scalar overloads, and focused checks of scatter/scatter_add/index_add (the
// table walk in test_shape.cpp checks those rows on every dtype and layout).
// Indexing results are checked against brute-force loops over the result's
// indices; literals from numpy or PyTorch are labelled so.
#include <functional>

#include "same_bits.h"
#include "test_util.h"

namespace {
using namespace kiln;
using kt::Index;
using kt::ravel;
using kt::unravel;

// 0, 1, 2, ... as float64: each element's value is its row-major position.
Tensor iota(const Shape& s) {
  std::vector<double> v(checked_numel(s));
  for (size_t i = 0; i < v.size(); ++i) v[i] = static_cast<double>(i);
  return Tensor::from_vector(v, s);
}
Tensor i64(std::vector<int64_t> v, Shape s = {}) { return Tensor::from_vector(v, s); }
Tensor f32(std::vector<float> v, Shape s = {}) { return Tensor::from_vector(v, s); }
Tensor b8(std::vector<bool> v, Shape s) {
  std::vector<uint8_t> u(v.begin(), v.end());
  return Tensor::from_data(u.data(), DType::bool_, u.size(), s);
}


// Checks got (of shape `shape`) element by element: got[o] == x[src(o)],
// with x = iota(xs) (so the value is the source's row-major position).
void expect_gathered(const Tensor& got, const Shape& shape, const Shape& xs, const std::function<Index(const Index&)>& src,
                     const std::string& what) {
  REQUIRE_MESSAGE(got.shape() == shape, what << ": shape " << shape_str(got.shape()) << ", want " << shape_str(shape));
  const std::vector<double> g = got.to_vector<double>();
  int bad = 0;
  for (int64_t j = 0; j < checked_numel(shape) && bad < 5; ++j) {
    const Index o = unravel(j, shape);
    const double want = static_cast<double>(ravel(src(o), xs));
    if (g[j] != want) {
      ++bad;
      FAIL_CHECK(what << ": element " << shape_str(o) << " got " << g[j] << " want " << want);
    }
  }
}

const Shape kXs = {2, 3, 4, 5};
}  // namespace

TEST_SUITE("indexing") {
  TEST_CASE("x[i]: a view of entry i along axis 0, negative from the end, IndexError naming axis and size") {
    Tensor x = iota(kXs);
    expect_gathered(x[1], {3, 4, 5}, kXs, [](const Index& o) { return Index{1, o[0], o[1], o[2]}; }, "x[1]");
    expect_gathered(x[-2], {3, 4, 5}, kXs, [](const Index& o) { return Index{0, o[0], o[1], o[2]}; }, "x[-2]");
    expect_gathered(x[1][2][3], {5}, kXs, [](const Index& o) { return Index{1, 2, 3, o[0]}; }, "x[1][2][3]");
    CHECK(x[1].buffer() == x.buffer());
    CHECK_THROWS_WITH_AS(x[2],
                         "index: index 2 is out of range for axis 0 with extent 2 (expected -2 <= index < 2)", IndexError);
    CHECK_THROWS_WITH_AS(x[-3],
                         "index: index -3 is out of range for axis 0 with extent 2 (expected -2 <= index < 2)", IndexError);
    CHECK_THROWS_AS(x[0][0][0][0][0], IndexError);  // 0-d
  }

  TEST_CASE("basic indexing: slices (negative steps), integers, None and Ellipsis give views") {
    Tensor x = iota(kXs);
    struct Case {
      std::vector<TensorIndex> idx;
      Shape shape;
      std::function<Index(const Index&)> src;
      const char* what;
    };
    const std::vector<Case> cases = {
        {{Slice(1, None, 2), 0, None, Ellipsis}, {1, 1, 4, 5}, [](const Index& o) { return Index{1 + 2 * o[0], 0, o[2], o[3]}; },
         "x[1::2, 0, None, ...]"},
        {{Ellipsis, Slice(None, None, -2)}, {2, 3, 4, 3}, [](const Index& o) { return Index{o[0], o[1], o[2], 4 - 2 * o[3]}; },
         "x[..., ::-2]"},
        {{Slice(-1, None, -1), Slice(2, 0, -1)}, {2, 2, 4, 5},
         [](const Index& o) { return Index{1 - o[0], 2 - o[1], o[2], o[3]}; }, "x[-1::-1, 2:0:-1]"},
        {{0, 1, 2, 3}, {}, [](const Index&) { return Index{0, 1, 2, 3}; }, "x[0, 1, 2, 3]"},
        {{-1, Ellipsis, -1}, {3, 4}, [](const Index& o) { return Index{1, o[0], o[1], 4}; }, "x[-1, ..., -1]"},
        {{None, Slice(), None, 1}, {1, 2, 1, 4, 5}, [](const Index& o) { return Index{o[1], 1, o[3], o[4]}; },
         "x[None, :, None, 1]"},
        {{Slice(1, 100), Slice(-100, 2), Slice(3, 1)}, {1, 2, 0, 5}, [](const Index& o) { return o; },
         "x[1:100, -100:2, 3:1] (clamped, empty)"},
        {{}, kXs, [](const Index& o) { return o; }, "x[()]"},
    };
    for (const Case& c : cases) {
      IndexedTensor v = x.index(c.idx);
      expect_gathered(v, c.shape, kXs, c.src, c.what);
      CHECK_MESSAGE(v.buffer() == x.buffer(), c.what << ": not a view");
    }
    // A view sees writes into its base.
    Tensor y = iota(kXs);
    Tensor v = y.index({Slice(), 1, Slice(None, None, -1)});
    y.data<double>()[ravel({1, 1, 3, 2}, kXs)] = -7.0;
    CHECK(v.to_vector<double>()[ravel({1, 0, 2}, {2, 4, 5})] == -7.0);
  }

  TEST_CASE("basic indexing errors") {
    Tensor x = iota(kXs);
    CHECK_THROWS_WITH_AS(x.index({0, 0, 0, 0, 0}), "index: too many indices for a tensor of dimension 4 (got 5)", IndexError);
    CHECK_THROWS_AS(x.index({Ellipsis, 0, Ellipsis}), IndexError);
    CHECK_THROWS_WITH_AS(x.index({Slice(), 3}),
                         "index: index 3 is out of range for axis 1 with extent 3 (expected -3 <= index < 3)", IndexError);
    CHECK_THROWS_WITH_AS(x.index({Ellipsis, -6}),
                         "index: index -6 is out of range for axis 3 with extent 5 (expected -5 <= index < 5)", IndexError);
    CHECK_THROWS_AS(x.index({Slice(0, 2, 0)}), ValueError);
  }

  TEST_CASE("advanced indexing with integer tensors (numpy's placement rules) gives copies") {
    Tensor x = iota(kXs);
    const std::vector<int64_t> a = {0, 2, 1, -1};  // shape [2, 2]
    auto norm = [](int64_t v, int64_t n) { return v < 0 ? v + n : v; };
    {
      Tensor r = x.index({Slice(), i64(a, {2, 2})});
      expect_gathered(r, {2, 2, 2, 4, 5}, kXs,
                      [&](const Index& o) { return Index{o[0], norm(a[o[1] * 2 + o[2]], 3), o[3], o[4]}; }, "x[:, a]");
      CHECK_FALSE(r.buffer() == x.buffer());
    }
    {  // adjacent index tensors broadcast ([3] with [1]) and stay in place
      const std::vector<int64_t> i1 = {2, 0, 1}, i2 = {-1};
      Tensor r = x.index({Slice(), i64(i1, {3}), i64(i2, {1})});
      expect_gathered(r, {2, 3, 5}, kXs, [&](const Index& o) { return Index{o[0], i1[o[1]], 3, o[2]}; },
                      "x[:, [2, 0, 1], [-1]]");
    }
    {  // separated by a slice: the broadcast axes go first
      const std::vector<int64_t> i1 = {1, 0}, i2 = {3, -1};
      Tensor r = x.index({i64(i1, {2}), Slice(), i64(i2, {2})});
      expect_gathered(r, {2, 3, 5}, kXs, [&](const Index& o) { return Index{i1[o[0]], o[1], norm(i2[o[0]], 4), o[2]}; },
                      "x[[1, 0], :, [3, -1]]");
    }
    {  // an integer among index tensors is a 0-d index tensor: x[0, :, [1, 2]] has shape (2, 3, 5) in numpy
      Tensor r = x.index({0, Slice(), i64({1, 2}, {2})});
      expect_gathered(r, {2, 3, 5}, kXs, [&](const Index& o) { return Index{0, o[1], 1 + o[0], o[2]}; },
                      "x[0, :, [1, 2]]");
      // ... and next to one it keeps the place: x[:, 1, [0, 3]] has shape (2, 2, 5)
      Tensor q = x.index({Slice(), 1, i64({0, 3}, {2})});
      expect_gathered(q, {2, 2, 5}, kXs, [&](const Index& o) { return Index{o[0], 1, o[1] * 3, o[2]}; },
                      "x[:, 1, [0, 3]]");
    }
    {  // int32 indices, with None and Ellipsis around
      std::vector<int32_t> iv = {4, 0, 4};
      Tensor r = x.index({None, Ellipsis, Tensor::from_vector(iv)});
      expect_gathered(r, {1, 2, 3, 4, 3}, kXs, [&](const Index& o) { return Index{o[1], o[2], o[3], iv[o[4]]}; },
                      "x[None, ..., int32 [4, 0, 4]]");
    }
    {  // a 2-d index with a 0-d one, four axes indexed
      Tensor r = x.index({i64({1, 0, 1}, {3, 1}), i64({2}, {}), i64({0, 1}, {1, 2}), 4});
      expect_gathered(r, {3, 2}, kXs, [&](const Index& o) { return Index{o[0] == 1 ? 0 : 1, 2, o[1], 4}; },
                      "x[[[1], [0], [1]], 2, [[0, 1]], 4]");
    }
    {  // empty index
      Tensor r = x.index({Slice(), i64({}, {0})});
      CHECK(r.shape() == Shape{2, 0, 4, 5});
    }
  }

  TEST_CASE("advanced indexing with boolean masks") {
    Tensor x = iota(kXs);
    const std::vector<bool> m = {true, false, true, false, false, true};  // [2, 3]
    std::vector<Index> on;  // the true positions in row-major order
    for (int64_t i = 0; i < 6; ++i)
      if (m[i]) on.push_back({i / 3, i % 3});
    Tensor r = x.index({b8(m, {2, 3})});
    expect_gathered(r, {3, 4, 5}, kXs, [&](const Index& o) { return Index{on[o[0]][0], on[o[0]][1], o[1], o[2]}; },
                    "x[mask23]");
    // a mask over the middle axes, with a slice before
    std::vector<bool> m2(12, false);
    m2[1] = m2[6] = m2[11] = true;
    Tensor q = x.index({Slice(None, None, -1), b8(m2, {3, 4})});
    expect_gathered(q, {2, 3, 5}, kXs,
                    [&](const Index& o) {
                      const int64_t k = o[1] == 0 ? 1 : o[1] == 1 ? 6 : 11;
                      return Index{1 - o[0], k / 4, k % 4, o[2]};
                    },
                    "x[::-1, mask34]");
    // all false
    CHECK(x.index({b8(std::vector<bool>(6, false), {2, 3})}).shape() == Shape{0, 4, 5});
    CHECK_THROWS_WITH_AS(
        x.index({Slice(), b8({true, false}, {2})}),
        "index: boolean index did not match the indexed tensor along axis 1; size of axis is 3 but size of corresponding "
        "boolean axis is 2",
        IndexError);
  }

  TEST_CASE("advanced indexing errors") {
    Tensor x = iota(kXs);
    CHECK_THROWS_WITH_AS(x.index({Slice(), i64({0, 3})}),
                         "index: index 3 is out of range for axis 1 with extent 3 (expected -3 <= index < 3)", IndexError);
    CHECK_THROWS_WITH_AS(x.index({i64({-3})}),
                         "index: index -3 is out of range for axis 0 with extent 2 (expected -2 <= index < 2)", IndexError);
    CHECK_THROWS_AS(x.index({f32({0.0f})}), IndexError);
    CHECK_THROWS_AS(x.index({i64({0, 1}), i64({0, 1, 2})}), ShapeError);
    CHECK_THROWS_AS(x.index({Tensor()}), ValueError);
  }

  TEST_CASE("writes through basic indices land in x (a view of x writes through to its base)") {
    Tensor x = iota(kXs);
    Tensor v = Tensor::from_vector(std::vector<double>{-1, -2, -3, -4, -5});  // broadcasts along the last axis
    x.index({Slice(), 1, Slice(None, None, 2)}).assign(v);
    const std::vector<double> g = x.to_vector<double>();
    for (int64_t j = 0; j < checked_numel(kXs); ++j) {
      const Index o = unravel(j, kXs);
      const double want = o[1] == 1 && o[2] % 2 == 0 ? -1.0 - static_cast<double>(o[3]) : static_cast<double>(j);
      CHECK_MESSAGE(g[j] == want, "element " << shape_str(o));
    }
    x.index_put_({0, Ellipsis, 4}, 9.5);
    for (int64_t b = 0; b < 3; ++b)
      for (int64_t c = 0; c < 4; ++c) CHECK(x.to_vector<double>()[ravel({0, b, c, 4}, kXs)] == 9.5);
    Tensor base = iota({3, 4});
    Tensor view = base.index({Slice(1, None)});  // rows 1, 2
    view.index({Slice(), -1}).assign(0.0);
    CHECK(base.to_vector<double>() == std::vector<double>{0, 1, 2, 3, 4, 5, 6, 0, 8, 9, 10, 0});
    CHECK_THROWS_AS(base.index({0}).assign(Tensor::from_vector(std::vector<double>{1, 2})), ShapeError);
    Tensor ints = zeros({3}, DType::int32);
    CHECK_THROWS_AS(ints.index({Slice()}).assign(f32({1.5f})), DTypeError);
  }

  TEST_CASE("writes through advanced indices: integer tensors, masks, repeated positions (last wins)") {
    {
      Tensor x = iota({4, 3});
      // rows 2, 0, 2: the repeated row 2 keeps the last value written (numpy)
      Tensor vals = Tensor::from_vector(std::vector<double>{10, 11, 12, 20, 21, 22, 30, 31, 32}, {3, 3});
      x.index_put_({i64({2, 0, -2})}, vals);
      CHECK(x.to_vector<double>() == std::vector<double>{20, 21, 22, 3, 4, 5, 30, 31, 32, 9, 10, 11});
    }
    {  // x[[0, 3], [2, 0]] = [7, 8]
      Tensor x = iota({4, 3});
      x.index({i64({0, 3}), i64({2, 0})}).assign(Tensor::from_vector(std::vector<double>{7, 8}));
      CHECK(x.to_vector<double>() == std::vector<double>{0, 1, 7, 3, 4, 5, 6, 7, 8, 8, 10, 11});
    }
    {  // x[x > 6] = 0 (bool mask), then through a view of x with a mask and a scalar
      Tensor x = iota({3, 4});
      x.index_put_({x > 6.0}, 0.0);
      CHECK(x.to_vector<double>() == std::vector<double>{0, 1, 2, 3, 4, 5, 6, 0, 0, 0, 0, 0});
      Tensor col = x.index({Slice(), Slice(1, 3)});
      col.index_put_({b8({true, false, true, true, false, false}, {3, 2})}, -1.0);
      CHECK(x.to_vector<double>() == std::vector<double>{0, -1, 2, 3, 4, -1, -1, 0, 0, 0, 0, 0});
    }
    {  // the value broadcasts to the indexed shape [2, 2, 4, 5]; brute force over x
      Tensor x = iota(kXs);
      Tensor v = Tensor::from_vector(std::vector<double>{-1, -2, -3, -4, -5});
      x.index({Slice(), i64({2, 0})}).assign(v);
      const std::vector<double> g = x.to_vector<double>();
      for (int64_t j = 0; j < checked_numel(kXs); ++j) {
        const Index o = unravel(j, kXs);
        const double want = o[1] != 1 ? -1.0 - static_cast<double>(o[3]) : static_cast<double>(j);
        CHECK_MESSAGE(g[j] == want, "element " << shape_str(o));
      }
    }
    Tensor x = iota({4, 3});
    CHECK_THROWS_AS(x.index_put_({i64({0, 1})}, Tensor::from_vector(std::vector<double>{1, 2})), ShapeError);
    CHECK_THROWS_AS(zeros({3}, DType::int64).index_put_({i64({0})}, f32({1.5f})), DTypeError);
    CHECK_THROWS_AS(x.index_put_({i64({4})}, 1.0), IndexError);
  }

  TEST_CASE("indexing traces and compiles: same values as eager") {
    Tensor x = iota({4, 3});
    Tensor idx = i64({3, 0, 3}, {3});
    auto f = [](Tensor a, Tensor i) { return a.index({Slice(None, None, -1), None, i}) * 2.0; };
    CompiledCallable run = compile(f)(TensorLayout(DType::float64, {4, 3}), TensorLayout(DType::int64, {3}));
    Tensor got = run(x, i64({2, 0, -1}, {3})).tensor();
    expect_gathered(got * 0.5, {4, 1, 3}, {4, 3},
                    [](const Index& o) { return Index{3 - o[0], o[2] == 0 ? 2 : o[2] == 1 ? 0 : 2}; },
                    "compiled x[::-1, None, i]");
    // a write with advanced indices into a traced tensor is recorded (a scatter)
    auto g = [](Tensor a, Tensor i) {
      Tensor y = a * 1.0;  // a traced value (clone() realizes, which a graph cannot)
      y.index_put_({i}, 5.0);
      return y;
    };
    CompiledCallable run_g = compile(g)(TensorLayout(DType::float64, {4, 3}), TensorLayout(DType::int64, {3}));
    CHECK(run_g(x, idx).tensor().to_vector<double>() ==
          std::vector<double>{5, 5, 5, 3, 4, 5, 6, 7, 8, 5, 5, 5});
    // through a view of a traced tensor: lands in the base, as eagerly (tensor/mutation.h)
    auto h = [](Tensor a) {
      Tensor y = a * 1.0;
      y.index({Slice(1, None)}).index_put_({Tensor::from_vector(std::vector<int64_t>{0})}, 1.0);
      return y;
    };
    CompiledCallable run_h = compile(h)(TensorLayout(DType::float64, {4, 3}));
    CHECK(run_h(x).tensor().to_vector<double>() == h(x).to_vector<double>());
    CHECK(run_h(x).tensor().to_vector<double>() == std::vector<double>{0, 1, 2, 1, 1, 1, 6, 7, 8, 9, 10, 11});
  }

  TEST_CASE("x[i] = v and x.index({...}) = v write into x; named tensors rebind (brute force over x)") {
    const Shape xs{4, 3, 5};
    // want(o, old): the value element o of x should hold after the writes
    auto expect = [&](const Tensor& x, const std::function<double(const Index&, double)>& want, const std::string& what) {
      const std::vector<double> g = x.to_vector<double>();
      int bad = 0;
      for (int64_t j = 0; j < checked_numel(xs) && bad < 5; ++j) {
        const Index o = unravel(j, xs);
        const double w = want(o, static_cast<double>(j));
        if (g[j] != w) {
          ++bad;
          FAIL_CHECK(what << ": element " << shape_str(o) << " got " << g[j] << " want " << w);
        }
      }
    };
    {
      Tensor x = iota(xs);
      x[1] = 7.0;                                                              // scalar
      x[-1] = Tensor::from_vector(std::vector<double>{-1, -2, -3, -4, -5});     // broadcast row
      x[2][1] = Tensor::from_vector(std::vector<double>{9, 9, 9, 9, 9});        // chained
      x[0][2][4] = x[3][0][0];                                                 // an element from another
      expect(x, [](const Index& o, double old) {
        if (o[0] == 1) return 7.0;
        if (o[0] == 3) return -1.0 - static_cast<double>(o[2]);
        if (o[0] == 2 && o[1] == 1) return 9.0;
        if (o[0] == 0 && o[1] == 2 && o[2] == 4) return -1.0;
        return old;
      }, "x[i] = v");
    }
    {
      Tensor x = iota(xs);
      x.index({Slice(), 1, Slice(None, None, 2)}) = 0.5;                       // basic: a view
      x.index({i64({3, 0}), Slice(), 0}) = Tensor::from_vector(std::vector<double>{10, 11, 12});  // advanced
      x.index({x > 50.0}) = -1.0;                                              // mask
      expect(x, [](const Index& o, double old) {
        double v = o[1] == 1 && o[2] % 2 == 0 ? 0.5 : old;
        if ((o[0] == 3 || o[0] == 0) && o[2] == 0) v = 10.0 + static_cast<double>(o[1]);
        return v > 50.0 ? -1.0 : v;
      }, "x.index({...}) = v");
    }
    {  // x[...] op= v writes into x (numpy's and PyTorch's x[mask] += 1); a repeated position is updated once
      Tensor x = iota(xs);
      x.index({x < 10.0}) += 100.0;
      x.index({i64({1, 1, 2})}) *= 2.0;
      x[3] -= 1.0;
      expect(x, [](const Index& o, double old) {
        double v = old < 10.0 ? old + 100.0 : old;
        if (o[0] == 1 || o[0] == 2) v *= 2.0;
        if (o[0] == 3) v -= 1.0;
        return v;
      }, "x[...] op= v");
    }
    {  // in-place methods act on the result, as in numpy, PyTorch and LibTorch:
       // through basic indices (a view) into x, after advanced ones on the copy only
      Tensor x = iota(xs);
      x.index({Slice(0, 1)}).add_(1000.0);
      IndexedTensor sel = x.index({x > 40.0});
      sel.add_(1.0);
      sel.fill_(0.0);
      x.index({i64({2})}).copy_(zeros({1, 3, 5}, DType::float64));
      CHECK((sel == 0.0).all().item<bool>());
      IndexedTensor named = x.index({i64({3})});  // numpy: t = x[[3]]; t += 1 changes t only
      named += 1.0;
      CHECK(named.to_vector<double>()[0] == 46.0);
      expect(x, [](const Index& o, double old) { return o[0] == 0 ? old + 1000.0 : old; }, "methods on x[...]");
    }
    {  // named tensors rebind: nothing is written
      Tensor x = iota(xs), y = zeros(xs, DType::float64);
      Tensor a = x;
      a = y;
      CHECK(a.is_same(y));
      IndexedTensor r = x[0];
      r = y;  // r now stands for y
      CHECK(r.is_same(y));
      expect(x, [](const Index&, double old) { return old; }, "rebinding");
      // a temporary that is not an index result: assignment copies into it (LibTorch's rule)
      x.transpose(0, 2) = zeros({5, 3, 4}, DType::float64);
      slice(x, 0, 1, 2) = 3.0;
      expect(x, [](const Index& o, double) { return o[0] == 1 ? 3.0 : 0.0; }, "x.transpose() = v");
    }
    // errors: the write rules (shape, same_kind casting, range)
    Tensor x = iota(xs);
    CHECK_THROWS_AS(x[0] = Tensor::from_vector(std::vector<double>{1, 2}), ShapeError);
    Tensor ints = zeros({3}, DType::int32);
    CHECK_THROWS_AS(ints[1] = 1.5, DTypeError);
    CHECK_THROWS_AS(x.index({i64({7})}) = 1.0, IndexError);
    CHECK_THROWS_AS(x.index({x > 1.0}) += Tensor::from_vector(std::vector<double>{1, 2}), ShapeError);
  }

  TEST_CASE("writes through indices compile: basic and advanced, same values as eager") {
    auto f = [](Tensor a, Tensor i) {
      Tensor y = a * 1.0;
      y[0] = 5.0;
      y.index({Slice(), 1}) = y.index({Slice(), 2}) * 2.0;
      y.index({i}) += 1.0;
      y.index({Slice(1, None), i}) = -3.0;
      return y;
    };
    Tensor x = iota({4, 3}), idx = i64({2, -1});
    CompiledCallable run = compile(f)(TensorLayout(DType::float64, {4, 3}), TensorLayout(DType::int64, {2}));
    const std::vector<double> got = run(x, idx).tensor().to_vector<double>();
    CHECK(got == f(x, idx).to_vector<double>());
    // by hand: row 0 = 5; column 1 = 2 * column 2; rows 2, 3 += 1; rows 1..3, columns 2, 2 = -3
    std::vector<double> want(12);
    for (int64_t r = 0; r < 4; ++r)
      for (int64_t c = 0; c < 3; ++c) {
        double v = r == 0 ? 5.0 : static_cast<double>(3 * r + c);
        if (c == 1) v = 2.0 * (r == 0 ? 5.0 : static_cast<double>(3 * r + 2));
        if (r >= 2) v += 1.0;
        if (r >= 1 && c == 2) v = -3.0;
        want[3 * r + c] = v;
      }
    CHECK(got == want);
    // an index out of range in the compiled function names the axis it indexes (here axis 1)
    auto g = [](Tensor a, Tensor i) { return a.index({Slice(), i}); };
    CompiledCallable run_g = compile(g)(TensorLayout(DType::float64, {4, 3}), TensorLayout(DType::int64, {2}));
    CHECK_THROWS_WITH_AS(run_g(x, i64({0, 3})), doctest::Contains("index 3 is out of range for axis 1 with extent 3"),
                         IndexError);
    CHECK_THROWS_WITH_AS(x.index({Slice(), i64({0, 3})}),
                         "index: index 3 is out of range for axis 1 with extent 3 (expected -3 <= index < 3)", IndexError);
    // two index tensors: each checked against its own axis (a flat position in range is no excuse)
    auto h = [](Tensor a, Tensor i, Tensor j) { return a.index({i, j}); };
    CompiledCallable run_h = compile(h)(TensorLayout(DType::float64, {4, 3}), TensorLayout(DType::int64, {1}),
                                        TensorLayout(DType::int64, {1}));
    CHECK(run_h(x, i64({1}), i64({-1})).tensor().to_vector<double>() == std::vector<double>{5});
    CHECK_THROWS_WITH_AS(run_h(x, i64({0}), i64({3})), doctest::Contains("axis 1 with extent 3"), IndexError);
    CHECK_THROWS_WITH_AS(run_h(x, i64({-5}), i64({0})), doctest::Contains("axis 0 with extent 4"), IndexError);
  }

  TEST_CASE("jit takes and returns IndexedTensor (x[i], x.index({...})) as tensors") {
    Tensor x = iota({4, 3});
    auto rows = jit([](Tensor a) { return a[1]; });                         // returns an IndexedTensor
    CHECK(rows(x).tensor().to_vector<double>() == std::vector<double>{3, 4, 5});
    CHECK(rows(x.index({Slice(2, None)})).tensor().to_vector<double>() == std::vector<double>{9, 10, 11});  // takes one
    auto both = jit([](Tensor a) { return std::make_tuple(a.index({Slice(None, None, -1), 0}), a * 2.0); });
    CHECK(both(x).leaves[0].to_vector<double>() == std::vector<double>{9, 6, 3, 0});
    CHECK(both(x.index({Slice(0, 2)})).leaves[0].to_vector<double>() == std::vector<double>{3, 0});
    // a parameter declared IndexedTensor is its own base: writes land in it
    auto own = jit([](IndexedTensor a) {
      Tensor y = a * 1.0;
      y[0] = -1.0;
      return y;
    });
    CHECK(own(x.index({Slice(1, 3)})).tensor().to_vector<double>() == std::vector<double>{-1, -1, -1, 6, 7, 8});
    CHECK(x.to_vector<double>()[3] == 3.0);  // the argument itself is not written
  }

  TEST_CASE("the README's indexing example runs and gives numpy's shapes") {
    Tensor x = arange(120).reshape({2, 3, 4, 5}).to(DType::float32);
    CHECK(x[1].shape() == Shape{3, 4, 5});
    CHECK(x.index({Slice(1, None, 2), 0, None, Ellipsis}).shape() == Shape{1, 1, 4, 5});
    CHECK(x.index({Ellipsis, Slice(None, None, -1)}).shape() == Shape{2, 3, 4, 5});
    CHECK(x.index({Slice(), tensor({int64_t(2), int64_t(0)})}).shape() == Shape{2, 2, 4, 5});
    // row r of the 24 last-axis rows sums to 25 r + 10, > 200 for r >= 8: 16 rows
    CHECK(x.index({x.sum({3}) > 200.0f}).shape() == Shape{16, 5});
    x[0] = 1.0;
    CHECK((x[0] == 1.0f).all().item<bool>());
    x.index({Slice(), 1}) = zeros({5});
    CHECK(x.index({Slice(), 1}).sum().item<double>() == 0.0);
    x.index({x < 3.0f}) = -1.0;
    CHECK((x == -1.0f).sum().item<int64_t>() == 60 + 20);  // all of x[0] (ones and zeros) and x[1, 1]
    x.index({Slice(), tensor({int64_t(2), int64_t(0)})}) += 10.0f;
    CHECK((x == -1.0f).sum().item<int64_t>() == 40);  // x[:, 1] is left
    CHECK((x.index({0, Slice(None, None, 2)}) == 9.0f).all().item<bool>());
    CHECK(x[1][2][0][0].item<double>() == 60.0 + 40.0 + 10.0);
  }
}

// ---- method forms -------------------------------------------------------------------------
namespace {
using UnaryMethod = Tensor (Tensor::*)() const;
using BinaryMethod = Tensor (Tensor::*)(const Tensor&) const;
using ScalarMethod = Tensor (Tensor::*)(Scalar) const;
struct MethodRow {
  OpId id;
  UnaryMethod unary = nullptr;
  BinaryMethod binary = nullptr;
  ScalarMethod scalar = nullptr;
};
// Every unary and binary row, built from ops.def as the library's methods are.
const std::vector<MethodRow>& method_rows() {
  static const std::vector<MethodRow> rows = {
#define KT_U(id, name) {OpId::id, &Tensor::name, nullptr, nullptr},
#define KT_B(id, name) \
  {OpId::id, nullptr, static_cast<BinaryMethod>(&Tensor::name), static_cast<ScalarMethod>(&Tensor::name)},
#define KILN_OP(id, name, arity, cat, rule) KILN_FOR_ELEMENTWISE_ROW(KT_U, KT_B, id, name, cat, rule)
#include "../tensor/ops.def"
#undef KILN_OP
#undef KT_U
#undef KT_B
  };
  return rows;
}
// The outcome of f: its value or the type of error it threw.
struct Outcome {
  Tensor value;
  std::string error;
};
template <class F>
Outcome outcome(F&& f) {
  try {
    return {f(), ""};
  } catch (const Error& e) {
    return {Tensor(), typeid(e).name()};
  }
}
void check_same(const Outcome& a, const Outcome& b, const std::string& what) {
  CHECK_MESSAGE(a.error == b.error, what << ": error '" << a.error << "' vs '" << b.error << "'");
  if (a.error.empty() && b.error.empty()) CHECK_MESSAGE(kt::same_bits(a.value, b.value), what << ": values differ");
}
}  // namespace

TEST_SUITE("methods") {
  TEST_CASE("every unary and binary row has a method equal bit for bit to the free function") {
    int checked = 0;
    for (const MethodRow& r : method_rows()) {
      CAPTURE(op_name(r.id));
      for (DType d : {DType::float32, DType::int32, DType::bool_}) {
        Tensor x = kt::random_tensor({3, 4}, d, 7, true);
        Tensor y = kt::random_tensor({4}, d, 8, true);
        if (r.unary) {
          check_same(outcome([&] { return (x.*r.unary)(); }), outcome([&] { return apply(r.id, x); }), "unary");
        } else {
          check_same(outcome([&] { return (x.*r.binary)(y); }), outcome([&] { return apply(r.id, x, y); }), "binary");
          check_same(outcome([&] { return (x.*r.scalar)(Scalar(3)); }),
                     outcome([&] { return (x.*r.binary)(scalar_tensor(Scalar(3), d)); }), "scalar");
        }
        ++checked;
      }
    }
    CHECK(checked > 150);
  }

  TEST_CASE("reductions, scans, norms, views and data rows as methods: same results and errors") {
    Tensor x = kt::random_tensor({3, 4}, DType::float32, 3);
    Tensor w = kt::random_tensor({4, 2}, DType::float32, 4);
    Tensor idx = i64({2, 0, 1, 1, 0, 2, 2, 1}, {2, 4});
    auto same = [](const Tensor& a, const Tensor& b, const char* what) {
      CHECK_MESSAGE(kt::same_bits(a, b), what);
    };
    same(x.sum(), sum(x), "sum()");
    same(x.sum({1}, true), sum(x, {1}, true), "sum({1}, true)");
    same(x.mean({0}), mean(x, {0}), "mean({0})");
    same(x.prod({-1}), prod(x, {-1}), "prod");
    same(x.max(), max(x), "max");
    same(x.min({1}), min(x, {1}), "min");
    same(x.argmax(1), argmax(x, 1), "argmax(1)");
    same(x.argmin(), argmin(x), "argmin()");
    same(x.var(), var(x), "var()");
    same(x.std({1}, 0.0, true), kiln::std(x, {1}, 0.0, true), "std");
    same(x.logsumexp({1}), logsumexp(x, {1}), "logsumexp");
    same((x > 0.0).any(), any(x > 0.0), "any");
    same((x > 0.0).all({0}), all(x > 0.0, {0}), "all");
    same(x.cumsum(1), cumsum(x, 1), "cumsum");
    same(x.cumprod(0), cumprod(x, 0), "cumprod");
    same(x.sort(), sort(x), "sort");
    same(x.argsort(0, true), argsort(x, 0, true), "argsort");
    same(x.softmax(), softmax(x, -1), "softmax");
    same(x.log_softmax(0), log_softmax(x, 0), "log_softmax");
    same(x.layer_norm(), layer_norm(x), "layer_norm");
    same(x.rms_norm(ones({4})), rms_norm(x, ones({4})), "rms_norm");
    same(x.matmul(w), matmul(x, w), "matmul");
    same(x.cast(DType::int32), cast(x, DType::int32), "cast");
    same(x.to(DType::float64), cast(x, DType::float64), "to");
    same(x.exp().add(1.0).mul(x), mul(add(exp(x), 1.0), x), "chained");
    same(x.broadcast_to({2, 3, 4}), broadcast_to(x, {2, 3, 4}), "broadcast_to");
    same(x.slice(1, 3, None, -1), slice(x, 1, 3, None, -1), "slice");
    same(x.select(0, -1), select(x, 0, -1), "select");
    same(x.unsqueeze(1).squeeze(), squeeze(unsqueeze(x, 1)), "unsqueeze/squeeze");
    same(x.flip({1}), flip(x, {1}), "flip");
    same(x.tile({2, 1}), tile(x, {2, 1}), "tile");
    same(x.pad({{1, 0}, {0, 2}}, 5.0), pad(x, {{1, 0}, {0, 2}}, 5.0), "pad");
    same(x.gather(0, idx), gather(x, 0, idx), "gather");
    same(x.index_select(1, i64({3, 0})), index_select(x, 1, i64({3, 0})), "index_select");
    same(i64({1, 0}).one_hot(3), one_hot(i64({1, 0}), 3), "one_hot");
    same(x.scatter(0, idx, w.reshape({2, 4})), scatter(x, 0, idx, w.reshape({2, 4})), "scatter");
    same(x.scatter_add(0, idx, w.reshape({2, 4})), scatter_add(x, 0, idx, w.reshape({2, 4})), "scatter_add");
    same(x.index_add(0, i64({1, 1}), w.reshape({2, 4}), 2.0), index_add(x, 0, i64({1, 1}), w.reshape({2, 4}), 2.0),
         "index_add");
    // the free function's errors
    CHECK_THROWS_AS(x.sum({2}), IndexError);
    CHECK_THROWS_AS(x.matmul(x), ShapeError);
    CHECK_THROWS_AS(x.softmax(5), IndexError);
    CHECK_THROWS_AS(x.cumsum(-3), IndexError);
  }
}

// ---- operators and scalar overloads --------------------------------------------------------
TEST_SUITE("operators") {
  TEST_CASE("% is Python's remainder (divisor's sign); scalar overloads of floor_divide, remainder, fmod") {
    const std::vector<double> a = {7, -7, 7, -7, 5.5, -0.5, 0};
    const std::vector<double> b = {3, 3, -3, -3, 2, 2, -2};
    Tensor ta = Tensor::from_vector(a), tb = Tensor::from_vector(b);
    // float64 reference: Python's a % b = a - floor(a / b) * b (exact for these), sign of b
    auto py_mod = [](double x, double y) {
      double r = std::fmod(x, y);
      if (r != 0 && ((r < 0) != (y < 0))) r += y;
      return r == 0 ? std::copysign(0.0, y) : r;
    };
    std::vector<double> want(a.size()), want_s(a.size()), want_l(a.size()), want_fd(a.size()), want_fm(a.size());
    for (size_t i = 0; i < a.size(); ++i) {
      want[i] = py_mod(a[i], b[i]);
      want_s[i] = py_mod(a[i], -2.5);
      want_l[i] = py_mod(10.0, b[i]);
      want_fd[i] = std::floor(a[i] / 2.0);
      want_fm[i] = std::fmod(a[i], -2.5);
    }
    kt::check_all_close(ta % tb, want, 0, 0, "a % b");
    kt::check_all_close(ta % -2.5, want_s, 0, 0, "a % -2.5");
    kt::check_all_close(10.0 % tb, want_l, 0, 0, "10 % b");
    kt::check_all_close(remainder(ta, -2.5), want_s, 0, 0, "remainder(a, -2.5)");
    kt::check_all_close(remainder(10.0, tb), want_l, 0, 0, "remainder(10, b)");
    kt::check_all_close(floor_divide(ta, 2.0), want_fd, 0, 0, "floor_divide(a, 2)");
    kt::check_all_close(fmod(ta, -2.5), want_fm, 0, 0, "fmod(a, -2.5)");
    // signs of zero results follow the divisor (Python: -0.0 % 2 == 0.0, 0 % -2 == -0.0)
    CHECK(std::signbit((ta % tb).to_vector<double>()[6]));
    // integers: Python's int semantics, weak scalar keeps int32
    Tensor ti = Tensor::from_vector(std::vector<int32_t>{7, -7, 7, -7});
    Tensor r = ti % 3;
    CHECK(r.dtype() == DType::int32);
    CHECK(r.to_vector<int32_t>() == std::vector<int32_t>{1, 2, 1, 2});   // Python: 7 % 3, -7 % 3
    CHECK((ti % -3).to_vector<int32_t>() == std::vector<int32_t>{-2, -1, -2, -1});
    CHECK(floor_divide(ti, 2).to_vector<int32_t>() == std::vector<int32_t>{3, -4, 3, -4});
    CHECK(fmod(ti, 3).to_vector<int32_t>() == std::vector<int32_t>{1, -1, 1, -1});  // C: sign of the dividend
    CHECK(floor_divide(20, ti).to_vector<int32_t>() == std::vector<int32_t>{2, -3, 2, -3});
    CHECK_THROWS_AS(ti % 0, ValueError);
  }

  TEST_CASE("&, |, ^, !, ~ on bool tensors are logical_and/or/xor/not; other dtypes are refused") {
    const std::vector<bool> a = {false, false, true, true}, b = {false, true, false, true};
    Tensor ta = b8(a, {4}), tb = b8(b, {4});
    std::vector<bool> and_w, or_w, xor_w, not_w;
    for (size_t i = 0; i < a.size(); ++i) {
      and_w.push_back(a[i] && b[i]);
      or_w.push_back(a[i] || b[i]);
      xor_w.push_back(a[i] != b[i]);
      not_w.push_back(!a[i]);
    }
    CHECK((ta & tb).to_vector<bool>() == and_w);
    CHECK((ta | tb).to_vector<bool>() == or_w);
    CHECK((ta ^ tb).to_vector<bool>() == xor_w);
    CHECK((!ta).to_vector<bool>() == not_w);
    CHECK((~ta).to_vector<bool>() == not_w);
    CHECK((ta & tb).dtype() == DType::bool_);
    // broadcasting
    CHECK((b8({true, false}, {2, 1}) & tb).shape() == Shape{2, 4});
    Tensor i = Tensor::from_vector(std::vector<int32_t>{1, 2});
    CHECK_THROWS_WITH_AS(i & b8({true, true}, {2}), doctest::Contains("operator&: operands must be bool tensors, got int32 and bool"),
                         DTypeError);
    CHECK_THROWS_AS(!i, DTypeError);
    CHECK_THROWS_AS(f32({1.0f}) | f32({0.0f}), DTypeError);
  }
}

// ---- scatter rows: literals and eager == compiled -------------------------------------------
TEST_SUITE("scatter") {
  TEST_CASE("scatter, scatter_add and index_add match PyTorch's documented examples") {
    // PyTorch docs (torch.Tensor.scatter_): src = arange(1, 11).reshape(2, 5),
    // index = [[0, 1, 2, 0]], zeros(3, 5).scatter_(0, index, src) ->
    // [[1, 0, 0, 4, 0], [0, 2, 0, 0, 0], [0, 0, 3, 0, 0]]
    Tensor src = f32({1, 2, 3, 4, 5, 6, 7, 8, 9, 10}, {2, 5});
    Tensor r = scatter(zeros({3, 5}), 0, i64({0, 1, 2, 0}, {1, 4}), src);
    CHECK(r.to_vector<float>() == std::vector<float>{1, 0, 0, 4, 0, 0, 2, 0, 0, 0, 0, 0, 3, 0, 0});
    // ... index = [[0, 1, 2], [0, 1, 4]] along dim 1 ->
    // [[1, 2, 3, 0, 0], [6, 7, 0, 0, 8], [0, 0, 0, 0, 0]]
    Tensor r1 = scatter(zeros({3, 5}), 1, i64({0, 1, 2, 0, 1, 4}, {2, 3}), src);
    CHECK(r1.to_vector<float>() == std::vector<float>{1, 2, 3, 0, 0, 6, 7, 0, 0, 8, 0, 0, 0, 0, 0});
    // PyTorch docs (scatter_add_): ones(2, 5) src, index [[0, 1, 2, 0, 0]], zeros(3, 5) ->
    // [[1, 0, 0, 1, 1], [0, 1, 0, 0, 0], [0, 0, 1, 0, 0]]
    Tensor ra = scatter_add(zeros({3, 5}), 0, i64({0, 1, 2, 0, 0}, {1, 5}), ones({2, 5}));
    CHECK(ra.to_vector<float>() == std::vector<float>{1, 0, 0, 1, 1, 0, 1, 0, 0, 0, 0, 0, 1, 0, 0});
    // PyTorch docs (index_add_): ones(5, 3), t = [[1..3], [4..6], [7..9]], index [0, 4, 2] ->
    // [[2, 3, 4], [1, 1, 1], [8, 9, 10], [1, 1, 1], [5, 6, 7]]
    Tensor ri = index_add(ones({5, 3}), 0, i64({0, 4, 2}), f32({1, 2, 3, 4, 5, 6, 7, 8, 9}, {3, 3}));
    CHECK(ri.to_vector<float>() == std::vector<float>{2, 3, 4, 1, 1, 1, 8, 9, 10, 1, 1, 1, 5, 6, 7});
    // alpha (PyTorch: x.index_add_(0, index, t, alpha=-1))
    Tensor rn = index_add(ones({5, 3}), 0, i64({0, 4, 2}), f32({1, 2, 3, 4, 5, 6, 7, 8, 9}, {3, 3}), -1);
    CHECK(rn.to_vector<float>() == std::vector<float>{0, -1, -2, 1, 1, 1, -6, -7, -8, 1, 1, 1, -3, -4, -5});
  }

  TEST_CASE("repeated targets accumulate in index order: eager and compiled agree bitwise") {
    // 1e8 + 1 - 1e8 in float32 depends on the order: in index order it is
    // (1e8 + 1) - 1e8 = 0 (1e8 + 1 rounds to 1e8), the other way 1.
    Tensor src = f32({1e8f, 1.0f, -1e8f, 3.0f, 0.25f, 1e-8f}, {6});
    Tensor idx = i64({0, 0, 0, 1, 1, 1}, {6});
    Tensor eager = scatter_add(zeros({2}), 0, idx, src);
    CHECK(eager.to_vector<float>()[0] == 0.0f);
    CHECK(eager.to_vector<float>()[1] == (3.0f + 0.25f) + 1e-8f);
    auto f = [](Tensor x, Tensor i, Tensor s) {
      return scatter_add(x, 0, i, s) + index_add(x, 0, i, s) * scatter(x, 0, i, s);
    };
    CompiledCallable run = compile(f)(TensorLayout(DType::float32, {2}), TensorLayout(DType::int64, {6}),
                                      TensorLayout(DType::float32, {6}));
    Tensor x0 = f32({0.5f, -2.0f});
    CHECK(kt::same_bits(run(x0, idx, src).tensor(), f(x0, idx, src)));
    // larger random case
    Tensor big_x = kt::random_tensor({64, 8}, DType::float32, 5);
    Tensor big_i = kt::random_tensor({300, 8}, DType::int64, 6, false, 1.0, 0, 63);
    Tensor big_s = kt::random_tensor({300, 8}, DType::float32, 7);
    auto g = [](Tensor x, Tensor i, Tensor s) { return scatter_add(x, 0, i, s); };
    CompiledCallable run_g = compile(g)(big_x.layout(), big_i.layout(), big_s.layout());
    CHECK(kt::same_bits(run_g(big_x, big_i, big_s).tensor(), g(big_x, big_i, big_s)));
  }

  TEST_CASE("scatter errors name the op, the argument and the position") {
    Tensor x = zeros({3, 5});
    Tensor src = ones({2, 5});
    CHECK_THROWS_WITH_AS(scatter(x, 0, i64({0, 1, 2, 3}, {1, 4}), src),
                         "scatter: index 3 at position [0, 3] is out of range for dim 0 with size 3 (expected -3 <= index < 3)",
                         IndexError);
    CHECK_THROWS_WITH_AS(scatter_add(x, 1, i64({0, 9}, {1, 2}), src),
                         doctest::Contains("scatter_add: index 9 at position [0, 1]"), IndexError);
    CHECK_THROWS_WITH_AS(index_add(x, 0, i64({0, -4}), src),
                         doctest::Contains("index_add: index -4 at position [1] is out of range for dim 0 with size 3"),
                         IndexError);
    CHECK_THROWS_AS(scatter(x, 0, f32({0, 1}, {1, 2}), src), DTypeError);
    CHECK_THROWS_AS(scatter(x, 0, i64({0, 1}, {1, 2}), ones({2, 5}, DType::float64)), DTypeError);
    CHECK_THROWS_AS(scatter(x, 0, i64({0, 1, 0, 1, 0, 1}, {1, 6}), src), ShapeError);  // index wider than src
    CHECK_THROWS_AS(scatter(x, 0, i64({0, 1}, {2}), src), ShapeError);                 // rank
    CHECK_THROWS_AS(scatter(x, 2, i64({0}, {1, 1}), src), IndexError);                  // dim
    CHECK_THROWS_AS(index_add(x, 0, i64({0, 1}), ones({2, 4})), ShapeError);
    CHECK_THROWS_AS(index_add(x, 0, i64({0, 1}, {1, 2}), ones({2, 5})), ShapeError);
  }
}
