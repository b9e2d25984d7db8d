// Traced reshape()/contiguous() decide view or copy as eager does:
// - where the strides of the input are known (contiguous arguments, a
//   transposed 2-d argument, op results, captured tensors, and views of
//   those replayed through the eager view rules), reshape is a view iff
//   eager's reshape is one for those strides (else a copy: a write through
//   it does not reach the input), and contiguous() is the value itself iff
//   it is contiguous;
// - where they are not known (a view of an argument traced for a
//   non-contiguous stride class, one compiled entry covering several
//   layouts), the result may be a view or a copy depending on the runtime
//   layout: reads work, and an in-place write through it is a
//   RealizationError at trace time naming the op;
// - inside kiln::lazy() the layouts are concrete and the eager rule applies.
// Each case runs eagerly, under jit and under compile on fresh copies of the
// same argument and compares the results and the arguments afterwards
// bitwise, and against literals worked out by hand.
#include "same_bits.h"
#include "test_util.h"

using namespace kiln;

namespace {
// [[0, 1, 2], [3, 4, 5]] float32, contiguous.
Tensor m23() { return tensor({{0.0f, 1.0f, 2.0f}, {3.0f, 4.0f, 5.0f}}); }
// [[0, 3], [1, 4], [2, 5]]: the transpose of m23(), strides {1, 3} (transposed class).
Tensor t32() { return m23().transpose(); }
// A (4, 3) row slice of arange(20).reshape(4, 5): strides {5, 1}, general class.
// Row i is [5i, 5i + 1, 5i + 2].
Tensor rows_general() { return slice(arange(0.0, 20.0, 1.0, DType::float32).reshape({4, 5}), 1, 0, 3); }
// A (4, 3) column slice of arange(24).reshape(4, 6) with step 2: strides {6, 2},
// general class too; row i is [6i, 6i + 2, 6i + 4]. Flattening it is a view
// (6 == 3 * 2), while flattening rows_general() is a copy.
Tensor cols_general() { return slice(arange(0.0, 24.0, 1.0, DType::float32).reshape({4, 6}), 1, 0, 6, 2); }

// f on fresh arguments eagerly, under jit and under compile: same result
// bits and same argument bits afterwards; returns the eager (result, argument).
template <class F>
std::pair<Tensor, Tensor> run_all(F f, Tensor (*make)()) {
  Tensor xe = make(), xj = make(), xc = make();
  const StrideClass cls = xe.stride_class();
  Tensor re = f(xe);
  Tensor rj = Tensor(jit(f)(xj));
  CompiledCallable c = compile(f)(xc.layout());
  Tensor rc = Tensor(c(xc));
  CHECK(xj.stride_class() == cls);
  CHECK(kt::same_bits(rj, re));
  CHECK(kt::same_bits(rc, re));
  CHECK(kt::same_bits(xj, xe));
  CHECK(kt::same_bits(xc, xe));
  return {re, xe};
}
}  // namespace

TEST_SUITE("traced_view_copy") {
  TEST_CASE("a write through a reshape that eagerly copies does not reach the base (contiguous argument)") {
    auto f = [](Tensor x) {
      x.transpose().reshape({-1}).fill_(-1.0f);  // the transpose cannot be flattened: a copy
      return x * 1.0f;
    };
    auto [r, x] = run_all(f, m23);
    CHECK(kt::same_bits(x, m23()));  // unchanged
    CHECK(kt::same_bits(r, m23()));
  }

  TEST_CASE("a write through a copying reshape of an op result does not reach it; a viewing one does") {
    auto f = [](Tensor x) {
      Tensor y = x * 1.0f;
      y.transpose().reshape({6}).fill_(-3.0f);  // a copy: y unchanged
      Tensor z = x + 0.0f;
      z.reshape({6}).fill_(7.0f);  // a view: z all 7
      return y + z;
    };
    auto [r, x] = run_all(f, m23);
    CHECK(kt::same_bits(r, tensor({{7.0f, 8.0f, 9.0f}, {10.0f, 11.0f, 12.0f}})));
    CHECK(kt::same_bits(x, m23()));
  }

  TEST_CASE("a transposed 2-d argument: reshape copies, so a write through it leaves the argument") {
    auto f = [](Tensor x) {
      x.reshape({-1}).fill_(-1.0f);
      return x * 1.0f;
    };
    auto [r, x] = run_all(f, t32);
    CHECK(kt::same_bits(x, t32()));
    CHECK(kt::same_bits(r, tensor({{0.0f, 3.0f}, {1.0f, 4.0f}, {2.0f, 5.0f}})));
  }

  TEST_CASE("a transposed 2-d argument: views eager finds contiguous are written through contiguous()") {
    SUBCASE("transpose") {
      auto f = [](Tensor x) {
        x.transpose().contiguous().add_(100.0f);  // x.T is contiguous: writes x
        return x * 1.0f;
      };
      auto [r, x] = run_all(f, t32);
      CHECK(kt::same_bits(x, tensor({{100.0f, 103.0f}, {101.0f, 104.0f}, {102.0f, 105.0f}})));
      CHECK(kt::same_bits(r, x));
    }
    SUBCASE("select of a column") {
      auto f = [](Tensor x) {
        select(x, 1, 1).contiguous().add_(100.0f);  // column 1: stride 1
        return x * 1.0f;
      };
      auto [r, x] = run_all(f, t32);
      CHECK(kt::same_bits(x, tensor({{0.0f, 103.0f}, {1.0f, 104.0f}, {2.0f, 105.0f}})));
    }
    SUBCASE("select of a row is not contiguous: a copy") {
      auto f = [](Tensor x) {
        select(x, 0, 1).contiguous().add_(100.0f);  // row 1: stride 3
        return x * 1.0f;
      };
      auto [r, x] = run_all(f, t32);
      CHECK(kt::same_bits(x, t32()));
    }
    SUBCASE("reshape of the transpose is a view") {
      auto f = [](Tensor x) {
        x.transpose().reshape({-1}).fill_(7.0f);
        return x * 1.0f;
      };
      auto [r, x] = run_all(f, t32);
      CHECK(kt::same_bits(x, full({3, 2}, 7.0f)));
    }
    SUBCASE("full slices") {
      auto f = [](Tensor x) {
        slice(x, 0, 0, 3).contiguous().add_(100.0f);              // x's own layout: a copy
        slice(x.transpose(), 1, 0, 3).contiguous().add_(10.0f);  // contiguous: writes x
        return x * 1.0f;
      };
      auto [r, x] = run_all(f, t32);
      CHECK(kt::same_bits(x, tensor({{10.0f, 13.0f}, {11.0f, 14.0f}, {12.0f, 15.0f}})));
    }
    SUBCASE("broadcast_to adding a leading axis of extent 1") {
      auto f = [](Tensor x) {
        broadcast_to(x.transpose(), {1, 2, 3}).contiguous().add_(100.0f);
        return x * 1.0f;
      };
      auto [r, x] = run_all(f, t32);
      CHECK(kt::same_bits(x, tensor({{100.0f, 103.0f}, {101.0f, 104.0f}, {102.0f, 105.0f}})));
    }
    SUBCASE("after a whole write into the argument, its views keep eager's layout") {
      auto f = [](Tensor x) {
        Tensor v = x.transpose();  // contiguous
        x.mul_(2.0f);
        v.contiguous().add_(100.0f);  // still a view of x eagerly
        return x * 1.0f;
      };
      auto [r, x] = run_all(f, t32);
      CHECK(kt::same_bits(x, tensor({{100.0f, 106.0f}, {102.0f, 108.0f}, {104.0f, 110.0f}})));
    }
  }

  TEST_CASE("an ambiguous reshape or contiguous() of a general-class argument refuses in-place writes, naming the op") {
    // Eagerly: rows_general() flattens by copying, cols_general() by a view.
    {
      Tensor a = rows_general(), b = cols_general();
      a.reshape({-1}).fill_(-1.0f);
      b.reshape({-1}).fill_(-1.0f);
      CHECK(kt::same_bits(a, rows_general()));
      CHECK(kt::same_bits(b, full({4, 3}, -1.0f)));
    }
    auto wr = [](Tensor x) {
      x.reshape({-1}).fill_(-1.0f);
      return x * 1.0f;
    };
    for (Tensor (*mk)() : {rows_general, cols_general}) {
      Tensor x = mk();
      CHECK(x.stride_class() == StrideClass::general);
      CHECK_THROWS_WITH_AS(jit(wr)(x), doctest::Contains("fill_: the destination"), RealizationError);
      CHECK_THROWS_WITH_AS(jit(wr)(x), doctest::Contains("result of reshape"), RealizationError);
      CHECK_THROWS_WITH_AS(jit(wr)(x), doctest::Contains("runtime strides"), RealizationError);
      CHECK_THROWS_WITH_AS(compile(wr)(x.layout()), doctest::Contains(".clone()"), RealizationError);
      CHECK(kt::same_bits(x, mk()));  // nothing written
    }
    // contiguous() of a row of a general-class argument (eagerly the row itself here).
    auto wc = [](Tensor x) {
      select(x, 0, 1).contiguous().add_(100.0f);
      return x * 1.0f;
    };
    CHECK_THROWS_WITH_AS(jit(wc)(rows_general()), doctest::Contains("result of contiguous()"), RealizationError);
    // A write through a view of an ambiguous value, and a compound assignment.
    auto wv = [](Tensor x) {
      Tensor r = x.reshape({-1});
      select(r, 0, 0).fill_(5.0f);
      return x * 1.0f;
    };
    CHECK_THROWS_WITH_AS(jit(wv)(rows_general()), doctest::Contains("result of reshape"), RealizationError);
    auto wa = [](Tensor x) {
      Tensor c = select(x, 0, 2).contiguous();
      c += 1.0f;
      return c;
    };
    CHECK_THROWS_WITH_AS(jit(wa)(cols_general()), doctest::Contains("runtime strides"), RealizationError);
    // is_contiguous() does not guess either.
    auto ic = [](Tensor x) { return select(x, 0, 1).is_contiguous() ? x * 1.0f : x * 2.0f; };
    CHECK_THROWS_WITH_AS(jit(ic)(rows_general()), doctest::Contains("is_contiguous()"), RealizationError);
  }

  TEST_CASE("a reshape of a reshape that is a view for any strides (split, then merge back) is a view: writes reach the argument") {
    // [4] of stride 2 -> [2, 2] -> [4]: splitting is a view for any stride, and
    // merging that split back is too; eagerly the write lands in the argument.
    auto f = [](Tensor a) {
      a.reshape({2, 2}).reshape({4})[1].fill_(7.0f);
      return a * 1.0f;
    };
    auto strided4 = [] { return slice(arange(0.0, 8.0, 1.0, DType::float32), 0, 0, 8, 2); };  // [0, 2, 4, 6]
    CHECK(strided4().stride_class() == StrideClass::general);
    auto [r, a] = run_all(f, +strided4);
    CHECK(a.to_vector<float>() == std::vector<float>{0, 7, 4, 6});
    CHECK(r.to_vector<float>() == std::vector<float>{0, 7, 4, 6});
    // A 2-d general argument: [4, 3] -> [2, 2, 3] -> [4, 3], then row 2 written.
    auto g = [](Tensor x) {
      select(x.reshape({2, 2, 3}).reshape({4, 3}), 0, 2).fill_(-1.0f);
      return x * 1.0f;
    };
    auto [rg, xg] = run_all(g, rows_general);
    CHECK(xg.to_vector<float>() == std::vector<float>{0, 1, 2, 5, 6, 7, -1, -1, -1, 15, 16, 17});
    // Merging what was not one split stays undecided: [4, 3] -> [2, 2, 3] -> [12].
    auto h = [](Tensor x) {
      x.reshape({2, 2, 3}).reshape({12}).fill_(0.0f);
      return x * 1.0f;
    };
    CHECK_THROWS_WITH_AS(jit(h)(rows_general()), doctest::Contains("runtime strides"), RealizationError);
  }

  TEST_CASE("an argument traced for a broadcast layout refuses writes through any view (README), eager writes a row") {
    auto f = [](Tensor a) {
      a[0] = 7.0f;
      return a.sum();
    };
    Tensor be = zeros({3});
    CHECK(f(broadcast_to(be, {2, 3})).item<float>() == 42.0f);  // eager: the row is b, shared by both rows
    CHECK(be.to_vector<float>() == std::vector<float>{7, 7, 7});
    Tensor bj = zeros({3});
    CHECK_THROWS_WITH_AS(jit(f)(broadcast_to(bj, {2, 3})), doctest::Contains("traced for a broadcast layout"), ValueError);
    CHECK(bj.to_vector<float>() == std::vector<float>{0, 0, 0});
  }

  TEST_CASE("reads through ambiguous values, and writes into a clone of one, compute eager's answer for every layout") {
    auto f = [](Tensor x) {
      Tensor flat = x.reshape({-1}) * 2.0f;                // [12]
      Tensor row = select(x, 0, 1).contiguous() + 1.0f;    // [3]
      Tensor c = x.reshape({-1}).clone();
      c.fill_(0.5f);  // a copy of its own: allowed
      return flat + concat({row, row, row, row}, 0) + c;
    };
    auto jf = jit(f);
    for (Tensor (*mk)() : {rows_general, cols_general}) {
      Tensor xe = mk(), xj = mk();
      Tensor re = f(xe), rj = Tensor(jf(xj));  // one compiled entry for both layouts
      CHECK(kt::same_bits(rj, re));
      CHECK(kt::same_bits(xj, mk()));
      // Independent reference: element (i, j) of x is x_ij = base + i * ri + j * cj.
      const bool rows = mk == rows_general;
      const float ri = rows ? 5.0f : 6.0f, cj = rows ? 1.0f : 2.0f;
      std::vector<float> want;
      for (int i = 0; i < 4; ++i)
        for (int j = 0; j < 3; ++j) want.push_back(2.0f * (i * ri + j * cj) + (ri + j * cj + 1.0f) + 0.5f);
      CHECK(kt::same_bits(re, Tensor::from_data(want.data(), DType::float32, want.size(), {12})));
    }
  }

  TEST_CASE("lazy(): contiguous() of a contiguous view and reshape follow eager's rule") {
    Tensor x = zeros({4}), y = zeros({4});
    {
      auto s = kiln::lazy();
      slice(x, 0, 0, 2).contiguous().fill_(1.0f);
    }
    slice(y, 0, 0, 2).contiguous().fill_(1.0f);
    CHECK(kt::same_bits(y, tensor({1.0f, 1.0f, 0.0f, 0.0f})));
    CHECK(kt::same_bits(x, y));
    Tensor a = m23(), b = m23();
    {
      auto s = kiln::lazy();
      a.transpose().reshape({-1}).fill_(-1.0f);  // a copy eagerly
    }
    b.transpose().reshape({-1}).fill_(-1.0f);
    CHECK(kt::same_bits(b, m23()));
    CHECK(kt::same_bits(a, b));
  }
}
