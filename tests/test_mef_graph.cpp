// MEF files with the graph in binary (the GRPB section, jit/mef_graph.h): the
// graph it builds is the one Graph::parse builds from the text section (the
// same nodes, value ids, types, attributes and constant bytes), a read with
// it computes bitwise what the compiled callable computes, a file without it
// (an older kiln's) or with another layout version reads through the text,
// and every kind of damage to the section is a ValueError naming 'GRPB' and
// the byte, never a crash.
#include <cstring>
#include <functional>

#include "../jit/mef.h"
#include "../jit/mef_graph.h"
#include "../jit/mef_plan.h"
#include "../jit/plan.h"
#include "same_bits.h"
#include "test_util.h"

using namespace kiln;

namespace {

TensorLayout f32(Shape s) { return TensorLayout(DType::float32, std::move(s)); }

struct Case {
  const char* name;
  std::function<CompiledCallable()> make;
  std::function<std::vector<Tensor>()> inputs;
  std::map<std::string, Tensor> weights = {};
};

std::vector<Case> cases() {
  static nn::Linear lin(4, 3);
  return {
      {"GEMM chain with constants (the benchmark's graph, shorter)",
       [] {
         return compile([](Tensor x, Tensor w) {
           Tensor h = x;
           for (int i = 0; i < 6; ++i) h = tanh(matmul(h, w) + static_cast<float>(i) * 0.25f);
           return h;
         })(f32({4, 8}), f32({8, 8}));
       },
       [] { return std::vector<Tensor>{random::normal({4, 8}), random::normal({8, 8}) * 0.3f}; }},
      {"attributes of every kind: ints, axis, scalar, flag, dtype; views; a bool and a float64 constant",
       [] {
         Tensor c = tensor({1.f, 2.f, 3.f});
         return compile([c](Tensor x, Tensor y) {
           Tensor m = max(x, {1}, true);                         // ints, flag
           Tensor s = softmax(x, 0);                             // axis
           Tensor v = var(x, {1}, 0.0);                          // scalar
           Tensor w = where(y > c, y, c).to(DType::float64);     // dtype, a bool intermediate
           return std::make_tuple(cumsum(exp(x - m), 1) + s, v, reshape(transpose(x, 0, 1), {6}), w);
         })(f32({3, 2}), f32({3}));
       },
       [] { return std::vector<Tensor>{random::normal({3, 2}), random::normal({3})}; }},
      {"weights",
       [] {
         CompileOptions o;
         o.weights = lin.state_dict();
         return compile([](Tensor x) { return relu(lin(x)); }, o)(f32({2, 4}));
       },
       [] { return std::vector<Tensor>{random::normal({2, 4})}; },
       lin.state_dict()},
  };
}

mef::Contents contents_of(const CompiledCallable& run, bool binary = true) {
  const engine::CompiledModel& art = run.engine_model().artifact();
  mef::Contents c;
  c.graph_text = art.graph().to_text();
  if (binary) c.graph_binary = mef::encode_graph_binary(art.graph());
  c.signature = run.signature();
  c.weights = art.weight_slots();
  c.code = mef::code_of(art.plan());
  c.plan = mef::encode_plan(art.plan());
  return c;
}

std::vector<Tensor> run_model(const std::shared_ptr<const engine::CompiledModel>& art, const std::vector<Tensor>& in,
                              const std::map<std::string, Tensor>& weights = {}) {
  engine::Model m(art, weights);
  return m.execute(in);
}

void check_same(const std::vector<Tensor>& a, const std::vector<Tensor>& b) {
  REQUIRE(a.size() == b.size());
  for (size_t i = 0; i < a.size(); ++i) CHECK_MESSAGE(kt::same_bits(a[i], b[i]), "result " << i << " differs");
}

// The error decoding `payload` raises ("(no error)" if none); fails the test
// when it is not a ValueError.
std::string decode_error(std::string_view payload) {
  try {
    mef::decode_graph_binary(payload, "g.mef");
  } catch (const ValueError& e) {
    return e.what();
  } catch (const std::exception& e) {
    FAIL("not a ValueError: " << e.what());
  }
  return "(no error)";
}

std::string read_error(const std::string& bytes) {
  try {
    engine::read_bytes(bytes, "g.mef");
  } catch (const ValueError& e) {
    return e.what();
  } catch (const std::exception& e) {
    FAIL("not a ValueError: " << e.what());
  }
  return "(no error)";
}

bool contains(const std::string& s, const std::string& part) { return s.find(part) != std::string::npos; }

void put_u32(std::string& o, uint32_t v) {
  for (int i = 0; i < 4; ++i) o += static_cast<char>((v >> (8 * i)) & 0xff);
}
void put_u64(std::string& o, uint64_t v) {
  for (int i = 0; i < 8; ++i) o += static_cast<char>((v >> (8 * i)) & 0xff);
}
void put_str(std::string& o, std::string_view s) {
  put_u32(o, static_cast<uint32_t>(s.size()));
  o.append(s);
}
// float32[3] cpu: dtype, device type, index, rank, extent
void put_f32_3(std::string& o) {
  o += static_cast<char>(DType::float32);
  o += static_cast<char>(DeviceType::cpu);
  put_u32(o, 0);
  put_u32(o, 1);
  for (int i = 0; i < 8; ++i) o += static_cast<char>(i == 0 ? 3 : 0);
}

// A payload up to its nodes: layout 1, graph "main", the op names {exp},
// the types {float32[3], float32[3, 1]} (cpu), input %0 of type 0, `nodes`
// nodes to follow and no constants.
std::string exp_graph_head(uint32_t nodes) {
  std::string o;
  put_u32(o, 1);
  put_str(o, "main");
  put_u32(o, 1);
  put_str(o, "exp");
  put_u32(o, 2);
  put_f32_3(o);
  o += static_cast<char>(DType::float32);
  o += static_cast<char>(DeviceType::cpu);
  put_u32(o, 0);
  put_u32(o, 2);
  for (int i = 0; i < 8; ++i) o += static_cast<char>(i == 0 ? 3 : 0);
  for (int i = 0; i < 8; ++i) o += static_cast<char>(i == 0 ? 1 : 0);
  put_u32(o, 1);  // inputs
  put_u32(o, 0);
  put_u32(o, nodes);
  put_u64(o, 0);  // no constants
  return o;
}

}  // namespace

TEST_SUITE("mef graph") {
  TEST_CASE("the binary graph is the graph the text parses to; a read with it computes the same bits") {
    for (const Case& k : cases()) {
      const std::string name = k.name;
      CAPTURE(name);
      CompiledCallable run = k.make();
      const Graph& g = run.engine_model().artifact().graph();
      const std::string bin = mef::encode_graph_binary(g);
      REQUIRE(!bin.empty());
      CHECK(mef::graph_binary_layout(bin) == mef::kGraphLayoutVersion);
      const std::shared_ptr<Graph> from_bin = mef::decode_graph_binary(bin, "g.mef");
      const std::unique_ptr<Graph> from_text = Graph::parse(g.to_text());
      CHECK(from_bin->equals(*from_text));
      CHECK(from_bin->to_text() == from_text->to_text());
      CHECK_NOTHROW(from_bin->verify());
      // a re-encoding is the same section
      CHECK(mef::encode_graph_binary(*from_bin) == bin);

      const mef::Contents c = contents_of(run);
      const std::string bytes = mef::encode(c);
      CHECK(mef::decode(bytes, "x").graph_binary == bin);
      auto art = engine::read_bytes(bytes, "g.mef");
      CHECK(art->graph().equals(*from_text));
      CHECK(art->plan().read_note() == "");  // the PLAN section's ids hold for the binary graph
      const std::vector<Tensor> in = k.inputs();
      const std::map<std::string, Tensor>& w = k.weights;
      check_same(run.execute_raw(std::span<const Tensor>(in)), run_model(art, in, w));
      // an older kiln's file (no GRPB) reads through the text, to the same bits
      auto old = engine::read_bytes(mef::encode(contents_of(run, false)), "g.mef");
      CHECK(old->graph().equals(*from_text));
      check_same(run_model(art, in, w), run_model(old, in, w));
    }
  }

  TEST_CASE("export_mef writes GRPB; a GRPB of another layout version reads through the text") {
    CompiledCallable run = cases()[0].make();
    mef::Contents c = contents_of(run);
    REQUIRE(!c.graph_binary.empty());
    // another layout: ignored, the text is parsed
    c.graph_binary[0] = 9;
    auto art = engine::read_bytes(mef::encode(c), "g.mef");
    CHECK(art->graph().equals(*Graph::parse(c.graph_text)));
    // GRPB is used when present: a text that does not parse is not read
    mef::Contents d = contents_of(run);
    d.graph_text = "not a graph";
    CHECK(read_error(mef::encode(d)) == "(no error)");
    d.graph_binary.clear();
    CHECK(contains(read_error(mef::encode(d)), "the graph section does not parse"));
  }

  TEST_CASE("a reader of another key (other CPU features, strict mode) plans the graph GRPB gives, as it plans GRPH's") {
    const Case k = cases()[0];
    CompiledCallable run = k.make();
    const std::vector<Tensor> in = k.inputs();
    auto strict = std::make_shared<InferenceSession>(KernelOptions{.strict = true});
    auto with_bin = engine::read_bytes(mef::encode(contents_of(run)), "g.mef", strict);
    auto text_only = engine::read_bytes(mef::encode(contents_of(run, false)), "g.mef", strict);
    CHECK(with_bin->plan().read_note().find("planned on reading: the file's plan was made for '") == 0);
    CHECK(with_bin->plan().describe(false) == text_only->plan().describe(false));
    check_same(run_model(with_bin, in), run_model(text_only, in));
    // and strict mode keeps eager's bits
    const std::vector<Tensor> got = run_model(with_bin, in);
    Tensor h = in[0];
    for (int i = 0; i < 6; ++i) h = tanh(matmul(h, in[1]) + static_cast<float>(i) * 0.25f);
    CHECK(kt::same_bits(got[0], h));
  }

  TEST_CASE("each kind of damage to GRPB is a ValueError naming GRPB, the byte and the field") {
    const std::string pre = "engine::read: 'g.mef': section 'GRPB' (the optimised graph, binary) is malformed at byte ";
    // a hand-written payload: exp(%0) with result float32[3]
    auto payload = [](uint32_t version, const std::string& op, uint32_t operand, uint32_t result_type, uint8_t mask) {
      std::string o;
      put_u32(o, version);
      put_str(o, "main");
      put_u32(o, 1);
      put_str(o, op);
      put_u32(o, 1);  // types
      put_f32_3(o);
      put_u32(o, 1);  // inputs
      put_u32(o, 0);
      put_u32(o, 1);  // nodes
      put_u64(o, 0);  // no constants
      o += static_cast<char>(1);
      put_u32(o, 0);  // op name 0
      put_u32(o, 1);
      put_u32(o, operand);
      o += static_cast<char>(mask);
      put_u32(o, result_type);
      put_u32(o, 1);  // results
      put_u32(o, 1);
      return o;
    };
    const std::string good = payload(1, "exp", 0, 0, 0);
    REQUIRE(decode_error(good) == "(no error)");
    CHECK(decode_error(payload(2, "exp", 0, 0, 0)) == pre + "0 of " + std::to_string(good.size()) +
                                                          ": layout version 2 (this kiln reads 1)");
    CHECK(contains(decode_error(payload(1, "bogus", 0, 0, 0)), "unknown op 'bogus'"));
    CHECK(contains(decode_error(payload(1, "exp", 1, 0, 0)), "an operand %1 is not an earlier value (1 are defined)"));
    CHECK(contains(decode_error(payload(1, "exp", 0, 1, 0)), "an op node's result type 1 is out of range (1 types)"));
    CHECK(contains(decode_error(payload(1, "exp", 0, 0, 64)), "attribute mask 64"));
    // a well-formed node whose type is not the op's
    CHECK(contains(decode_error(payload(1, "sum", 0, 0, 0)),
                   "section 'GRPB' (the optimised graph, binary) fails verification: node 1 (sum, at byte"));
    // truncated anywhere: the field it ends in
    for (size_t n = 0; n < good.size(); ++n) {
      const std::string e = decode_error(good.substr(0, n));
      CAPTURE(n);
      CHECK(contains(e, pre));
      const bool named = contains(e, "bytes for") || contains(e, "items, but only");
      CHECK(named);
    }
    CHECK(contains(decode_error(good + "x"), "1 unexpected bytes at the end"));
    // a constant pool that does not match the constants
    {
      std::string bad_pool = good;
      const size_t at = good.size() - 4 - 4 - 4 - 1 - 4 - 4 - 4 - 1 - 8;  // the pool field, before the node
      bad_pool[at] = 64;
      CHECK(contains(decode_error(bad_pool), "at byte " + std::to_string(at) +
                                                 " of " + std::to_string(good.size()) +
                                                 ": a constant pool of 64 bytes for constants of 0"));
      bad_pool[at + 7] = 1;
      CHECK(contains(decode_error(bad_pool), "bytes of nodes"));
    }
    // in a file
    CompiledCallable run = cases()[0].make();
    mef::Contents c = contents_of(run);
    c.graph_binary.resize(c.graph_binary.size() / 2);
    CHECK(contains(read_error(mef::encode(c)), "engine::read: 'g.mef': section 'GRPB' (the optimised graph, binary) is "
                                               "malformed at byte"));
  }

  TEST_CASE("the type check runs per node even where it is remembered: a repeated node with another type is refused") {
    // two exp nodes on %0; the second claims float32[3, 1]
    std::string o = exp_graph_head(2);
    for (uint32_t t : {0u, 1u}) {
      o += static_cast<char>(1);
      put_u32(o, 0);
      put_u32(o, 1);
      put_u32(o, 0);
      o += static_cast<char>(0);
      put_u32(o, t);
    }
    put_u32(o, 1);
    put_u32(o, 2);
    CHECK(contains(decode_error(o), "fails verification: node 2 (exp, at byte"));
    CHECK(contains(decode_error(o), "exp result type float32[3, 1] cpu but the op gives float32[3] cpu"));
  }

  TEST_CASE("the type check remembers many keys: a repeat met after 20 others is found and checked") {
    // 20 exp nodes on %0 that differ in their (unused) axis attribute: 20
    // keys, more than the check keeps at hand and its table's first size;
    // then exp with axis 0 again, of the right type or of float32[3, 1]
    auto payload = [](uint32_t last_type) {
      std::string o = exp_graph_head(21);
      for (uint32_t k = 0; k < 21; ++k) {
        o += static_cast<char>(1);  // op node: exp of %0
        put_u32(o, 0);
        put_u32(o, 1);
        put_u32(o, 0);
        o += static_cast<char>(2);  // attribute mask: axis
        put_u64(o, k < 20 ? k : 0);
        put_u32(o, k < 20 ? 0 : last_type);
      }
      put_u32(o, 1);
      put_u32(o, 21);
      return o;
    };
    CHECK(decode_error(payload(0)) == "(no error)");
    const std::shared_ptr<Graph> g = mef::decode_graph_binary(payload(0), "g.mef");
    CHECK(g->num_nodes() == 22);
    CHECK_NOTHROW(g->verify());
    CHECK(contains(decode_error(payload(1)), "fails verification: node 21 (exp, at byte"));
    CHECK(contains(decode_error(payload(1)), "exp result type float32[3, 1] cpu but the op gives float32[3] cpu"));
  }

  TEST_CASE("single-byte damage anywhere in GRPB: a ValueError naming GRPB, or a graph that verifies; never a crash") {
    CompiledCallable run = cases()[1].make();
    const std::string bin = mef::encode_graph_binary(run.engine_model().artifact().graph());
    REQUIRE(!bin.empty());
    int errors = 0, graphs = 0;
    for (size_t at = 0; at < bin.size(); ++at) {
      for (uint8_t x : {uint8_t{0x01}, uint8_t{0x80}, uint8_t{0xff}}) {
        std::string b = bin;
        b[at] = static_cast<char>(b[at] ^ x);
        CAPTURE(at);
        std::shared_ptr<Graph> g;
        try {
          g = mef::decode_graph_binary(b, "g.mef");
        } catch (const ValueError& e) {
          CHECK(contains(e.what(), "section 'GRPB' (the optimised graph, binary)"));
          ++errors;
          continue;
        }
        CHECK_NOTHROW(g->verify());
        ++graphs;
      }
    }
    CHECK(errors > 0);
    CHECK(graphs > 0);  // e.g. a constant's bytes
  }
}
