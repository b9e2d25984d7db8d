// The cached call path of a CompiledCallable (jit/call_plan.h,
// trace/pytree_fixed.h): arguments whose tree is their type's alone are
// gathered without a TreeDef and matched by the type's tree, results are
// rebuilt by position; every check and error of the general path stays.
#include <array>
#include <cmath>
#include <thread>
#include <map>
#include <string>
#include <tuple>
#include <utility>
#include <vector>

#include "test_util.h"
#include "../jit/plan.h"

struct CpParams {
  kiln::Tensor w, b;
};
KILN_PYTREE(CpParams, w, b);
struct CpMixed {  // a static leaf: not fixed
  kiln::Tensor w;
  int k = 0;
};
KILN_PYTREE(CpMixed, w, k);
struct CpOther {  // the same leaves as CpParams under another type name
  kiln::Tensor w, b;
};
KILN_PYTREE(CpOther, w, b);

namespace {
using namespace kiln;
std::vector<double> vals(const Tensor& t) { return t.to_vector<double>(); }
Tensor t1(double a, double b) { return Tensor::from_vector(std::vector<float>{float(a), float(b)}, {2}); }
}  // namespace

TEST_SUITE("call path") {
  TEST_CASE("a type's fixed tree equals what tree_flatten makes of its values") {
    using detail::fixed_treedef;
    using detail::fixed_tree_v;
    const Tensor a = t1(1, 2), b = t1(3, 4);
    CHECK(fixed_tree_v<Tensor>);
    CHECK(fixed_tree_v<CpParams>);
    CHECK(fixed_tree_v<std::tuple<CpParams, Tensor>>);
    CHECK(fixed_tree_v<std::pair<Tensor, CpParams>>);
    CHECK(fixed_tree_v<std::array<CpParams, 3>>);
    CHECK_FALSE(fixed_tree_v<CpMixed>);                      // a static value is part of the tree
    CHECK_FALSE(fixed_tree_v<std::vector<Tensor>>);          // a run-time length
    CHECK_FALSE(fixed_tree_v<std::map<std::string, Tensor>>);
    CHECK_FALSE(fixed_tree_v<std::tuple<Tensor, double>>);
    CHECK(detail::FixedTree<std::tuple<CpParams, Tensor>>::leaves == 3);
    CHECK(detail::FixedTree<std::array<CpParams, 3>>::leaves == 6);

    const std::tuple<CpParams, std::pair<Tensor, Tensor>, std::array<Tensor, 2>> v{{a, b}, {b, a}, {a, a}};
    auto [leaves, tree] = tree_flatten(v);
    CHECK(fixed_treedef<std::remove_cvref_t<decltype(v)>>() == tree);
    CHECK(fixed_treedef<std::remove_cvref_t<decltype(v)>>().str() == "(CpParams{w: T, b: T}, (T, T), (T, T))");
    const auto fl = detail::fixed_leaves(v);
    REQUIRE(fl.size() == leaves.size());
    for (size_t i = 0; i < fl.size(); ++i) CHECK(fl[i].is_same(leaves[i]));
    // rebuilt by position: the same tensors in the same places
    const Tensor* p = leaves.data();
    auto back = detail::FixedTree<std::remove_cvref_t<decltype(v)>>::rebuild(p);
    CHECK(std::get<0>(back).w.is_same(a));
    CHECK(std::get<0>(back).b.is_same(b));
    CHECK(std::get<1>(back).first.is_same(b));
    CHECK(std::get<2>(back)[1].is_same(a));
  }

  TEST_CASE("struct arguments: the same numbers as the flattened call, repeatedly") {
    auto f = [](CpParams p, Tensor x) { return std::make_tuple(CpParams{p.w * x + p.b, p.b - x}, p.w * 2.0f); };
    const auto spec = TensorLayout(DType::float32, {2});
    CompiledCallable run = compile(f)(CpParams{t1(0, 0), t1(0, 0)}, spec);
    CpParams p{t1(1, 2), t1(3, 4)};
    const Tensor x = t1(10, 20);
    for (int i = 0; i < 3; ++i) {  // the first call compares the tree; later ones its address
      auto [q, w2] = run(p, x).as<std::tuple<CpParams, Tensor>>();
      // want: w*x+b = {1*10+3, 2*20+4} = {13, 44}; b-x = {-7, -16}; 2w = {2, 4}
      CHECK(vals(q.w) == std::vector<double>{13, 44});
      CHECK(vals(q.b) == std::vector<double>{-7, -16});
      CHECK(vals(w2) == std::vector<double>{2, 4});
      auto [leaves, tree] = tree_flatten(std::forward_as_tuple(p, x));
      const CallResult r = run.call_flat(leaves, tree);
      REQUIRE(r.leaves.size() == 3);
      CHECK(vals(r.leaves[0]) == std::vector<double>{13, 44});
      CHECK(r.tree->str() == "(CpParams{w: T, b: T}, T)");
    }
  }

  TEST_CASE("struct arguments keep the checked call's errors") {
    auto f = [](CpParams p, Tensor x) { return p.w + p.b + x; };
    const auto spec = TensorLayout(DType::float32, {2});
    CompiledCallable run = compile(f)(CpParams{t1(0, 0), t1(0, 0)}, spec);
    CpParams p{t1(1, 2), t1(3, 4)};
    CHECK(vals(run(p, t1(1, 1))) == std::vector<double>{5, 7});  // 1+3+1, 2+4+1
    // a leaf of the wrong shape or dtype, named by its path
    CpParams bad{Tensor::from_vector(std::vector<float>{1, 2, 3}, {3}), t1(3, 4)};
    CHECK_THROWS_WITH_AS(run(bad, t1(1, 1)), doctest::Contains("argument 0.w: expected float32[2]"), ValueError);
    CHECK_THROWS_WITH_AS(run(bad, t1(1, 1)), doctest::Contains("got float32[3]"), ValueError);
    CHECK_THROWS_WITH_AS(run(p, Tensor::from_vector(std::vector<double>{1, 2}, {2})),
                         doctest::Contains("argument 1: expected float32[2]"), ValueError);
    CHECK_THROWS_WITH_AS(run(CpParams{Tensor(), t1(3, 4)}, t1(1, 1)),
                         doctest::Contains("argument 0.w: an undefined tensor"), ValueError);
    // another struct type of the same leaves, before and after a good call: still the tree error
    CHECK_THROWS_WITH_AS(run(CpOther{t1(1, 2), t1(3, 4)}, t1(1, 1)),
                         doctest::Contains("tree structure mismatch: expected (CpParams{w: T, b: T}, T), got "
                                           "(CpOther{w: T, b: T}, T)"),
                         ValueError);
    CHECK(vals(run(p, t1(1, 1))) == std::vector<double>{5, 7});
    CHECK_THROWS_AS(run(CpOther{t1(1, 2), t1(3, 4)}, t1(1, 1)), ValueError);
    CHECK_THROWS_WITH_AS(run(p), doctest::Contains("expected 2 positional argument(s), got 1"), ValueError);
    CHECK(vals(run(p, t1(1, 1))) == std::vector<double>{5, 7});
  }

  TEST_CASE("a result of another structure than as<R> asks is the pytree error, not a silent reorder") {
    auto f = [](Tensor x) { return std::make_tuple(x + 1.0f, x * 3.0f); };
    CompiledCallable run = compile(f)(TensorLayout(DType::float32, {2}));
    const Tensor x = t1(1, 2);
    auto [a, b] = run(x).as<std::tuple<Tensor, Tensor>>();
    CHECK(vals(a) == std::vector<double>{2, 3});
    CHECK(vals(b) == std::vector<double>{3, 6});
    CHECK_THROWS_AS(run(x).as<CpParams>(), ValueError);                    // a tuple, not a record
    CHECK_THROWS_AS((run(x).as<std::tuple<Tensor, Tensor, Tensor>>()), ValueError);  // 2 leaves, not 3
    CHECK_THROWS_AS(run(x).tensor(), ValueError);
  }

  TEST_CASE("as<R>: a kept result is copied from, a temporary moved from; another tree of as many leaves stays an error") {
    auto f = [](CpParams p) { return CpParams{p.w + 1.0f, p.b * 2.0f}; };
    CompiledCallable run = compile(f)(CpParams{t1(0, 0), t1(0, 0)});
    const CpParams p{t1(1, 2), t1(3, 4)};
    // want: w + 1 = {2, 3}, 2 b = {6, 8}
    const CallResult r = run(p);
    const CpParams a = r.as<CpParams>(), b = r.as<CpParams>();  // copies: r keeps its leaves
    REQUIRE(r.leaves.size() == 2);
    CHECK(r.leaves[0].is_same(a.w));
    CHECK(r.leaves[1].is_same(b.b));
    CHECK(vals(a.w) == std::vector<double>{2, 3});
    CHECK(vals(b.b) == std::vector<double>{6, 8});
    CallResult r2 = run(p);
    const Tensor w_leaf = r2.leaves[0];
    const CpParams c = std::move(r2).as<CpParams>();  // moved: the same tensors
    CHECK(c.w.is_same(w_leaf));
    CHECK(vals(c.b) == std::vector<double>{6, 8});
    const CpParams d = run(p);  // operator R() on a temporary
    CHECK(vals(d.w) == std::vector<double>{2, 3});
    CHECK(vals(d.b) == std::vector<double>{6, 8});
    // after those matches (the callable's tree remembered): another tree of
    // two leaves (a record of another type, a tuple) is the pytree error
    const CallResult other{{t1(1, 2), t1(3, 4)}, std::make_shared<const TreeDef>(detail::fixed_treedef<CpOther>())};
    CHECK_THROWS_AS(other.as<CpParams>(), ValueError);
    CHECK_THROWS_AS(CallResult(other).as<CpParams>(), ValueError);
    const CallResult tup{{t1(1, 2), t1(3, 4)},
                         std::make_shared<const TreeDef>(detail::fixed_treedef<std::tuple<Tensor, Tensor>>())};
    CHECK_THROWS_AS(tup.as<CpParams>(), ValueError);
    // an equal tree in another object: matched by its structure
    const CallResult same{{t1(5, 6), t1(7, 8)}, std::make_shared<const TreeDef>(detail::fixed_treedef<CpParams>())};
    const CpParams e = same.as<CpParams>();
    CHECK(e.w.is_same(same.leaves[0]));
    CHECK(e.b.is_same(same.leaves[1]));
    CHECK(vals(run(p).as<CpParams>().w) == std::vector<double>{2, 3});  // the callable's tree again
  }

  TEST_CASE("struct arguments: a result reduced to an argument is a copy, one returned as is aliases it") {
    // p.w * 1 is a new tensor eagerly (the optimiser reduces it to p.w); p.b returned is p.b.
    auto f = [](CpParams p) { return std::make_tuple(p.w * 1.0f, p.b); };
    CompiledCallable run = compile(f)(CpParams{t1(0, 0), t1(0, 0)});
    CpParams p{t1(1, 2), t1(3, 4)};
    for (int i = 0; i < 2; ++i) {
      auto [w, b] = run(p).as<std::tuple<Tensor, Tensor>>();
      CHECK(vals(w) == std::vector<double>{1, 2});
      CHECK_FALSE(may_share_memory(w, p.w));
      CHECK(may_share_memory(b, p.b));
      w.fill_(9.0);
      CHECK(vals(p.w) == std::vector<double>{1, 2});
    }
  }

  TEST_CASE("struct leaves gathered by address: the argument objects themselves, in flattening order") {
    const Tensor a = t1(1, 2), b = t1(3, 4);
    const std::tuple<CpParams, std::pair<Tensor, Tensor>, std::array<Tensor, 2>> v{{a, b}, {b, a}, {a, b}};
    using V = std::remove_cvref_t<decltype(v)>;
    std::array<const Tensor*, detail::FixedTree<V>::leaves> ptrs{};
    const Tensor** p = ptrs.data();
    detail::FixedTree<V>::gather(v, p);
    CHECK(p == ptrs.data() + ptrs.size());
    CHECK(ptrs[0] == &std::get<0>(v).w);
    CHECK(ptrs[1] == &std::get<0>(v).b);
    CHECK(ptrs[2] == &std::get<1>(v).first);
    CHECK(ptrs[3] == &std::get<1>(v).second);
    CHECK(ptrs[4] == &std::get<2>(v)[0]);
    CHECK(ptrs[5] == &std::get<2>(v)[1]);
    CHECK(a.impl_ptr().use_count() == 4);  // a, v's three copies: nothing gathered holds one
    // the borrowed view reads the same tensors from either form
    const std::vector<Tensor> handles = tree_flatten(v).first;
    const detail::TensorRefs by_addr{std::span<const Tensor* const>(ptrs)}, by_handle{handles};
    REQUIRE(by_addr.size() == 6);
    REQUIRE(by_handle.size() == 6);
    for (size_t i = 0; i < 6; ++i) CHECK(by_addr[i].is_same(by_handle[i]));
    size_t n = 0;
    for (const Tensor& t : by_addr) CHECK(t.is_same(handles[n++]));
    CHECK(n == 6);
    const std::vector<Tensor> copied = by_addr.to_vector();
    CHECK(copied[5].is_same(b));
  }

  TEST_CASE("struct arguments: a strided leaf, and a leaf of another dtype, name the leaf; the call still works after") {
    auto f = [](CpParams p, Tensor x) { return p.w * x + p.b; };
    const auto spec = TensorLayout(DType::float32, {2});
    CompiledCallable run = compile(f)(CpParams{t1(0, 0), t1(0, 0)}, spec);
    const CpParams p{t1(1, 2), t1(3, 4)};
    // every second element of {5, 9, 6, 9}: {5, 6}, a general (strided) view
    const Tensor strided = slice(Tensor::from_vector(std::vector<float>{5, 9, 6, 9}, {4}), 0, 0, 4, 2);
    REQUIRE(strided.shape() == Shape{2});
    REQUIRE_FALSE(strided.is_contiguous());
    CHECK_THROWS_WITH_AS(run(CpParams{t1(1, 2), strided}, t1(1, 1)), doctest::Contains("argument 0.b: expected float32[2]"),
                         ValueError);
    CHECK_THROWS_WITH_AS(run(CpParams{t1(1, 2), strided}, t1(1, 1)), doctest::Contains("(contiguous), got float32[2]"),
                         ValueError);
    CHECK_THROWS_WITH_AS(run(CpParams{Tensor::from_vector(std::vector<int32_t>{1, 2}, {2}), t1(3, 4)}, t1(1, 1)),
                         doctest::Contains("argument 0.w: expected float32[2]"), ValueError);
    CHECK_THROWS_WITH_AS(run(p, Tensor()), doctest::Contains("argument 1: an undefined tensor"), ValueError);
    // w*x+b = {1*10+3, 2*20+4}
    CHECK(vals(run(p, t1(10, 20))) == std::vector<double>{13, 44});
  }

  TEST_CASE("struct arguments: one tensor passed in several places, and temporaries") {
    auto f = [](CpParams p, Tensor x) { return std::make_tuple(p.w * x - p.b, x + 1.0f); };
    const auto spec = TensorLayout(DType::float32, {2});
    CompiledCallable run = compile(f)(CpParams{t1(0, 0), t1(0, 0)}, spec);
    const Tensor a = t1(2, 3);
    for (int i = 0; i < 2; ++i) {
      // a*a - a = {2, 6}; a + 1 = {3, 4}
      auto [y, z] = run(CpParams{a, a}, a).as<std::tuple<Tensor, Tensor>>();
      CHECK(vals(y) == std::vector<double>{2, 6});
      CHECK(vals(z) == std::vector<double>{3, 4});
      CHECK_FALSE(may_share_memory(y, a));
      CHECK_FALSE(may_share_memory(z, a));
    }
    CHECK(vals(a) == std::vector<double>{2, 3});
    // leaves that are temporaries of the call's full expression: {1*5-3, 2*6-4}
    CHECK(vals(std::get<0>(run(CpParams{t1(1, 2), t1(3, 4)}, t1(5, 6)).as<std::tuple<Tensor, Tensor>>())) ==
          std::vector<double>{2, 8});
  }

  TEST_CASE("struct arguments written in place: the result is the argument, an overlap of the written leaf is refused") {
    // w -= lr * b, returned: the result is the caller's p.w itself, as eagerly
    auto f = [](CpParams p, Tensor lr) {
      p.w.sub_(lr * p.b);
      return std::make_tuple(p.w, p.b * 2.0f + lr);  // b and lr read after the write
    };
    const auto spec = TensorLayout(DType::float32, {2});
    CompiledCallable run = compile(f)(CpParams{t1(0, 0), t1(0, 0)}, spec);
    CpParams p{t1(10, 20), t1(1, 2)};
    const Tensor lr = t1(0.5, 0.5);
    for (int i = 1; i <= 2; ++i) {
      auto [w, b2] = run(p, lr).as<std::tuple<Tensor, Tensor>>();
      CHECK(w.is_same(p.w));
      // w after i steps: {10 - 0.5 i, 20 - 1 i}; 2b + lr = {2.5, 4.5}
      CHECK(vals(p.w) == std::vector<double>{10 - 0.5 * i, 20 - 1.0 * i});
      CHECK(vals(b2) == std::vector<double>{2.5, 4.5});
      CHECK_FALSE(may_share_memory(b2, p.b));
    }
    // p.b the same tensor as p.w: the function reads b after writing w (eagerly the new value): refused
    const Tensor shared = t1(4, 4);
    CHECK_THROWS_WITH_AS(run(CpParams{shared, shared}, lr),
                         doctest::Contains("argument 0.w and argument 0.b overlap in memory"), ValueError);
    CHECK(vals(shared) == std::vector<double>{4, 4});  // nothing written
    // lr a view overlapping the written p.w: refused too
    const Tensor w4 = Tensor::from_vector(std::vector<float>{1, 2, 3, 4}, {4});
    CHECK_THROWS_AS(run(CpParams{slice(w4, 0, 0, 2), t1(1, 1)}, slice(w4, 0, 1, 3)), ValueError);
    CHECK(vals(w4) == std::vector<double>{1, 2, 3, 4});
  }

  TEST_CASE("struct arguments: a captured tensor changed behind the call's back is an error (a view, an offset)") {
    // captured: a view at an offset into a larger tensor, and a scalar
    const Tensor base = Tensor::from_vector(std::vector<float>{7, 1, 2, 9}, {4});
    const Tensor c = slice(base, 0, 1, 3);  // {1, 2}
    auto f = [c](CpParams p) { return p.w * c + p.b * 3.0f; };
    CompiledCallable run = compile(f)(CpParams{t1(0, 0), t1(0, 0)});
    const CpParams p{t1(1, 1), t1(1, 2)};
    CHECK(vals(run(p)) == std::vector<double>{4, 8});  // {1*1 + 3, 1*2 + 6}
    // an element outside the view changes: still the same constant
    static_cast<float*>(base.data_ptr())[3] = 5.0f;
    CHECK(vals(run(p)) == std::vector<double>{4, 8});
    // one inside it, written through memory (no version bump): the hash sees it
    static_cast<float*>(base.data_ptr())[2] = 6.0f;
    CHECK_THROWS_WITH_AS(run(p), doctest::Contains("changed since the function was traced"), ValueError);
    static_cast<float*>(base.data_ptr())[2] = 2.0f;  // back: the call runs again
    CHECK(vals(run(p)) == std::vector<double>{4, 8});
    // a captured strided view (not contiguous): hashed through its elements
    const Tensor sbase = Tensor::from_vector(std::vector<float>{1, 0, 2, 0}, {4});
    const Tensor sc = slice(sbase, 0, 0, 4, 2);  // {1, 2}
    REQUIRE_FALSE(sc.is_contiguous());
    auto g = [sc](CpParams q) { return q.w * sc - q.b; };
    CompiledCallable run2 = compile(g)(CpParams{t1(0, 0), t1(0, 0)});
    CHECK(vals(run2(p)) == std::vector<double>{0, 0});  // {1*1 - 1, 1*2 - 2}
    static_cast<float*>(sbase.data_ptr())[1] = 3.0f;  // between the viewed elements
    CHECK(vals(run2(p)) == std::vector<double>{0, 0});
    static_cast<float*>(sbase.data_ptr())[2] = 4.0f;
    CHECK_THROWS_WITH_AS(run2(p), doctest::Contains("changed since the function was traced"), ValueError);
  }

  TEST_CASE("plans called in turn on one thread, and plans made again in the same place, each run their own binding") {
    // f: tanh(x w) w (the product tanh(x w) an intermediate in the plan's
    // arena); g: (x w) * 2 + b. A thread keeps the last plan's binding of
    // arena and constant slots: calls that alternate, and a plan destroyed
    // and made again (maybe at the same address, with an arena at the same
    // address), must each use their own.
    auto f = [](Tensor x, Tensor w) { return matmul(tanh(matmul(x, w)), w); };
    auto g = [](Tensor x, Tensor w, Tensor b) { return matmul(x, w) * 2.0f + b; };
    const int64_t n = 3, k = 4;
    std::vector<float> xv(n * k), wv(k * k), bv(k);
    for (int64_t i = 0; i < n * k; ++i) xv[i] = 0.1f * float(i % 7) - 0.3f;
    for (int64_t i = 0; i < k * k; ++i) wv[i] = 0.05f * float(i % 5) - 0.1f;
    for (int64_t i = 0; i < k; ++i) bv[i] = float(i);
    const Tensor x = Tensor::from_vector(xv, {n, k}), w = Tensor::from_vector(wv, {k, k}), b = Tensor::from_vector(bv, {k});
    // float64 references by explicit loops
    auto mm = [&](const std::vector<double>& a, int64_t rows) {
      std::vector<double> r(rows * k, 0.0);
      for (int64_t i = 0; i < rows; ++i)
        for (int64_t j = 0; j < k; ++j)
          for (int64_t q = 0; q < k; ++q) r[i * k + j] += a[i * k + q] * double(wv[q * k + j]);
      return r;
    };
    const std::vector<double> xd(xv.begin(), xv.end());
    std::vector<double> h = mm(xd, n);
    for (double& v : h) v = std::tanh(v);
    const std::vector<double> f_ref = mm(h, n);
    std::vector<double> g_ref = mm(xd, n);
    for (int64_t i = 0; i < n * k; ++i) g_ref[i] = g_ref[i] * 2 + double(bv[i % k]);
    auto close = [](const Tensor& t, const std::vector<double>& want) {
      const std::vector<double> got = t.to_vector<double>();
      REQUIRE(got.size() == want.size());
      for (size_t i = 0; i < got.size(); ++i)
        if (std::abs(got[i] - want[i]) > 1e-5 * (1 + std::abs(want[i]))) return false;
      return true;
    };
    const auto lx = TensorLayout(DType::float32, {n, k}), lw = TensorLayout(DType::float32, {k, k});
    const auto lb = TensorLayout(DType::float32, {k});
    CompiledCallable cf = compile(f)(lx, lw);
    CompiledCallable cg = compile(g)(lx, lw, lb);
    REQUIRE(cf.engine_model().artifact().plan().arena_bytes() > 0);
    for (int i = 0; i < 3; ++i) {
      CHECK(close(cf(x, w), f_ref));
      CHECK(close(cg(x, w, b), g_ref));
      CHECK(close(cf(x, w), f_ref));  // twice in a row: the kept binding
      CHECK(close(cf(x, w), f_ref));
    }
    for (int i = 0; i < 4; ++i) {
      CompiledCallable cf2 = compile(f)(lx, lw);
      CHECK(close(cf2(x, w), f_ref));
      CHECK(close(cf2(x, w), f_ref));
      CHECK(close(cg(x, w, b), g_ref));
    }
    // a result holding the arena (none here), or a call from another thread: checked against the same numbers
    std::vector<double> from_thread;
    std::thread t([&] { from_thread = cf(x, w).tensor().to_vector<double>(); });
    t.join();
    CHECK(close(Tensor::from_vector(std::vector<float>(from_thread.begin(), from_thread.end()), {n, k}), f_ref));
    CHECK(close(cf(x, w), f_ref));
  }

  TEST_CASE("jit's cached call on struct arguments: entries matched field by field, misses explained, errors kept") {
    // jit takes the fixed-structure path for (CpParams, Tensor): the leaves
    // gathered by type and each compared with the entry's layouts.
    auto f = [](CpParams p, Tensor x) { return std::make_tuple(CpParams{p.w * x + p.b, p.b - x}, p.w * 2.0f); };
    auto jf = jit(f);
    CpParams p{t1(1, 2), t1(3, 4)};
    const Tensor x = t1(10, 20);
    for (int i = 0; i < 3; ++i) {
      auto [q, w2] = jf(p, x).as<std::tuple<CpParams, Tensor>>();
      // w*x+b = {13, 44}; b-x = {-7, -16}; 2w = {2, 4}
      CHECK(vals(q.w) == std::vector<double>{13, 44});
      CHECK(vals(q.b) == std::vector<double>{-7, -16});
      CHECK(vals(w2) == std::vector<double>{2, 4});
    }
    JitStats s = jf.stats();
    CHECK(s.misses == 1);
    CHECK(s.hits == 2);
    CHECK(s.compiles == 1);
    // Another stride class for x (a stride 0: broadcast): a miss, explained by field.
    const Tensor xb = broadcast_to(Tensor::from_vector(std::vector<float>{5}, {1}), {2});
    REQUIRE(xb.stride_class() == StrideClass::broadcast);
    auto [qb, wb] = jf(p, xb).as<std::tuple<CpParams, Tensor>>();
    CHECK(vals(qb.w) == std::vector<double>{8, 14});  // {1*5+3, 2*5+4}
    CHECK(jf.last_miss_explanation().find("arg 1: stride class broadcast vs cached contiguous") != std::string::npos);
    // Another shape for a struct field: a miss naming the field's path.
    const CpParams p3{Tensor::from_vector(std::vector<float>{1, 2, 3}, {3}), Tensor::from_vector(std::vector<float>{0, 0, 1}, {3})};
    const Tensor x1 = Tensor::from_vector(std::vector<float>{2}, {1});
    auto [q3, w3] = jf(p3, x1).as<std::tuple<CpParams, Tensor>>();
    CHECK(vals(q3.w) == std::vector<double>{2, 4, 7});  // w*2+b
    CHECK(jf.last_miss_explanation().find("arg 0.w: shape [3] vs cached") != std::string::npos);
    s = jf.stats();
    CHECK(s.misses == 3);
    CHECK(s.compiles == 3);
    // The first entry again (now third in the LRU): a hit, same numbers.
    auto [q4, w4] = jf(p, x).as<std::tuple<CpParams, Tensor>>();
    CHECK(vals(q4.w) == std::vector<double>{13, 44});
    CHECK(jf.stats().hits == 3);
    CHECK(jf.stats().misses == 3);
    // An undefined leaf is named by its path before any lookup.
    CHECK_THROWS_WITH_AS(jf(CpParams{t1(1, 2), Tensor()}, x), doctest::Contains("jit: argument 0.b: an undefined tensor"),
                         ValueError);
    CHECK(jf.stats().hits == 3);
    CHECK(jf.stats().misses == 3);
  }
}
