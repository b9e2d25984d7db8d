// kiln benchmark: the graph passes on graphs of 1,000 to 100,000 nodes.
// Reports ns_per_node (the pass's CPU time divided by the node count before
// it). Every pass is a fixed number of walks with O(1) hash-table work per
// node, so ns_per_node is flat except for one step: between 10,000 and
// 100,000 nodes the graph (about 450 bytes per node: the 192-byte Node and
// its operand lists, types and constants, 45 MB at 100,000 nodes) falls
// out of the caches and each node costs a few memory misses. optimize also
// runs at 300,000 nodes to show the plateau after that step.
//
// The graph is a chain of blocks that look like traced model code: an
// elementwise chain with a bias and an `x * 1`, a repeated subexpression,
// a reshape round trip and a double transpose, reductions over the same
// axis spelled two ways, a small foldable constant computation, and a dead
// value. Building the graph is not timed.
#include <benchmark/benchmark.h>

#include <time.h>

#include <functional>
#include <memory>

#include <kiln/kiln.h>

#include "../trace/passes/passes.h"

namespace {

using namespace kiln;

Attrs ints(std::vector<int64_t> v, bool keepdim = false) {
  Attrs a;
  a.ints = std::move(v);
  a.flag = keepdim;
  return a;
}

GraphValue op(OpId id, std::vector<GraphValue> in, const Attrs& a = {}) { return in.at(0).graph->add_op(id, in, a); }

GraphValue constant(Graph& g, std::vector<float> v, Shape s) { return g.add_constant(Tensor::from_vector(v, s)); }

// One block: 33 nodes, of which optimize() removes about two thirds.
GraphValue block(Graph& g, GraphValue h, GraphValue bias, int k) {
  GraphValue one = constant(g, {1.0f}, {});                           // merged by CSE
  GraphValue a = op(OpId::Add, {h, bias});
  GraphValue b = op(OpId::Mul, {a, one});                             // x * 1
  GraphValue c = op(OpId::Tanh, {b});
  GraphValue d1 = op(OpId::Exp, {c}), d2 = op(OpId::Exp, {c});        // repeated subexpression
  GraphValue e = op(OpId::Add, {d1, d2});
  GraphValue r = op(OpId::Reshape, {op(OpId::Reshape, {e}, ints({-1}))}, ints({8, -1}));  // reshape round trip
  GraphValue p = op(OpId::Permute, {op(OpId::Permute, {r}, ints({1, 0}))}, ints({-1, 0}));  // double transpose
  GraphValue s1 = op(OpId::Sum, {p}, ints({-1}, true));
  GraphValue s2 = op(OpId::Sum, {p}, ints({1}, true));                // same after canonicalisation
  GraphValue m = op(OpId::Sub, {p, op(OpId::Mul, {s1, s2})});
  // small constant arithmetic: folds to one scalar
  GraphValue c1 = constant(g, {0.5f, 1.5f, 2.5f, 3.5f}, {4});
  GraphValue c2 = constant(g, {static_cast<float>(k % 7), 1.f, 2.f, 3.f}, {4});
  GraphValue kf = op(OpId::Sum, {op(OpId::Mul, {op(OpId::Add, {c1, c2}), constant(g, {0.25f}, {})})}, ints({}));
  GraphValue scaled = op(OpId::Mul, {m, op(OpId::Reciprocal, {op(OpId::Add, {kf, constant(g, {1.0f}, {})})})});
  op(OpId::Exp, {op(OpId::Neg, {scaled})});                           // dead
  GraphValue n = op(OpId::Neg, {op(OpId::Neg, {scaled})});            // neg(neg(x))
  GraphValue bc = op(OpId::BroadcastTo, {n}, ints({8, 16}));          // broadcast to the same shape
  return op(OpId::Softmax, {op(OpId::Add, {bc, h})}, [] {
    Attrs a;
    a.axis = -1;
    return a;
  }());
}

// A graph of about `nodes` nodes.
std::unique_ptr<Graph> make_graph(int64_t nodes) {
  auto g = std::make_unique<Graph>("bench", std::vector<TensorType>{TensorType(DType::float32, {8, 16}),
                                                                     TensorType(DType::float32, {16})});
  GraphValue h = g->inputs()[0], bias = g->inputs()[1];
  std::vector<GraphValue> outs;
  for (int k = 0; static_cast<int64_t>(g->num_nodes()) < nodes; ++k) {
    h = block(*g, h, bias, k);
    if (k % 64 == 63) outs.push_back(op(OpId::Sum, {h}, ints({0})));
  }
  outs.push_back(h);
  g->output_values(outs);
  return g;
}

// CPU time of this thread: the machines these run on are often shared, and
// wall time then mostly measures the other processes.
double thread_ns() {
  timespec t{};
  clock_gettime(CLOCK_THREAD_CPUTIME_ID, &t);
  return static_cast<double>(t.tv_sec) * 1e9 + static_cast<double>(t.tv_nsec);
}

void run_pass(benchmark::State& state, const std::function<void(Graph&)>& pass) {
  const int64_t n = state.range(0);
  double total_ns = 0, nodes_before = 0, nodes_after = 0;
  for (auto _ : state) {
    state.PauseTiming();
    std::unique_ptr<Graph> g = make_graph(n);
    nodes_before = static_cast<double>(g->num_nodes());
    state.ResumeTiming();
    const double t0 = thread_ns();
    pass(*g);
    const double t1 = thread_ns();
    state.PauseTiming();
    total_ns += t1 - t0;
    nodes_after = static_cast<double>(g->num_nodes());
    g.reset();  // freeing is not timed either
    state.ResumeTiming();
  }
  state.counters["nodes"] = nodes_before;
  state.counters["nodes_after"] = nodes_after;
  state.counters["ns_per_node"] = total_ns / (static_cast<double>(state.iterations()) * nodes_before);
}

// Baseline: the least any pass does, one read of every node's operands. Its
// ns_per_node shows how much of the growth with size is the memory
// hierarchy (a big graph's nodes and operand lists no longer fit in cache).
void walk_nodes(Graph& g) {
  int64_t sum = 0;
  for (const Node& n : g.nodes())
    for (int32_t v : n.inputs) sum += v;
  benchmark::DoNotOptimize(sum);
}

void BM_baseline_node_walk(benchmark::State& s) { run_pass(s, walk_nodes); }
void BM_optimize(benchmark::State& s) { run_pass(s, [](Graph& g) { optimize(g); }); }
void BM_canonicalize_shapes(benchmark::State& s) { run_pass(s, canonicalize_shapes); }
void BM_algebraic_simplification(benchmark::State& s) { run_pass(s, algebraic_simplification); }
void BM_constant_folding(benchmark::State& s) { run_pass(s, [](Graph& g) { constant_folding(g); }); }
void BM_common_subexpression_elimination(benchmark::State& s) { run_pass(s, common_subexpression_elimination); }
void BM_dead_code_elimination(benchmark::State& s) { run_pass(s, dead_code_elimination); }

#define KILN_PASS_BENCH(fn) BENCHMARK(fn)->Arg(1000)->Arg(10000)->Arg(100000)->Unit(benchmark::kMillisecond)->MeasureProcessCPUTime()
KILN_PASS_BENCH(BM_baseline_node_walk);
KILN_PASS_BENCH(BM_optimize)->Arg(300000);
KILN_PASS_BENCH(BM_canonicalize_shapes);
KILN_PASS_BENCH(BM_algebraic_simplification);
KILN_PASS_BENCH(BM_constant_folding);
KILN_PASS_BENCH(BM_common_subexpression_elimination);
KILN_PASS_BENCH(BM_dead_code_elimination);

}  // namespace

BENCHMARK_MAIN();
