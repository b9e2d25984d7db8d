// Captured tensors as traced sources: identical captured views are one
// source (a write through one handle is read through the other, compiled);
// a tensor the traced function made itself stays a fresh copy per call,
// also when the StagedGraph is kept and compiled from a copy.
#include "test_util.h"

using namespace kiln;

namespace {
std::vector<float> vals(const Tensor& t) { return t.contiguous().to_vector<float>(); }
Tensor seq(const Shape& s) {
  std::vector<float> v(static_cast<size_t>(checked_numel(s)));
  for (size_t i = 0; i < v.size(); ++i) v[i] = 0.5f * static_cast<float>(i) - 1.0f;
  return Tensor::from_vector(v, s);
}
}  // namespace

TEST_SUITE("captured sources") {
  TEST_CASE("two handles of one captured view are one source: the compiled path runs, eager's answer kept") {
    // v1 and v2 are separate handles of row 1 of w (each index() makes one)
    Tensor w = seq({3, 4});
    Tensor v1 = w.index({1}), v2 = w.index({1});
    Tensor we = w.clone();
    Tensor e1 = we.index({1}), e2 = we.index({1});
    auto f = [&](Tensor x) {
      v1.add_(x);
      return v2 * 2.0f + v1;
    };
    auto fe = [&](Tensor x) {
      e1.add_(x);
      return e2 * 2.0f + e1;
    };
    auto jf = jit(f);
    for (int i = 0; i < 3; ++i) {
      const Tensor x = full({4}, static_cast<float>(i + 1));
      CHECK(vals(jf(x).tensor()) == vals(fe(x)));
      CHECK(vals(w) == vals(we));
    }
    CHECK(jf.stats().eager_calls == 0);  // before: every call ran eagerly (two sources sharing memory)
    CHECK(jf.stats().compiles == 1);
    CHECK(jf.stats().hits == 2);
    // compile() too (before: its call raised the aliasing guard's ValueError)
    CompiledCallable run = compile(f)(TensorLayout(DType::float32, {4}));
    CHECK(run.staged().mutable_weights.size() == 1);
    for (const CapturedConstant& c : run.staged().captured) CHECK(!may_share_memory(c.source, w));
    const Tensor x = full({4}, 0.5f);
    CHECK(vals(run(x).tensor()) == vals(fe(x)));
    CHECK(vals(w) == vals(we));
  }

  TEST_CASE("identical views read before the write stay separate sources (eager's answer, by the aliasing guard)") {
    Tensor w = seq({3, 4});
    Tensor v1 = w.index({2}), v2 = w.index({2});
    Tensor we = w.clone();
    Tensor e1 = we.index({2}), e2 = we.index({2});
    auto f = [&](Tensor x) {
      Tensor r = v2 * 2.0f;
      v1.add_(x);
      return r + v2;
    };
    auto fe = [&](Tensor x) {
      Tensor r = e2 * 2.0f;
      e1.add_(x);
      return r + e2;
    };
    auto jf = jit(f);
    for (int i = 0; i < 2; ++i) {
      const Tensor x = full({4}, 1.0f);
      CHECK(vals(jf(x).tensor()) == vals(fe(x)));
      CHECK(vals(w) == vals(we));
    }
  }

  TEST_CASE("a tensor made while traced is a fresh result per call, also compiled from a kept StagedGraph's copy") {
    auto f = [](Tensor x) {
      Tensor z = zeros({3});
      Tensor z2 = ones({4});
      return std::make_tuple(x + 1.0f, z, Tensor(z2.index({Slice(1, 3)})));
    };
    const TensorLayout l(DType::float32, {3});
    StagedGraph s = stage(f)(l);  // kept while a copy is compiled
    CompiledCallable run(s);
    const Tensor x = ones({3});
    CallResult r1 = run(x);
    REQUIRE(r1.leaves.size() == 3);
    // eagerly z and z2 are new memory on every call: writing into one call's
    // results changes nothing the next call returns
    r1.leaves[1].add_(5.0f);
    r1.leaves[2].add_(5.0f);
    CallResult r2 = run(x);
    CHECK(vals(r2.leaves[1]) == std::vector<float>{0, 0, 0});
    CHECK(vals(r2.leaves[2]) == std::vector<float>{1, 1});
    CHECK(!may_share_memory(r1.leaves[1], r2.leaves[1]));
    CHECK(!may_share_memory(r1.leaves[2], r2.leaves[2]));
    // a captured tensor held outside is still returned as itself
    Tensor state = seq({3});
    CompiledCallable back(stage([&](Tensor a) { return std::make_tuple(a * 2.0f, state); })(l));
    CHECK(back(x).leaves[1].is_same(state));
  }
}
