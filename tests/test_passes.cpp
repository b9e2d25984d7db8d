// kiln tests: the graph passes (trace/passes/) and the graph IR's text form.
// Each pass is checked three ways on small graphs built with Graph::add_op:
// the node list after the pass (counts or the exact text), verify(), and a
// tiny interpreter below that runs the graph before and after the pass with
// the eager kernels on random inputs (NaN, inf, -0 included): results must
// be identical (bit for bit, NaN payloads aside).
#include <bit>
#include <cstdint>
#include <cstring>
#include <functional>
#include <map>

#include "../trace/passes/passes.h"
#include "test_util.h"

namespace {

using namespace kiln;
using kt::random_tensor;

// ---- building graphs --------------------------------------------------------------

TensorType f32(Shape s) { return TensorType(DType::float32, std::move(s)); }

Attrs ints(std::vector<int64_t> v, int64_t axis = 0, bool flag = false) {
  Attrs a;
  a.ints = std::move(v);
  a.axis = axis;
  a.flag = flag;
  return a;
}
Attrs axis_attr(int64_t axis) { return ints({}, axis); }

GraphValue op(OpId id, std::vector<GraphValue> in, const Attrs& a = {}) { return in.at(0).graph->add_op(id, in, a); }

// A constant of `d` holding `v` (converted), shaped `s` (1-d by default).
GraphValue constant(Graph& g, std::vector<double> v, DType d = DType::float32, Shape s = {}) {
  if (s.empty() && v.size() != 1) s = {static_cast<int64_t>(v.size())};
  return g.add_constant(Tensor::from_vector(v, s).to(d));
}
GraphValue scalar_const(Graph& g, double v, DType d = DType::float32) {
  return g.add_constant(Tensor::from_vector(std::vector<double>{v}, {1}).reshape({}).to(d).contiguous());
}

int count(const Graph& g, NodeKind k) {
  int c = 0;
  for (const Node& n : g.nodes()) c += n.kind == k;
  return c;
}
int count_op(const Graph& g, OpId id) {
  int c = 0;
  for (const Node& n : g.nodes()) c += n.kind == NodeKind::op && n.op == id;
  return c;
}

// ---- the test interpreter ---------------------------------------------------------

using Weights = std::map<std::string, Tensor>;

// Runs `g` node by node with the eager kernels. Placeholder weights resolve
// through the calls' prefixes ("layers.3." + "weight").
std::vector<Tensor> run(const Graph& g, const std::vector<Tensor>& args, const Weights& w = {},
                        const std::string& prefix = "") {
  std::vector<Tensor> v(g.num_values());
  size_t next = 0;
  for (const Node& n : g.nodes()) {
    std::vector<Tensor> in;
    for (int32_t i : n.inputs) in.push_back(v.at(i));
    switch (n.kind) {
      case NodeKind::input: v[n.outputs[0]] = args.at(next++); break;
      case NodeKind::constant: v[n.outputs[0]] = n.data; break;
      case NodeKind::weight: v[n.outputs[0]] = w.at(n.placeholder ? prefix + n.name : n.name); break;
      case NodeKind::op: v[n.outputs[0]] = detail::eager_execute(n.op, in, n.attrs); break;
      case NodeKind::call: {
        std::vector<Tensor> r = run(*g.subgraph(n.name), in, w, prefix + n.prefix);
        for (size_t k = 0; k < r.size(); ++k) v[n.outputs[k]] = r[k];
        break;
      }
    }
  }
  std::vector<Tensor> out;
  for (int32_t o : g.output_ids()) out.push_back(v.at(o));
  return out;
}

// Random inputs; float inputs start with -0.0, +0.0, NaN, inf, -inf so that
// every rewrite meets the IEEE special cases.
std::vector<Tensor> random_args(const Graph& g, uint64_t seed) {
  std::vector<Tensor> a;
  for (int32_t v : g.input_ids()) {
    const TensorType& t = g.type(v);
    Tensor r = random_tensor(t.shape, t.dtype, seed++, true);
    if (is_floating(t.dtype)) {
      std::vector<double> d = kt::values(r);
      const double inf = std::numeric_limits<double>::infinity();
      const double special[] = {-0.0, 0.0, std::numeric_limits<double>::quiet_NaN(), inf, -inf};
      for (size_t i = 0; i < d.size() && i < 5; ++i) d[i] = special[i];
      r = Tensor::from_data(d.data(), DType::float64, d.size(), t.shape).to(t.dtype);
    }
    a.push_back(r);
  }
  return a;
}

// Identical results: same dtype and shape; each element equal with the same
// sign (so -0.0 != +0.0), or both NaN.
void check_identical(const std::vector<Tensor>& got, const std::vector<Tensor>& want) {
  REQUIRE(got.size() == want.size());
  for (size_t k = 0; k < got.size(); ++k) {
    CAPTURE(k);
    REQUIRE(got[k].dtype() == want[k].dtype());
    REQUIRE(got[k].shape() == want[k].shape());
    std::vector<double> a = kt::values(got[k]), b = kt::values(want[k]);
    for (size_t i = 0; i < a.size(); ++i) {
      CAPTURE(i);
      if (std::isnan(b[i])) CHECK(std::isnan(a[i]));
      else CHECK((a[i] == b[i] && std::signbit(a[i]) == std::signbit(b[i])));
    }
  }
}

std::vector<TensorType> types_of(const Graph& g, const std::vector<int32_t>& ids) {
  std::vector<TensorType> r;
  for (int32_t v : ids) r.push_back(g.type(v));
  return r;
}

// Runs `pass` on `g` and checks that it verifies, keeps the signature and
// computes the same results as before on random inputs.
void check_pass(Graph& g, const std::function<void(Graph&)>& pass, const Weights& w = {}) {
  g.verify();
  const auto args = random_args(g, 7);
  const auto before = run(g, args, w);
  const auto in_types = types_of(g, g.input_ids()), out_types = types_of(g, g.output_ids());
  pass(g);
  INFO("after the pass:\n" << g.to_text());
  g.verify();
  CHECK(types_of(g, g.input_ids()) == in_types);
  CHECK(types_of(g, g.output_ids()) == out_types);
  check_identical(run(g, args, w), before);
}

template <class E>
std::string error_of(const std::function<void()>& f) {
  try {
    f();
  } catch (const E& e) {
    return e.what();
  }
  return "(no exception)";
}

// ---- one valid node per op-table row ---------------------------------------------

struct OpCase {
  std::vector<TensorType> in;
  Attrs attrs;
};

// Small valid inputs and non-default attributes (where the op reads them)
// for every row, chosen by category.
OpCase op_case(OpId id) {
  const TensorType x23 = f32({2, 3});
  const TensorType i64_2(DType::int64, {2});
  switch (op_info(id).category) {
    case OpCategory::Unary: {
      Attrs a;
      if (id == OpId::Cast) a.dtype = DType::float16;
      return {{x23}, a};
    }
    case OpCategory::Binary: return {{x23, f32({3})}, {}};
    case OpCategory::Ternary:
      if (id == OpId::Where) return {{TensorType(DType::bool_, {2, 3}), x23, f32({3})}, {}};
      return {{x23, f32({3}), f32({2, 1})}, {}};
    case OpCategory::Reduce: {
      Attrs a = ints({-1}, 0, true);
      if (id == OpId::Var || id == OpId::Std) a.scalar = 0.5;
      return {{f32({2, 3, 4})}, a};
    }
    case OpCategory::Scan: return {{x23}, axis_attr(-1)};
    case OpCategory::RowNorm:
      if (id == OpId::LayerNorm) {
        Attrs a = ints({1, 1});
        a.scalar = 1e-5;
        return {{x23, f32({3}), f32({3})}, a};
      }
      if (id == OpId::RmsNorm) {
        Attrs a = ints({1, 0});
        a.scalar = 1e-6;
        return {{x23, f32({3})}, a};
      }
      return {{x23}, axis_attr(1)};
    case OpCategory::Matmul: return {{x23, f32({3, 4})}, {}};
    case OpCategory::View:
      switch (id) {
        case OpId::Reshape: return {{x23}, ints({3, -1})};
        case OpId::Permute: return {{x23}, ints({1, 0})};
        case OpId::BroadcastTo: return {{f32({3})}, ints({2, 3})};
        case OpId::Slice: return {{x23}, ints({2, 0, -1}, 1)};
        case OpId::Select: return {{x23}, ints({-1}, 0)};
        case OpId::Squeeze: return {{f32({2, 1, 3})}, ints({1})};
        case OpId::Unsqueeze: return {{x23}, axis_attr(-1)};
        default: return {{x23}, ints({0})};  // flip
      }
    case OpCategory::Data:
      switch (id) {
        case OpId::Concat: return {{x23, f32({2, 2})}, axis_attr(1)};
        case OpId::Pad: {
          Attrs a = ints({1, 0, 0, 2});
          a.scalar = -0.5;
          return {{x23}, a};
        }
        case OpId::Tile: return {{x23}, ints({2, 1})};
        case OpId::Gather: return {{x23, TensorType(DType::int64, {2, 1})}, axis_attr(1)};
        case OpId::IndexSelect: return {{x23, i64_2}, axis_attr(1)};
        case OpId::Scatter:
        case OpId::ScatterAdd: return {{x23, TensorType(DType::int64, {2, 1}), f32({2, 2})}, axis_attr(1)};
        case OpId::IndexAdd: return {{x23, i64_2, f32({2, 2})}, axis_attr(1)};
        case OpId::Conv2d: return {{f32({1, 2, 5, 4}), f32({4, 1, 3, 2})}, ints({2, 1, 1, 0, 1, 2}, 2)};
        case OpId::TopK: {
          Attrs a = ints({2}, -1);
          a.flag = true;
          return {{x23}, a};
        }
        case OpId::SearchSorted: {
          Attrs a;
          a.flag = true;
          return {{x23, f32({2, 4})}, a};
        }
        case OpId::MaxPool2d: return {{f32({1, 2, 5, 4})}, ints({3, 2, 2, 1, 1, 0, 1, 2})};
        case OpId::AvgPool2d: {
          Attrs a = ints({3, 2, 2, 1, 1, 1});
          a.flag = true;
          return {{f32({1, 2, 5, 4})}, a};
        }
        case OpId::Tril:
        case OpId::Triu:
        case OpId::Diag: return {{x23}, axis_attr(-1)};
        case OpId::NanToNum: {
          Attrs a = ints({std::bit_cast<int64_t>(7.5), std::bit_cast<int64_t>(-0.25)});
          a.scalar = 0.5;
          return {{x23}, a};
        }
        case OpId::Cross: return {{f32({2, 3}), f32({3})}, axis_attr(-1)};
        default: {  // one_hot
          Attrs a = axis_attr(5);
          a.dtype = DType::int32;
          return {{i64_2}, a};
        }
      }
    case OpCategory::Linalg:
      if (id == OpId::LinalgSolve || id == OpId::LinalgLstsq) return {{f32({3, 3}), f32({3, 2})}, {}};
      return {{f32({2, 3, 3})}, axis_attr(id == OpId::LinalgSvd || id == OpId::LinalgQr ? 1 : 0)};
  }
  return {};
}

}  // namespace

TEST_SUITE("passes") {
  // ---- the text form and the verifier ----------------------------------------------

  TEST_CASE("the text form round-trips for every op in the table") {
    int built = 0;
    for (int i = 0; i < kNumOps; ++i) {
      const OpId id = static_cast<OpId>(i);
      CAPTURE(op_name(id));
      OpCase c = op_case(id);
      Graph g("rt", c.in);
      std::vector<GraphValue> in = g.inputs();
      GraphValue r;
      try {
        r = g.add_op(id, in, c.attrs);
      } catch (const Error& e) {
        FAIL_CHECK("building the node failed: " << e.what());
        continue;
      }
      g.output_values({r});
      g.verify();
      const std::string text = g.to_text();
      CAPTURE(text);
      std::unique_ptr<Graph> back = Graph::parse(text);
      CHECK(back->equals(g));
      CHECK(back->to_text() == text);
      ++built;
    }
    CHECK(built == kNumOps);
  }

  TEST_CASE("the text form round-trips constants, weights, calls and several outputs") {
    Graph g("main", {f32({2, 3})});
    Graph& body = g.define_subgraph("block", {f32({2, 3})});
    {
      GraphValue x = body.inputs()[0];
      GraphValue w = body.add_weight("weight", f32({3, 3}), true);
      GraphValue y = op(OpId::Matmul, {x, w});
      body.output_values({y, op(OpId::Sum, {y}, ints({1}))});
    }
    GraphValue x = g.inputs()[0];
    auto r = g.add_call("block", std::vector<GraphValue>{x}, "layers.0.");
    GraphValue h = g.add_constant(Tensor::from_vector(std::vector<double>{-0.0, 1.5, 65504.0}).to(DType::float16));
    GraphValue b = g.add_constant(Tensor::from_vector(std::vector<double>{1, 0}).to(DType::bool_));
    GraphValue e = g.add_weight("embed \"quoted\"", TensorType(DType::bfloat16, {}));
    g.output_values({r[0], r[1], h, b, e});
    const std::string text = g.to_text();
    std::unique_ptr<Graph> back = Graph::parse(text);
    CHECK(back->equals(g));
    CHECK(back->to_text() == text);
  }

  TEST_CASE("the text form round-trips every scalar attribute bit pattern, NaN payloads included") {
    auto bits = [](double v) { return std::bit_cast<uint64_t>(v); };
    const std::vector<uint64_t> patterns = {
        0x7ff8000000000000ULL,  // the plain quiet NaN: printed "nan"
        0xfff8000000000000ULL,  // -nan (what 0.0 / 0.0 gives on x86)
        0x7ff8000000000001ULL,  // quiet NaN with a payload
        0x7ff0000000000001ULL,  // signalling NaN
        0xfff4000000abcdefULL,  // negative signalling NaN with a payload
        0x7fffffffffffffffULL,  // all payload bits
        0x7ff0000000000000ULL, 0xfff0000000000000ULL,  // +-inf
        0x0000000000000000ULL, 0x8000000000000000ULL,  // +-0
        0x0000000000000001ULL, 0x800fffffffffffffULL,  // subnormals
        0x7fefffffffffffffULL, bits(0.1), bits(-1e-300), bits(1.0 / 3.0)};
    for (uint64_t p : patterns) {
      CAPTURE(p);
      const double v = std::bit_cast<double>(p);
      Graph g("g", {f32({2})});
      Attrs a = ints({1, 1});
      a.scalar = v;
      g.output_values({op(OpId::Pad, {g.inputs()[0]}, a)});
      const std::string text = g.to_text();
      CAPTURE(text);
      std::unique_ptr<Graph> back = Graph::parse(text);
      CHECK(bits(back->node(back->num_nodes() - 1).attrs.scalar) == p);
      CHECK(back->equals(g));
      CHECK(back->to_text() == text);
    }
    // The plain NaN stays readable; other NaNs print their bits.
    {
      Graph g("g", {f32({2})});
      Attrs a = ints({1, 1});
      a.scalar = std::bit_cast<double>(uint64_t{0x7ff8000000000000ULL});
      g.output_values({op(OpId::Pad, {g.inputs()[0]}, a)});
      CHECK(g.to_text().find("scalar=nan}") != std::string::npos);
      a.scalar = std::bit_cast<double>(uint64_t{0xfff8000000000001ULL});
      Graph h("g", {f32({2})});
      h.output_values({op(OpId::Pad, {h.inputs()[0]}, a)});
      CHECK(h.to_text().find("scalar=nan:0xfff8000000000001}") != std::string::npos);
    }
    auto parse_error = [](const std::string& t) {
      return error_of<ValueError>([&] { Graph::parse(t); });
    };
    CHECK(parse_error("graph @g(%0: float32[2] cpu) {\n  %1 = pad(%0) {ints=[1, 1], scalar=nan:0x7ff8} : float32[4] cpu\n"
                      "  return %1\n}\n") == "Graph::parse: line 2: expected 16 hex digits after 'nan:0x'");
    CHECK(parse_error("graph @g(%0: float32[2] cpu) {\n  %1 = pad(%0) {ints=[1, 1], scalar=nan:0x3ff0000000000000} : "
                      "float32[4] cpu\n  return %1\n}\n") == "Graph::parse: line 2: 'nan:0x' bits that are not a NaN");
  }

  TEST_CASE("Graph::parse reports errors with the line number") {
    auto parse_error = [](const std::string& t) {
      return error_of<ValueError>([&] { Graph::parse(t); });
    };
    CHECK(parse_error("graph @g(%0: float32[2] cpu) {\n  %1 = frobnicate(%0) : float32[2] cpu\n  return %1\n}\n") ==
          "Graph::parse: line 2: unknown op 'frobnicate'");
    CHECK(parse_error("graph @g(%0: float32[2] cpu) {\n  %1 = neg(%5) : float32[2] cpu\n  return %1\n}\n") ==
          "Graph::parse: line 2: use of undefined value %5");
    CHECK(parse_error("graph @g(%0: float33[2] cpu) {\n  return %0\n}\n") ==
          "Graph::parse: line 1: unknown dtype 'float33'");
    CHECK(parse_error("graph @g(%0: float32[2, -1] cpu) {\n  return %0\n}\n") ==
          "Graph::parse: line 1: negative dimension in a type");
    CHECK(parse_error("graph @g(%0: float32[2] cpu) {\n  %1 = constant 0x0000 : float32[] cpu\n  return %1\n}\n") ==
          "Graph::parse: line 2: constant has 2 bytes, its type needs 4");
    // A type that disagrees with the op's rule is caught by the verifier.
    CHECK(parse_error("graph @g(%0: float32[2] cpu) {\n  %1 = neg(%0) : float32[3] cpu\n  return %1\n}\n") ==
          "verify: graph 'g' node 1: neg result type float32[3] cpu but the op gives float32[2] cpu");

    // Truncated text, cut anywhere, is an error, never a crash or a graph.
    Graph g("g", {f32({2})});
    g.output_values({op(OpId::Neg, {g.inputs()[0]})});
    const std::string text = g.to_text();
    for (size_t cut = 0; cut + 1 < text.size(); ++cut) {
      CAPTURE(text.substr(0, cut));
      std::string m = parse_error(text.substr(0, cut));
      CHECK(m.rfind("Graph::parse: line ", 0) == 0);
    }
    CHECK(parse_error(text.substr(0, text.find("return"))) == "Graph::parse: line 3: expected '%'");
  }

  TEST_CASE("verify names a node that uses a value before it is defined") {
    Graph g("g", {f32({2})});
    GraphValue a = op(OpId::Neg, {g.inputs()[0]});
    g.output_values({op(OpId::Abs, {a})});
    g.verify();
    std::swap(g.mutable_nodes()[1], g.mutable_nodes()[2]);
    CHECK(error_of<ValueError>([&] { g.verify(); }) == "verify: graph 'g' node 1: uses %1 before it is defined");
  }

  // ---- dead-code elimination ------------------------------------------------------

  TEST_CASE("dead_code_elimination removes what reaches no output and keeps every input") {
    Graph g("g", {f32({3}), f32({3})});
    GraphValue x = g.inputs()[0];
    op(OpId::Exp, {x});                                    // unused op
    GraphValue c = constant(g, {1, 2, 3});                 // used only by dead code
    op(OpId::Add, {op(OpId::Neg, {x}), c});
    g.add_weight("unused", f32({3}));
    GraphValue y = op(OpId::Abs, {x});
    g.output_values({y, x});
    REQUIRE(g.num_nodes() == 8);
    check_pass(g, dead_code_elimination, {{"unused", random_tensor({3}, DType::float32, 1)}});
    CHECK(g.to_text() ==
          "graph @g(%0: float32[3] cpu, %1: float32[3] cpu) {\n"
          "  %2 = abs(%0) : float32[3] cpu\n"
          "  return %2, %0\n"
          "}\n");
    // Nothing left to remove: the graph stays as it is.
    const std::string text = g.to_text();
    dead_code_elimination(g);
    CHECK(g.to_text() == text);
  }

  TEST_CASE("dead_code_elimination drops unused calls and keeps subgraph signatures") {
    Graph g("main", {f32({2, 3})});
    Graph& body = g.define_subgraph("block", {f32({2, 3})});
    {
      GraphValue bx = body.inputs()[0];
      op(OpId::Exp, {bx});  // dead inside the body
      body.output_values({op(OpId::Neg, {bx})});
    }
    GraphValue x = g.inputs()[0];
    g.add_call("block", std::vector<GraphValue>{x}, "unused.");
    GraphValue used = g.add_call("block", std::vector<GraphValue>{x}, "used.")[0];
    g.output_values({used});
    check_pass(g, dead_code_elimination);
    CHECK(count(g, NodeKind::call) == 1);
    CHECK(g.nodes().back().prefix == "used.");
    CHECK(g.subgraph("block")->num_nodes() == 3);  // a pass touches only the graph it is given
    dead_code_elimination(*g.subgraph("block"));
    g.verify();
    CHECK(g.subgraph("block")->num_nodes() == 2);
  }

  // ---- common-subexpression elimination ------------------------------------------------

  TEST_CASE("common_subexpression_elimination merges equal ops in chains and equal constants") {
    Graph g("g", {f32({2, 3})});
    GraphValue x = g.inputs()[0];
    GraphValue c1 = constant(g, {1, 2, 3}), c2 = constant(g, {1, 2, 3});
    GraphValue a1 = op(OpId::Add, {op(OpId::Exp, {x}), c1});
    GraphValue a2 = op(OpId::Add, {op(OpId::Exp, {x}), c2});  // same after exp and the constants merge
    GraphValue s1 = op(OpId::Sum, {a1}, ints({1}));
    GraphValue s2 = op(OpId::Sum, {a2}, ints({0}));          // different attrs: stays
    g.output_values({a1, a2, s1, s2});
    check_pass(g, [](Graph& h) {
      common_subexpression_elimination(h);
      dead_code_elimination(h);
    });
    CHECK(g.to_text() ==
          "graph @g(%0: float32[2, 3] cpu) {\n"
          "  %1 = constant 0x0000803f0000004000004040 : float32[3] cpu\n"
          "  %2 = exp(%0) : float32[2, 3] cpu\n"
          "  %3 = add(%2, %1) : float32[2, 3] cpu\n"
          "  %4 = sum(%3) {ints=[1]} : float32[2] cpu\n"
          "  %5 = sum(%3) {ints=[0]} : float32[3] cpu\n"
          "  return %3, %3, %4, %5\n"
          "}\n");
  }

  TEST_CASE("common_subexpression_elimination keeps apart what differs in a bit") {
    Graph g("g", {f32({3}), f32({3})});
    GraphValue x = g.inputs()[0], y = g.inputs()[1];
    // +0.0 and -0.0 constants, and pad values, differ only in the sign bit.
    GraphValue pz = scalar_const(g, 0.0), nz = scalar_const(g, -0.0);
    Attrs p0 = ints({1, 1}), p1 = ints({1, 1});
    p1.scalar = -0.0;
    // the same constant bytes with another dtype or shape
    GraphValue i1 = constant(g, {1, 0}, DType::int32), i2 = constant(g, {1}, DType::int64);
    GraphValue i3 = constant(g, {1, 0}, DType::int32, {2, 1});
    g.output_values({op(OpId::Add, {x, pz}), op(OpId::Add, {x, nz}), op(OpId::Pad, {x}, p0), op(OpId::Pad, {x}, p1),
                     op(OpId::Add, {x, y}), op(OpId::Add, {y, x}), i1, i2, i3, g.inputs()[0], g.inputs()[1]});
    const size_t n = g.num_nodes();
    check_pass(g, common_subexpression_elimination);
    CHECK(g.num_nodes() == n);  // inputs are never merged, even of equal type; add is not reordered
  }

  TEST_CASE("common_subexpression_elimination is linear: a long chain of duplicates merges in one walk") {
    Graph g("g", {f32({4})});
    GraphValue a = g.inputs()[0], b = g.inputs()[0];
    for (int i = 0; i < 2000; ++i) {
      a = op(OpId::Sin, {a});
      b = op(OpId::Sin, {b});
    }
    g.output_values({a, b});
    common_subexpression_elimination(g);
    g.verify();
    CHECK(g.num_nodes() == 2001);
    CHECK(g.output_ids()[0] == g.output_ids()[1]);
  }

  // ---- constant folding -----------------------------------------------------------------

  TEST_CASE("constant_folding evaluates constant subtrees with the eager kernels") {
    Graph g("g", {f32({3})});
    GraphValue x = g.inputs()[0];
    GraphValue c1 = constant(g, {0.1, 0.2, 0.3}), c2 = constant(g, {0.7, -1e30, 3});
    GraphValue folded = op(OpId::Exp, {op(OpId::Add, {c1, c2})});  // a chain: add, then exp
    GraphValue r = op(OpId::Reshape, {op(OpId::Sum, {c2}, ints({0}, 0, true))}, ints({}));
    g.output_values({op(OpId::Mul, {x, folded}), r});
    check_pass(g, [](Graph& h) {
      constant_folding(h);
      dead_code_elimination(h);
    });
    CHECK(count(g, NodeKind::op) == 1);
    CHECK(count(g, NodeKind::constant) == 2);
    // The folded bits are the eager kernels' bits.
    const Tensor a = Tensor::from_vector(std::vector<double>{0.1, 0.2, 0.3}).to(DType::float32);
    const Tensor b = Tensor::from_vector(std::vector<double>{0.7, -1e30, 3}).to(DType::float32);
    const Tensor want = exp(add(a, b));
    const Tensor& got = g.node(g.producer(g.node(g.num_nodes() - 1).inputs[1])).data;
    REQUIRE(got.numel() == 3);
    CHECK(std::memcmp(got.data_ptr(), want.contiguous().data_ptr(), 12) == 0);
  }

  TEST_CASE("constant_folding makes a private copy of view results") {
    Graph g("g");
    const Tensor data = Tensor::from_vector(std::vector<float>{1, 2, 3, 4, 5, 6}, {2, 3});
    GraphValue c = g.add_constant(data, /*copy=*/false);
    g.output_values({op(OpId::Permute, {c}, ints({1, 0})), op(OpId::Reshape, {c}, ints({6}))});
    constant_folding(g);
    dead_code_elimination(g);
    g.verify();
    REQUIRE(count(g, NodeKind::constant) == 2);
    for (const Node& n : g.nodes()) {
      CHECK(n.data.is_contiguous());
      CHECK(n.data.buffer().data() != data.buffer().data());
    }
    CHECK(g.node(0).data.to_vector<float>() == std::vector<float>{1, 4, 2, 5, 3, 6});
  }

  TEST_CASE("constant_folding respects max_elements") {
    Graph g("g");
    GraphValue big = g.add_constant(Tensor::from_vector(std::vector<float>(2000, 1.5f)));
    GraphValue sq = op(OpId::Square, {big});
    GraphValue total = op(OpId::Sum, {big}, ints({}));  // a small result of a large constant folds
    g.output_values({sq, total});
    check_pass(g, [](Graph& h) { constant_folding(h); });
    CHECK(count_op(g, OpId::Square) == 1);
    CHECK(count_op(g, OpId::Sum) == 0);
    check_pass(g, [](Graph& h) { constant_folding(h, 4096); });
    CHECK(count(g, NodeKind::op) == 0);
    check_pass(g, [](Graph& h) { constant_folding(h, -1); });  // nothing to fold, nothing breaks
  }

  TEST_CASE("constant_folding leaves an op whose kernel throws; the error surfaces at run time") {
    Graph g("g");
    GraphValue num = constant(g, {7, -7}, DType::int32), zero = constant(g, {2, 0}, DType::int32);
    GraphValue div0 = op(OpId::FloorDivide, {num, zero});  // integer division by zero
    GraphValue fine = op(OpId::FloorDivide, {num, constant(g, {2, 2}, DType::int32)});
    g.output_values({div0, fine});
    constant_folding(g);
    g.verify();
    CHECK(count_op(g, OpId::FloorDivide) == 1);
    CHECK(g.node(g.producer(g.output_ids()[1])).data.to_vector<int32_t>() == std::vector<int32_t>{3, -4});
    CHECK(error_of<ValueError>([&] { run(g, {}); }).rfind("floor_divide", 0) == 0);
  }

  TEST_CASE("constant_folding inside a graph context runs eagerly and records nothing there") {
    Graph host("host", {f32({2})});
    Graph g("g");
    GraphValue c = constant(g, {1, 2, 3, 4, 5, 6}, DType::float32, {2, 3});
    Attrs ln = ints({0, 0});
    ln.scalar = 1e-5;
    g.output_values({op(OpId::LayerNorm, {c}, ln), op(OpId::Var, {c}, ints({1}))});
    {
      GraphRealizationContext ctx(host);
      constant_folding(g);
    }
    g.verify();
    CHECK(count(g, NodeKind::op) == 0);
    CHECK(host.num_nodes() == 1);
    // numpy: np.var([[1, 2, 3], [4, 5, 6]], axis=1, ddof=0) = [2/3, 2/3]
    const std::vector<float> var = g.node(g.producer(g.output_ids()[1])).data.to_vector<float>();
    CHECK(var == std::vector<float>{2.f / 3.f, 2.f / 3.f});
  }

  // ---- algebraic simplification -------------------------------------------------------------

  TEST_CASE("algebraic_simplification removes exact arithmetic identities") {
    Graph g("g", {f32({3, 4}), TensorType(DType::int32, {3, 4})});
    GraphValue x = g.inputs()[0], i = g.inputs()[1];
    std::vector<GraphValue> out = {
        op(OpId::Mul, {x, scalar_const(g, 1.0)}),                         // x * 1
        op(OpId::Mul, {constant(g, {1, 1, 1, 1}), x}),                    // ones[4] * x: no broadcast of x
        op(OpId::Add, {x, scalar_const(g, -0.0)}),                        // x + (-0.0)
        op(OpId::Add, {scalar_const(g, 0.0, DType::int32), i}),           // 0 + i
        op(OpId::Sub, {x, scalar_const(g, 0.0)}),                         // x - (+0.0)
        op(OpId::Div, {x, scalar_const(g, 1.0)}),                         // x / 1
        op(OpId::Neg, {op(OpId::Neg, {x})}),                              // neg(neg(x))
        op(OpId::Mul, {i, scalar_const(g, 1.0, DType::int32)}),           // i * 1
    };
    g.output_values(out);
    check_pass(g, [](Graph& h) {
      algebraic_simplification(h);
      dead_code_elimination(h);
    });
    CHECK(g.num_nodes() == 2);
    const std::vector<int32_t> want = {0, 0, 0, 1, 0, 0, 0, 1};
    CHECK(g.output_ids() == want);
    // neg(neg(x)) -> x needs IEEE negation. numpy: np.negative(np.float32(0.0)) is -0.0
    // (a kernel computing 0 - x gives +0.0, and neg(neg(-0.0)) = +0.0).
    CHECK(std::signbit(neg(Tensor::from_vector(std::vector<float>{0.0f})).item<float>()));
  }

  TEST_CASE("algebraic_simplification keeps what is not an identity") {
    Graph g("g", {f32({3, 4}), TensorType(DType::int32, {3, 4}), f32({4})});
    GraphValue x = g.inputs()[0], i = g.inputs()[1], v = g.inputs()[2];
    std::vector<GraphValue> out = {
        op(OpId::Add, {x, scalar_const(g, 0.0)}),                        // -0.0 + 0.0 = +0.0
        op(OpId::Sub, {x, scalar_const(g, -0.0)}),                       // -0.0 - (-0.0) = +0.0
        op(OpId::Mul, {i, scalar_const(g, 1.0)}),                        // int32 * float32: promotes
        op(OpId::Div, {i, scalar_const(g, 1.0, DType::int32)}),          // true division gives float32
        op(OpId::Mul, {x, scalar_const(g, 1.0, DType::float64)}),        // promotes to float64
        op(OpId::Mul, {v, g.add_constant(Tensor::from_vector(std::vector<float>(12, 1.f), {3, 4}))}),  // broadcasts v
        op(OpId::Mul, {x, constant(g, {1, 1, 1, 2})}),                   // not all ones
        op(OpId::Sub, {scalar_const(g, 0.0), x}),                        // 0 - x
        op(OpId::Div, {scalar_const(g, 1.0), x}),                        // 1 / x
        op(OpId::Mul, {x, op(OpId::Exp, {scalar_const(g, 0.0)})}),       // one, but not a constant (yet)
    };
    g.output_values(out);
    const size_t n = g.num_nodes();
    check_pass(g, algebraic_simplification);
    CHECK(g.num_nodes() == n);
    // Why x + 0.0 must stay: it turns -0.0 into +0.0.
    const Tensor nz = Tensor::from_vector(std::vector<float>{-0.0f});
    CHECK_FALSE(std::signbit(add(nz, Tensor::from_vector(std::vector<float>{0.0f})).item<float>()));
  }

  TEST_CASE("algebraic_simplification composes permutes and reshapes") {
    Graph g("g", {f32({2, 3, 4})});
    GraphValue x = g.inputs()[0];
    GraphValue inverse = op(OpId::Permute, {op(OpId::Permute, {x}, ints({2, 0, 1}))}, ints({1, 2, 0}));
    GraphValue composed = op(OpId::Permute, {op(OpId::Permute, {x}, ints({-1, 0, 1}))}, ints({0, 2, 1}));
    GraphValue identity = op(OpId::Permute, {x}, ints({0, 1, 2}));
    GraphValue rr = op(OpId::Reshape, {op(OpId::Reshape, {op(OpId::Reshape, {x}, ints({6, -1}))}, ints({-1}))},
                       ints({4, 6}));
    GraphValue back = op(OpId::Reshape, {op(OpId::Reshape, {x}, ints({24}))}, ints({2, 3, -1}));
    GraphValue nn = op(OpId::Neg, {op(OpId::Neg, {op(OpId::Neg, {x})})});
    g.output_values({inverse, composed, identity, rr, back, nn});
    check_pass(g, [](Graph& h) {
      algebraic_simplification(h);
      dead_code_elimination(h);
    });
    CHECK(g.to_text() ==
          "graph @g(%0: float32[2, 3, 4] cpu) {\n"
          "  %1 = permute(%0) {ints=[2, 1, 0]} : float32[4, 3, 2] cpu\n"
          "  %2 = reshape(%0) {ints=[4, 6]} : float32[4, 6] cpu\n"
          "  %3 = neg(%0) : float32[2, 3, 4] cpu\n"
          "  return %0, %1, %0, %2, %0, %3\n"
          "}\n");
  }

  TEST_CASE("algebraic_simplification drops the copy after a reshape unless it is a graph output") {
    // A reshape eager copies (of a permuted value) traces as the reshape and
    // a same-dtype cast: as values the cast is the reshape.
    Graph g("g", {f32({2, 3, 4}), f32({12, 5})});
    GraphValue x = g.inputs()[0], w = g.inputs()[1];
    Attrs to_f32;
    to_f32.dtype = DType::float32;
    Attrs to_f64;
    to_f64.dtype = DType::float64;
    GraphValue merged = op(OpId::Reshape, {op(OpId::Permute, {x}, ints({1, 0, 2}))}, ints({3, 8}));
    GraphValue copied = op(OpId::Cast, {merged}, to_f32);
    GraphValue product = op(OpId::Matmul, {op(OpId::Reshape, {copied}, ints({2, 12})), w});
    GraphValue out_copy = op(OpId::Cast, {op(OpId::Reshape, {x}, ints({4, 6}))}, to_f32);  // a result: stays
    GraphValue widened = op(OpId::Cast, {op(OpId::Reshape, {x}, ints({24}))}, to_f64);     // a real cast
    GraphValue of_permute = op(OpId::Cast, {op(OpId::Permute, {x}, ints({2, 1, 0}))}, to_f32);  // no reshape
    g.output_values({product, out_copy, widened, op(OpId::Neg, {of_permute})});
    check_pass(g, [](Graph& h) {
      algebraic_simplification(h);
      dead_code_elimination(h);
    });
    CHECK(count_op(g, OpId::Cast) == 3);
    const Node& mm = g.node(g.producer(g.output_ids()[0]));
    REQUIRE(mm.op == OpId::Matmul);
    const Node& a = g.node(g.producer(mm.inputs[0]));  // reshape(reshape(permute)) composed, no cast between
    CHECK(a.op == OpId::Reshape);
    CHECK(g.node(g.producer(a.inputs[0])).op == OpId::Permute);
    CHECK(g.node(g.producer(g.output_ids()[1])).op == OpId::Cast);
  }

  TEST_CASE("algebraic_simplification of broadcast_to") {
    Graph g("g", {f32({3, 4})});
    GraphValue x = g.inputs()[0];
    GraphValue same = op(OpId::BroadcastTo, {x}, ints({3, 4}));
    GraphValue small = op(OpId::BroadcastTo, {scalar_const(g, 2.5)}, ints({3, 4}));
    GraphValue from_1 = op(OpId::BroadcastTo, {constant(g, {-0.0}, DType::float16, {1, 1})}, ints({2, 2}));
    GraphValue large = op(OpId::BroadcastTo, {scalar_const(g, 2.5)}, ints({64, 64}));
    GraphValue not_one = op(OpId::BroadcastTo, {constant(g, {1, 2, 3, 4})}, ints({2, 4}));
    g.output_values({same, op(OpId::Add, {x, small}), from_1, large, not_one});
    check_pass(g, [](Graph& h) {
      algebraic_simplification(h);
      dead_code_elimination(h);
    });
    CHECK(g.output_ids()[0] == 0);
    CHECK(count_op(g, OpId::BroadcastTo) == 2);  // the 4096-element one and the non-scalar one
    const Node& c = g.node(g.producer(g.output_ids()[2]));
    REQUIRE(c.kind == NodeKind::constant);
    CHECK(c.data.dtype() == DType::float16);
    CHECK(c.data.shape() == Shape{2, 2});
    for (double v : kt::values(c.data)) CHECK(std::signbit(v));
  }

  // ---- shape canonicalisation ---------------------------------------------------------------

  TEST_CASE("canonicalize_shapes normalises axes so CSE catches more") {
    Graph g("g", {f32({2, 3, 4})});
    GraphValue x = g.inputs()[0], idx = constant(g, {0, 2, 1, 1, 0}, DType::int64);
    std::vector<GraphValue> out = {
        op(OpId::Sum, {x}, ints({-1, 0}, 0, true)), op(OpId::Sum, {x}, ints({0, 2}, 0, true)),
        op(OpId::Sum, {x}, ints({})),
        op(OpId::Softmax, {x}, axis_attr(-1)), op(OpId::Softmax, {x}, axis_attr(2)),
        op(OpId::CumSum, {x}, axis_attr(-2)),
        op(OpId::Reshape, {x}, ints({-1, 4})), op(OpId::Reshape, {x}, ints({6, 4})),
        op(OpId::Permute, {x}, ints({-1, 0, -2})),
        op(OpId::Select, {x}, ints({-1}, -1)), op(OpId::Select, {x}, ints({3}, 2)),
        op(OpId::Flip, {x}, ints({-1, 0})), op(OpId::Squeeze, {op(OpId::Unsqueeze, {x}, axis_attr(-1))}, ints({-1})),
        op(OpId::Concat, {x, x}, axis_attr(-3)),
        op(OpId::OneHot, {idx}, axis_attr(3)),
    };
    g.output_values(out);
    check_pass(g, canonicalize_shapes);
    CHECK(g.to_text() ==
          "graph @g(%0: float32[2, 3, 4] cpu) {\n"
          "  %1 = constant 0x00000000000000000200000000000000010000000000000001000000000000000000000000000000 : int64[5] cpu\n"
          "  %2 = sum(%0) {ints=[0, 2], flag=true} : float32[1, 3, 1] cpu\n"
          "  %3 = sum(%0) {ints=[0, 2], flag=true} : float32[1, 3, 1] cpu\n"
          "  %4 = sum(%0) : float32[] cpu\n"
          "  %5 = softmax(%0) {axis=2} : float32[2, 3, 4] cpu\n"
          "  %6 = softmax(%0) {axis=2} : float32[2, 3, 4] cpu\n"
          "  %7 = cumsum(%0) {axis=1} : float32[2, 3, 4] cpu\n"
          "  %8 = reshape(%0) {ints=[6, 4]} : float32[6, 4] cpu\n"
          "  %9 = reshape(%0) {ints=[6, 4]} : float32[6, 4] cpu\n"
          "  %10 = permute(%0) {ints=[2, 0, 1]} : float32[4, 2, 3] cpu\n"
          "  %11 = select(%0) {ints=[3], axis=2} : float32[2, 3] cpu\n"
          "  %12 = select(%0) {ints=[3], axis=2} : float32[2, 3] cpu\n"
          "  %13 = flip(%0) {ints=[0, 2]} : float32[2, 3, 4] cpu\n"
          "  %14 = unsqueeze(%0) {axis=3} : float32[2, 3, 4, 1] cpu\n"
          "  %15 = squeeze(%14) {ints=[3]} : float32[2, 3, 4] cpu\n"
          "  %16 = concat(%0, %0) : float32[4, 3, 4] cpu\n"
          "  %17 = one_hot(%1) {axis=3} : float32[5, 3] cpu\n"
          "  return %2, %3, %4, %5, %6, %7, %8, %9, %10, %11, %12, %13, %15, %16, %17\n"
          "}\n");
    common_subexpression_elimination(g);
    g.verify();
    CHECK(count_op(g, OpId::Sum) == 2);
    CHECK(count_op(g, OpId::Softmax) == 1);
    CHECK(count_op(g, OpId::Reshape) == 1);
    CHECK(count_op(g, OpId::Select) == 1);
  }

  // ---- the pipeline -----------------------------------------------------------------------

  TEST_CASE("optimize reaches a fixed point and cleans subgraph bodies") {
    Graph g("main", {f32({4, 8}), f32({8})});
    Graph& body = g.define_subgraph("layer", {f32({4, 8})});
    {
      GraphValue bx = body.inputs()[0];
      GraphValue w = body.add_weight("scale", f32({8}), true);
      GraphValue one = op(OpId::Add, {scalar_const(body, 0.25), scalar_const(body, 0.75)});  // folds to 1
      GraphValue t = op(OpId::Mul, {op(OpId::Mul, {bx, w}), one});                           // then * 1 goes
      op(OpId::Exp, {t});                                                                     // dead
      body.output_values({op(OpId::Tanh, {t})});
    }
    GraphValue x = g.inputs()[0], b = g.inputs()[1];
    GraphValue h1 = g.add_call("layer", std::vector<GraphValue>{x}, "layers.0.")[0];
    GraphValue h2 = g.add_call("layer", std::vector<GraphValue>{h1}, "layers.1.")[0];
    // the same bias add twice, once through a reshape round trip and negative axes
    GraphValue bb = op(OpId::Reshape, {op(OpId::Reshape, {b}, ints({2, -1}))}, ints({-1}));
    GraphValue y1 = op(OpId::Add, {h2, b});
    GraphValue y2 = op(OpId::Add, {h2, bb});
    GraphValue s1 = op(OpId::Sum, {y1}, ints({-1}));
    GraphValue s2 = op(OpId::Sum, {y2}, ints({1}));
    GraphValue k = op(OpId::Sum, {op(OpId::BroadcastTo, {scalar_const(g, 3.0)}, ints({2, 2}))}, ints({}));
    g.output_values({op(OpId::Mul, {op(OpId::Sub, {s1, s2}), k}), s1});
    const Weights w = {{"layers.0.scale", random_tensor({8}, DType::float32, 3)},
                       {"layers.1.scale", random_tensor({8}, DType::float32, 4)}};
    check_pass(g, optimize, w);
    CHECK(g.to_text() ==
          "graph @layer(%0: float32[4, 8] cpu) {\n"
          "  %1 = weight \"scale\" placeholder : float32[8] cpu\n"
          "  %2 = mul(%0, %1) : float32[4, 8] cpu\n"
          "  %3 = tanh(%2) : float32[4, 8] cpu\n"
          "  return %3\n"
          "}\n"
          "graph @main(%0: float32[4, 8] cpu, %1: float32[8] cpu) {\n"
          "  %2 = call @layer(%0) {prefix=\"layers.0.\"} : float32[4, 8] cpu\n"
          "  %3 = call @layer(%2) {prefix=\"layers.1.\"} : float32[4, 8] cpu\n"
          "  %4 = add(%3, %1) : float32[4, 8] cpu\n"
          "  %5 = sum(%4) {ints=[1]} : float32[4] cpu\n"
          "  %6 = constant 0x00004041 : float32[] cpu\n"
          "  %7 = sub(%5, %5) : float32[4] cpu\n"
          "  %8 = mul(%7, %6) : float32[4] cpu\n"
          "  return %8, %5\n"
          "}\n");
    const std::string text = g.to_text();
    optimize(g);
    CHECK(g.to_text() == text);
  }

  TEST_CASE("optimize works on a graph with nothing to do and on an empty graph") {
    Graph e("empty");
    optimize(e);
    e.verify();
    CHECK(e.num_nodes() == 0);
    Graph g("g", {f32({2})});
    g.output_values({g.inputs()[0], g.inputs()[0]});
    check_pass(g, optimize);
    CHECK(g.num_nodes() == 1);
  }
}
