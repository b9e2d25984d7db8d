// stage(), subgraph dedup and nn::Module tracing.
#include "test_util.h"

using namespace kiln;

namespace {
struct Block : nn::Module {
  std::shared_ptr<nn::Linear> fc;
  std::shared_ptr<nn::LayerNorm> norm;
  explicit Block(int64_t d) {
    fc = register_module("fc", std::make_shared<nn::Linear>(d, d));
    norm = register_module("norm", std::make_shared<nn::LayerNorm>(d));
  }
  Tensor forward(const Tensor& x) override { return x + tanh((*norm)((*fc)(x))); }
  std::string type_name() const override { return "Block"; }
};

struct Mlp : nn::Module {
  std::shared_ptr<nn::ModuleList> layers;
  Mlp() {
    layers = register_module("layers", std::make_shared<nn::ModuleList>());
    layers->push_back(std::make_shared<nn::Linear>(8, 16));
    layers->push_back(std::make_shared<nn::Linear>(16, 4));
  }
  Tensor forward(const Tensor& x) override { return (*layers)[1](relu((*layers)[0](x))); }
};

int count_calls(const Graph& g) {
  int n = 0;
  for (const auto& node : g.nodes()) n += node.kind == NodeKind::call;
  return n;
}
}  // namespace

TEST_SUITE("stage") {
  TEST_CASE("stage returns the graph and its signature") {
    auto f = [](Tensor x, Tensor w) { return softmax(matmul(x, w), -1); };
    StagedGraph s = stage(f)(TensorLayout(DType::float32, {32, 64}), TensorLayout(DType::float32, {64, 10}));
    CHECK(s.in_layouts.size() == 2);
    CHECK(s.out_layouts.size() == 1);
    CHECK(s.out_layouts[0].shape == Shape{32, 10});
    CHECK(s.in_tree.str() == "(T, T)");
    CHECK(s.out_tree.str() == "T");
    s.graph->verify();
    CHECK(s.ir().find("matmul(%0, %1)") != std::string::npos);
    CHECK(s.ir().find("softmax") != std::string::npos);
  }

  TEST_CASE("specs nest in pytrees; example tensors are taken by layout; statics are recorded") {
    auto f = [](std::pair<Tensor, Tensor> p, int k) {
      return std::make_tuple(p.first * static_cast<float>(k), std::vector<Tensor>{p.second + 1.0f});
    };
    StagedGraph s = stage(f)(std::make_pair(TensorLayout(DType::float32, {3}), zeros({2}, DType::float32)), 4);
    CHECK(s.in_tree.str() == "((T, T), 4)");
    CHECK(s.out_tree.str() == "(T, [T])");
    CHECK(s.out_layouts.size() == 2);
    CHECK(s.out_layouts[1].shape == Shape{2});
  }

  TEST_CASE("non-tensor results are an error naming the output path") {
    auto f = [](Tensor x) { return std::make_tuple(x, 3); };
    CHECK_THROWS_WITH_AS(stage(f)(TensorLayout(DType::float32, {2})), doctest::Contains("output 1 is not a tensor"),
                         ValueError);
    // The failed trace left no context behind.
    CHECK_FALSE(in_graph_context());
  }

  TEST_CASE("as_subgraph: three calls give one body and three calls") {
    auto block = as_subgraph([](Tensor x) { return tanh(x) * 2.0f; }, "block");
    auto f = [&](Tensor x) { return block(block(block(x))); };
    StagedGraph s = stage(f)(TensorLayout(DType::float32, {4}));
    CHECK(s.graph->subgraphs().size() == 1);
    CHECK(s.graph->subgraphs().count("block") == 1);
    CHECK(count_calls(*s.graph) == 3);
    s.graph->verify();
    // Outside a trace the function simply runs.
    CHECK(block(tensor({0.f})).item<float>() == 0.f);
  }

  TEST_CASE("as_subgraph: a different static argument gives a second body") {
    auto block = as_subgraph([](Tensor x, int k) { return x * static_cast<float>(k); }, "block");
    auto f = [&](Tensor x) { return block(block(x, 2), 3) + block(x, 2); };
    StagedGraph s = stage(f)(TensorLayout(DType::float32, {4}));
    CHECK(s.graph->subgraphs().size() == 2);
    CHECK(s.graph->subgraphs().count("block_1") == 1);
    CHECK(count_calls(*s.graph) == 3);
  }

  TEST_CASE("allow_subgraphs=false inlines every call") {
    auto block = as_subgraph([](Tensor x) { return tanh(x); }, "block");
    auto f = [&](Tensor x) { return block(block(x)); };
    StagedGraph s = stage(f, {.name = "main", .allow_subgraphs = false})(TensorLayout(DType::float32, {4}));
    CHECK(s.graph->subgraphs().empty());
    CHECK(s.graph->op_counts()["tanh"] == 2);
  }

  TEST_CASE("nested calls inside a body are inlined") {
    auto inner = as_subgraph([](Tensor x) { return exp(x); }, "inner");
    auto outer = as_subgraph([&](Tensor x) { return inner(x) + inner(x); }, "outer");
    StagedGraph s = stage([&](Tensor x) { return outer(x); })(TensorLayout(DType::float32, {4}));
    REQUIRE(s.graph->subgraphs().size() == 1);
    const Graph& body = *s.graph->subgraphs().at("outer");
    CHECK(count_calls(body) == 0);
  }

  TEST_CASE("a 2-layer MLP from nn::Linear stages with weights named by path") {
    Mlp mlp;
    auto names = mlp.named_parameters();
    REQUIRE(names.size() == 4);
    CHECK(names[0].first == "layers.0.weight");
    CHECK(names[3].first == "layers.1.bias");
    StagedGraph s = stage([&](Tensor x) { return mlp(x); })(TensorLayout(DType::float32, {2, 8}));
    const std::string ir = s.ir();
    CHECK(ir.find("weight \"layers.0.weight\" : float32[16, 8] cpu") != std::string::npos);
    CHECK(ir.find("weight \"layers.1.bias\" : float32[4] cpu") != std::string::npos);
    CHECK(s.out_layouts[0].shape == Shape{2, 4});
    MESSAGE("MLP IR:\n" << ir);
  }

  TEST_CASE("a 12-layer stack stages as one body and 12 calls with per-call prefixes") {
    auto stack = std::make_shared<nn::Sequential>();
    for (int i = 0; i < 12; ++i) {
      auto b = std::make_shared<Block>(8);
      b->set_subgraph(true);
      stack->push_back(b);
    }
    struct Root : nn::Module {
      std::shared_ptr<nn::Sequential> layers;
      explicit Root(std::shared_ptr<nn::Sequential> s) { layers = register_module("layers", s); }
      Tensor forward(const Tensor& x) override { return (*layers)(x); }
    } root(stack);
    StagedGraph s = stage([&](Tensor x) { return root(x); })(TensorLayout(DType::float32, {2, 8}));
    CHECK(s.graph->subgraphs().size() == 1);
    CHECK(count_calls(*s.graph) == 12);
    const Graph& body = *s.graph->subgraphs().begin()->second;
    int placeholders = 0;
    for (const auto& n : body.nodes())
      if (n.kind == NodeKind::weight) {
        CHECK(n.placeholder);
        CHECK(n.name.find("layers.") == std::string::npos);  // relative names
        ++placeholders;
      }
    CHECK(placeholders == 4);  // fc.weight, fc.bias, norm.weight, norm.bias
    CHECK(s.ir().find("prefix=\"layers.11.\"") != std::string::npos);
    s.graph->verify();
    // Eagerly the same module just runs.
    Tensor y = root(random::normal({2, 8}));
    CHECK(y.shape() == Shape{2, 8});
  }
}

TEST_SUITE("stage") {
  TEST_CASE("a spec with a negative extent is an error naming the argument") {
    using namespace kiln;
    auto f = [](Tensor x, Tensor y) { return x + y; };
    CHECK_THROWS_WITH_AS(stage(f)(TensorLayout(DType::float32, {3}), TensorLayout(DType::float32, {-1})),
                         doctest::Contains("argument 1: shape [-1] has a negative extent"), ShapeError);
  }
}
