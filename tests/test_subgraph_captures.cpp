// as_subgraph bodies that capture tensors (or use numbers) that differ between
// calls: each call computes with its own captures, as eagerly, and calls with
// the same captures still share one body (the compile-time saving).
#include "test_util.h"

using namespace kiln;

namespace {
size_t n_bodies(const CompiledCallable& c) { return c.staged().graph->subgraphs().size(); }
}  // namespace

TEST_SUITE("subgraph_captures") {
  TEST_CASE("a body capturing a different weight per call computes eager's answer compiled and jitted") {
    std::vector<Tensor> W = {full({2, 2}, 1.0), full({2, 2}, 2.0), full({2, 2}, 3.0)};
    int i = 0;
    auto layer = as_subgraph([&](Tensor x) { return matmul(x, W[i]); }, "layer");
    auto f = [&](Tensor x) {
      Tensor h = x;
      for (i = 0; i < 3; ++i) h = layer(h);
      return h;
    };
    Tensor x = ones({1, 2});
    // Reference by hand: [1,1] @ 1s = [2,2]; @ 2s = [8,8]; @ 3s = [48,48].
    Tensor want = tensor({48.0f, 48.0f}).reshape({1, 2});
    CHECK(array_equal(f(x), want));  // eager
    CompiledCallable c = compile(f)(x.layout());
    CHECK(array_equal(Tensor(c(x)), want));
    CHECK(n_bodies(c) == 3);  // three different captures: three bodies
    auto j = jit(f);
    CHECK(array_equal(Tensor(j(x)), want));
    CHECK(array_equal(Tensor(j(x)), want));  // cached call
  }

  TEST_CASE("calls that capture the same tensor share one body") {
    Tensor w = full({2, 2}, 0.5);
    auto layer = as_subgraph([&](Tensor x) { return matmul(x, w) * 2.0f + 1.0f; }, "layer");
    auto f = [&](Tensor x) { return layer(layer(layer(x))); };
    Tensor x = ones({1, 2});
    // [1,1] -> [1,1]*2+1 = [3,3] -> [3,3]*2+1 = [7,7] -> [15,15]
    Tensor want = tensor({15.0f, 15.0f}).reshape({1, 2});
    CHECK(array_equal(f(x), want));
    CompiledCallable c = compile(f)(x.layout());
    CHECK(array_equal(Tensor(c(x)), want));
    CHECK(n_bodies(c) == 1);
  }

  TEST_CASE("a body using a different number per call computes eager's answer; equal numbers share a body") {
    double s[3] = {2.0, 3.0, 2.0};
    int i = 0;
    auto scale = as_subgraph([&](Tensor x) { return x * s[i]; }, "scale");
    auto f = [&](Tensor x) {
      Tensor h = x;
      for (i = 0; i < 3; ++i) h = scale(h);
      return h;
    };
    Tensor x = tensor({1.0f, -2.0f});
    Tensor want = tensor({12.0f, -24.0f});  // 1 * 2 * 3 * 2
    CHECK(array_equal(f(x), want));
    CompiledCallable c = compile(f)(x.layout());
    CHECK(array_equal(Tensor(c(x)), want));
    CHECK(n_bodies(c) == 2);  // x * 2 (calls 1 and 3) and x * 3
    CHECK(array_equal(Tensor(jit(f)(x)), want));
  }

  TEST_CASE("a body capturing a changed tensor is still checked by the compiled call") {
    std::vector<Tensor> W = {full({2}, 1.0f), full({2}, 2.0f)};
    int i = 0;
    auto layer = as_subgraph([&](Tensor x) { return x * W[i]; }, "layer");
    auto f = [&](Tensor x) {
      Tensor h = x;
      for (i = 0; i < 2; ++i) h = layer(h);
      return h;
    };
    Tensor x = ones({2});
    CompiledCallable c = compile(f)(x.layout());
    CHECK(array_equal(Tensor(c(x)), tensor({2.0f, 2.0f})));
    W[1].mul_(5.0f);  // eager f(x) is now [10, 10]
    CHECK_THROWS_WITH_AS(c(x), doctest::Contains("changed since the function was traced"), ValueError);
  }

  TEST_CASE("a BertModel's layers (parameters through the call prefix, numeric constants) still share one body") {
    nn::BertConfig cfg;
    cfg.vocab_size = 20;
    cfg.hidden_size = 8;
    cfg.num_hidden_layers = 3;
    cfg.num_attention_heads = 2;
    cfg.intermediate_size = 16;
    cfg.max_position_embeddings = 8;
    nn::BertModel m(cfg);  // random weights: the layers differ
    Tensor ids = tensor({{1, 5, 7, 2}}, DType::int64);
    Tensor mask = tensor({{1, 1, 1, 0}}, DType::int64);
    auto fn = [&](Tensor i, Tensor a) { return m.forward(i, a); };
    const StagedGraph s = stage(fn)(ids, mask);
    CHECK(s.graph->subgraphs().size() == 1);  // one body, traced per call but shared
    int calls = 0;
    for (const Node& n : s.graph->nodes()) calls += n.kind == NodeKind::call;
    CHECK(calls == 3);
    CompiledCallable c = compile(fn)(ids, mask);
    CHECK(allclose(Tensor(c(ids, mask)), fn(ids, mask), 1e-4, 1e-5));  // eager reference
  }
}
