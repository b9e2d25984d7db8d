// MEF export/read, rebuilding callables (from_compiled, from_engine_model),
// a session's MEF folders, capture/replay, and TreeDef serialization.
#include <sys/stat.h>
#include <unistd.h>

#include <filesystem>
#include <fstream>
#include <sstream>
#include <thread>

#include "../io/npy.h"
#include "../io/safetensors.h"
#include "../jit/mef.h"
#include "../jit/plan.h"
#include "../trace/treedef_io.h"
#include "same_bits.h"
#include "test_util.h"

using namespace kiln;
namespace fs = std::filesystem;

namespace {

TensorLayout f32(Shape s) { return TensorLayout(DType::float32, std::move(s)); }

// A fresh folder per test case, removed at the end.
struct TempDir {
  fs::path path;
  TempDir() {
    static int n = 0;
    path = fs::temp_directory_path() / ("kiln_export_test_" + std::to_string(getpid()) + "_" + std::to_string(n++));
    fs::create_directories(path);
  }
  ~TempDir() {
    std::error_code ec;
    fs::remove_all(path, ec);
  }
  std::string file(const std::string& name) const { return (path / name).string(); }
};

std::string slurp(const std::string& p) {
  std::ifstream f(p, std::ios::binary);
  return std::string((std::istreambuf_iterator<char>(f)), std::istreambuf_iterator<char>());
}
void spit(const std::string& p, const std::string& b) {
  std::ofstream f(p, std::ios::binary | std::ios::trunc);
  f.write(b.data(), static_cast<std::streamsize>(b.size()));
}

using kt::same_bits;
void check_same(const std::vector<Tensor>& a, const std::vector<Tensor>& b) {
  REQUIRE(a.size() == b.size());
  for (size_t i = 0; i < a.size(); ++i) CHECK_MESSAGE(same_bits(a[i], b[i]), "result " << i << " differs");
}

CompiledCallable reload(const CompiledCallable& c, const std::string& path, bool source = false) {
  c.export_mef(path, source);
  return CompiledCallable::from_mef(path, c.weights());
}

int fused_steps(const engine::CompiledModel& m) {
  int n = 0;
  for (const auto& s : m.plan().steps()) n += s.kind == codegen::PlanStep::Kind::fused;
  return n;
}

// A file whose sections are given, with a valid length and checksum.
std::string file_with(const std::string& graph, const engine::Signature& sig,
                      const std::vector<std::pair<std::string, TensorType>>& weights = {}) {
  return mef::encode_sections(mef::kFormatVersion, {{"GRPH", graph},
                                                    {"SIGN", mef::encode_signature(sig)},
                                                    {"WGTS", mef::encode_weights(weights)}});
}

engine::Signature sig_of(std::vector<TensorLayout> in, std::vector<TensorLayout> out) {
  engine::Signature s;
  s.in_tree.kind = s.out_tree.kind = TreeDef::Kind::tuple;
  s.in_tree.children.resize(in.size());
  s.out_tree.children.resize(out.size());
  s.in_layouts = std::move(in);
  s.out_layouts = std::move(out);
  return s;
}

const char* kNegGraph =
    "graph @main(%0: float32[3] cpu) {\n"
    "  %1 = neg(%0) : float32[3] cpu\n"
    "  return %1\n"
    "}\n";

std::string read_error(const std::string& bytes) {
  try {
    engine::read_bytes(bytes, "f.mef");
  } catch (const ValueError& e) {
    return e.what();
  }
  return "(no error)";
}

}  // namespace

TEST_SUITE("export") {
  TEST_CASE("TreeDef serialization reads back exactly; bad text is a clear error") {
    auto [l1, t1] = tree_flatten_layouts(std::make_tuple(f32({3}), std::string("a,\"b\"\\c"), 2.5, true,
                                                         std::vector<TensorLayout>{f32({1}), f32({2})},
                                                         std::map<std::string, TensorLayout>{{"k:1", f32({1})}},
                                                         std::optional<int>()));
    // control bytes, quotes, backslashes and punctuation in static strings and keys (str() escapes them)
    auto [l2, t2] = tree_flatten_layouts(std::make_tuple(
        std::string("a\"b\\c,{}:\"\n\t\x01\x7f\xc3\xa9"),
        std::map<std::string, TensorLayout>{{"k\"\\,: \n", f32({1})}, {"", f32({2})}}));
    CHECK(t2.str() == "(\"a\\\"b\\\\c,{}:\\\"\\n\\t\\x01\\x7f\xc3\xa9\", {\"\": T, \"k\\\"\\\\,: \\n\": T})");
    for (const TreeDef& t : {t1, t2, TreeDef{}}) {
      const std::string s = serialize(t);
      CHECK(parse_treedef(s) == t);
    }
    TreeDef rec;
    rec.kind = TreeDef::Kind::record;
    rec.value = "Params";
    rec.keys = {"w", "b"};
    rec.children = {TreeDef{}, TreeDef{TreeDef::Kind::static_leaf, "3", {}, {}}};
    CHECK(serialize(rec) == "R\"Params\"{\"w\":T,\"b\":S\"3\"}");
    CHECK(parse_treedef(serialize(rec)) == rec);
    CHECK_THROWS_WITH_AS(parse_treedef("(T,"), doctest::Contains("at offset 3: expected a tree node"), ValueError);
    CHECK_THROWS_WITH_AS(parse_treedef("(T)x"), doctest::Contains("unexpected characters after the tree"), ValueError);
    CHECK_THROWS_WITH_AS(parse_treedef("S\"abc"), doctest::Contains("unterminated string"), ValueError);
    CHECK_THROWS_WITH_AS(parse_treedef("Q"), doctest::Contains("expected one of T N S ( [ { R, got 'Q'"), ValueError);
    CHECK_THROWS_WITH_AS(parse_treedef(std::string(100000, '(')), doctest::Contains("nesting deeper than 256"),
                         ValueError);
  }

  TEST_CASE("round trip: export_mef -> engine::read -> from_compiled is bitwise equal") {
    TempDir d;
    SUBCASE("a fused elementwise chain") {
      auto f = [](Tensor a, Tensor b, Tensor c) { return tanh(a * b + c) * 0.5f + exp(-a); };
      CompiledCallable run = compile(f)(f32({4, 5}), f32({4, 5}), f32({5}));
      CompiledCallable back = reload(run, d.file("chain.mef"));
      Tensor a = random::normal({4, 5}), b = random::normal({4, 5}), c = random::normal({5});
      check_same(run(a, b, c).leaves, back(a, b, c).leaves);
      CHECK(back.engine_model().artifact().loaded_from_mef());
      CHECK(back.engine_model().artifact().graph().to_text() == run.engine_model().artifact().graph().to_text());
      CHECK(fused_steps(back.engine_model().artifact()) == fused_steps(run.engine_model().artifact()));
      CHECK(back.signature() == run.signature());
    }
    SUBCASE("weights bound by name, a matmul and tuple results") {
      nn::Linear lin(4, 3);
      CompileOptions o;
      o.weights = lin.state_dict();
      auto f = [&](Tensor x) {
        Tensor h = lin(x);
        return std::make_tuple(softmax(h, -1), sum(relu(h), {1}));
      };
      CompiledCallable run = compile(f, o)(f32({2, 4}));
      CompiledCallable back = reload(run, d.file("lin.mef"), true);
      Tensor x = random::normal({2, 4});
      check_same(run(x).leaves, back(x).leaves);
      const auto* sig = back.engine_model().artifact().signature();
      REQUIRE(sig != nullptr);
      CHECK(back.engine_model().artifact().weight_slots().size() == 2);
      // The source graph section is kept when asked for.
      CHECK(back.engine_model().artifact().source_graph().to_text() == run.staged().graph->to_text());
      // Other weights: the same file, bound again.
      auto w2 = lin.state_dict();
      w2["bias"] = ones({3});
      CompiledCallable other = CompiledCallable::from_mef(d.file("lin.mef"), w2);
      CompiledCallable ref(run.staged(), w2);
      check_same(ref(x).leaves, other(x).leaves);
      // Strict, as load_state_dict(strict=True): every missing and every
      // unexpected name, in one ValueError. An unexpected name used to be
      // dropped without a word (a module whose bias the file does not read
      // ran without it).
      const std::string head = "from_mef '" + d.file("lin.mef") + "': the weights given do not match the file's";
      CHECK_THROWS_WITH_AS(CompiledCallable::from_mef(d.file("lin.mef")),
                           (head + "; missing: 'weight' (float32[3, 4] cpu), 'bias' (float32[3] cpu) (the file lists 2 "
                                   "weight(s): engine::read(path)->weight_slots())")
                               .c_str(),
                           ValueError);
      auto extra = lin.state_dict();
      extra["fc2.weight"] = ones({3, 3});
      CHECK_THROWS_WITH_AS(CompiledCallable::from_mef(d.file("lin.mef"), extra),
                           (head + "; unexpected (the file's graph reads no weight of that name): 'fc2.weight' (the "
                                   "file lists 2 weight(s): engine::read(path)->weight_slots())")
                               .c_str(),
                           ValueError);
      auto typo = lin.state_dict();
      typo["bais"] = typo.at("bias");
      typo.erase("bias");
      CHECK_THROWS_WITH_AS(CompiledCallable::from_mef(d.file("lin.mef"), typo),
                           doctest::Contains("; missing: 'bias' (float32[3] cpu); unexpected (the file's graph reads no "
                                             "weight of that name): 'bais' ("),
                           ValueError);
      // from_compiled binding the weights itself is as strict (its sibling)
      auto art = engine::read(d.file("lin.mef"));
      const auto& sg = *art->signature();
      CHECK_THROWS_WITH_AS(CompiledCallable::from_compiled(art, nullptr, sg.in_layouts, sg.in_tree, sg.out_layouts,
                                                           sg.out_tree, extra),
                           ("from_compiled: the weights given do not match the file's; unexpected (the file's graph "
                            "reads no weight of that name): 'fc2.weight' (the file lists 2 weight(s): "
                            "engine::read(path)->weight_slots())"),
                           ValueError);
      CompiledCallable same = CompiledCallable::from_compiled(art, nullptr, sg.in_layouts, sg.in_tree, sg.out_layouts,
                                                              sg.out_tree, lin.state_dict());
      check_same(run(x).leaves, same(x).leaves);
    }
    SUBCASE("static arguments, nested trees and stride classes are in the signature") {
      auto f = [](std::pair<Tensor, Tensor> p, int k) {
        return std::make_tuple(p.first * static_cast<float>(k), transpose(p.second) + 1.0f);
      };
      Tensor m = random::normal({3, 2});
      CompiledCallable run = compile(f)(std::make_pair(f32({2}), transpose(m)), 3);
      CompiledCallable back = reload(run, d.file("tree.mef"));
      CHECK(back.in_tree() == run.in_tree());
      CHECK(back.in_tree().str() == "((T, T), 3)");
      CHECK(back.in_layouts()[1].stride_class == StrideClass::transposed);
      Tensor a = random::normal({2});
      check_same(run(std::make_pair(a, transpose(m)), 3).leaves, back(std::make_pair(a, transpose(m)), 3).leaves);
      CHECK_THROWS_WITH_AS(back(std::make_pair(a, transpose(m)), 4), doctest::Contains("tree structure mismatch"),
                           ValueError);
      CHECK_THROWS_WITH_AS(back(std::make_pair(a, m.transpose().contiguous()), 3),
                           doctest::Contains("argument 0.1: expected float32[2, 3] cpu (transposed)"), ValueError);
    }
    SUBCASE("captured constants are baked into the file") {
      Tensor k = tensor({1.f, -2.f, 3.f});
      auto f = [k](Tensor x) { return std::make_tuple(x * k, k + 0.0f); };
      CompiledCallable run = compile(f)(f32({3}));
      CompiledCallable back = reload(run, d.file("const.mef"));
      Tensor x = random::normal({3});
      check_same(run(x).leaves, back(x).leaves);
    }
    SUBCASE("read from a stream") {
      CompiledCallable run = compile([](Tensor x) { return x * x - 1.0f; })(f32({6}));
      run.export_mef(d.file("s.mef"));
      std::istringstream in(slurp(d.file("s.mef")));
      auto art = engine::read(in);
      CHECK(art->mef_origin().path == "<stream>");
      CHECK(art->mef_origin().format_version == mef::kFormatVersion);
      CHECK(art->mef_origin().writer.rfind("kiln ", 0) == 0);
      const auto& s = *art->signature();
      CompiledCallable back = CompiledCallable::from_compiled(art, nullptr, s.in_layouts, s.in_tree, s.out_layouts,
                                                              s.out_tree);
      Tensor x = random::normal({6});
      check_same(run(x).leaves, back(x).leaves);
    }
  }

  TEST_CASE("from_engine_model and from_compiled wrap models built elsewhere, checking what they are given") {
    auto f = [](Tensor x, Tensor y) { return matmul(x, y) * 2.0f; };
    StagedGraph s = stage(f)(f32({2, 3}), f32({3, 2}));
    auto session = InferenceSession::default_session();
    auto art = engine::compile_graph(s.graph, *session, nullptr);
    auto model = std::make_shared<engine::Model>(art, std::map<std::string, Tensor>{});
    CompiledCallable c = CompiledCallable::from_engine_model(s, art, model);
    Tensor x = random::normal({2, 3}), y = random::normal({3, 2});
    check_same(c(x, y).leaves, std::vector<Tensor>{f(x, y)});
    CHECK(&c.engine_model() == model.get());

    auto other = engine::compile_graph(stage(f)(f32({2, 3}), f32({3, 2})).graph, *session, nullptr);
    CHECK_THROWS_WITH_AS(CompiledCallable::from_engine_model(s, other, model),
                         doctest::Contains("engine_model was initialised from another artifact"), ValueError);
    CHECK_THROWS_WITH_AS(CompiledCallable::from_engine_model(s, art, nullptr), doctest::Contains("engine_model is null"),
                         ValueError);
    CHECK_THROWS_WITH_AS(
        CompiledCallable::from_compiled(art, nullptr, {f32({2, 3}), f32({3, 3})}, s.in_tree, s.out_layouts, s.out_tree),
        doctest::Contains("argument 1 is float32[3, 3] cpu in the layouts given but float32[3, 2] cpu in the graph"),
        ValueError);
    CHECK_THROWS_WITH_AS(
        CompiledCallable::from_compiled(art, nullptr, s.in_layouts, s.out_tree, s.out_layouts, s.out_tree),
        doctest::Contains("in_tree T has 1 tensor leaves for 2 in_layouts"), ValueError);
  }

  TEST_CASE("every bad file gives its own error") {
    TempDir d;
    CompiledCallable run = compile([](Tensor x) { return exp(x) + 1.0f; })(f32({3}));
    run.export_mef(d.file("good.mef"));
    const std::string good = slurp(d.file("good.mef"));
    REQUIRE(engine::read_bytes(good, "f.mef") != nullptr);
    const size_t grph = good.find("GRPH");
    REQUIRE(grph != std::string::npos);

    CHECK(read_error("") == "engine::read: 'f.mef': the file is empty, not a MEF file");
    CHECK(read_error("PK\x03\x04 a zip file") ==
          "engine::read: 'f.mef': not a MEF file (it does not start with the MEF magic \"KILNMEF\\0\")");
    std::string newer = good;  // an intact file of a later version (its checksum passes)
    newer[8] = 7;
    mef::reseal(newer);
    CHECK(read_error(newer) ==
          "engine::read: 'f.mef': written by a newer kiln: format version 7, this kiln reads up to 2; upgrade kiln to "
          "read it");
    // A damaged version field is corruption, not a newer kiln: the checksum fails.
    std::string bad_version = good;
    bad_version[11] ^= 0x01;  // the high byte of the u32 at offset 8: version 2 reads 0x01000002
    const std::string bv = read_error(bad_version);
    CHECK_MESSAGE(bv.rfind("engine::read: 'f.mef': the file is corrupted: its format version field reads 16777218 "
                           "(0x01000002), newer than the 2 this kiln reads, and its checksum does not match (stored 0x",
                           0) == 0,
                  bv);
    CHECK_MESSAGE(bv.find("upgrade") == std::string::npos, bv);
    std::string v7 = good;  // version 7 without resealing: also corruption
    v7[8] = 7;
    CHECK(read_error(v7).find("the file is corrupted: its format version field reads 7 (0x00000007)") !=
          std::string::npos);
    // a newer version in a file whose length disagrees with its header
    std::string v7long = newer + "xx";
    CHECK(read_error(v7long).find("and its header gives a total length of " + std::to_string(good.size()) +
                                  " bytes for a file of " + std::to_string(good.size() + 2)) != std::string::npos);
    CHECK(read_error(newer.substr(0, 20)).find("truncated or corrupted: its format version field reads 7") !=
          std::string::npos);
    std::string zero = good;
    zero[8] = 0;
    CHECK(read_error(zero).find("invalid format version 0") != std::string::npos);
    CHECK(read_error(good.substr(0, 16)).find("truncated: it ends inside the header (16 of 24 bytes)") !=
          std::string::npos);
    CHECK(read_error(good.substr(0, grph + 20)).find("ends inside section 'GRPH' (the optimised graph)") !=
          std::string::npos);
    CHECK(read_error(good.substr(0, good.size() - 2)).find("ends inside the checksum") != std::string::npos);
    // META GRPH GRPB SIGN WGTS CODE PLAN
    CHECK(read_error(good.substr(0, grph + 6)).find("ends inside the header of section 2 of 7") != std::string::npos);
    CHECK(read_error(good + "xx").find("has 2 bytes after its end") != std::string::npos);
    std::string flipped = good;
    flipped[grph + 40] ^= 0x20;
    CHECK(read_error(flipped).find("checksum mismatch (stored 0x") != std::string::npos);
    CHECK(read_error(flipped).find("the file is corrupted") != std::string::npos);

    const auto sig = sig_of({f32({3})}, {f32({3})});
    CHECK(read_error(file_with(kNegGraph, sig)) == "(no error)");
    std::string unparsable = kNegGraph;
    unparsable.replace(unparsable.find("neg"), 3, "bogus");
    CHECK(read_error(file_with(unparsable, sig)) ==
          "engine::read: 'f.mef': the graph section does not parse: Graph::parse: line 2: unknown op 'bogus'");
    std::string unverified = kNegGraph;
    unverified.replace(unverified.find("float32[3] cpu\n  return"), 10, "float32[4]");
    CHECK(read_error(file_with(unverified, sig)).find("the graph section fails verification: verify: graph 'main' node 1: "
                                                      "neg result type float32[4] cpu but the op gives float32[3] cpu") !=
          std::string::npos);
    CHECK(read_error(file_with(kNegGraph, sig_of({f32({3}), f32({3})}, {f32({3})}))) ==
          "engine::read: 'f.mef': the signature does not match the graph: the argument count is 2 in the signature but 1 "
          "in the graph");
    CHECK(read_error(file_with(kNegGraph, sig_of({TensorLayout(DType::float64, {3})}, {f32({3})}))) ==
          "engine::read: 'f.mef': the signature does not match the graph: argument 0 is float64[3] cpu in the signature "
          "but float32[3] cpu in the graph");
    CHECK(read_error(file_with(kNegGraph, sig_of({f32({3})}, {f32({1})}))).find("result 0 is float32[1] cpu") !=
          std::string::npos);
    engine::Signature bad_tree = sig;
    bad_tree.in_tree.children.emplace_back();
    CHECK(read_error(file_with(kNegGraph, bad_tree)).find("the argument tree (T, T) has 2 tensor leaves for 1 argument") !=
          std::string::npos);
    CHECK(read_error(file_with(kNegGraph, sig, {{"w", TensorType(DType::float32, {3})}})) ==
          "engine::read: 'f.mef': the weight list does not match the graph: the file lists {w: float32[3] cpu}, the "
          "graph reads {}");
    // A count that claims more items than the section holds.
    std::string bad_sig = mef::encode_signature(sig);
    bad_sig[3] = 0x7f;
    CHECK(read_error(mef::encode_sections(1, {{"GRPH", kNegGraph}, {"SIGN", bad_sig}, {"WGTS", mef::encode_weights({})}}))
              .find("section 'SIGN' (the signature) is malformed at byte 4") != std::string::npos);
    CHECK(read_error(mef::encode_sections(1, {{"GRPH", kNegGraph}, {"WGTS", mef::encode_weights({})}})) ==
          "engine::read: 'f.mef': the file has no section 'SIGN' (the signature)");
    CHECK(read_error(mef::encode_sections(1, {{"GRPH", kNegGraph}, {"GRPH", kNegGraph}})).find("appears twice") !=
          std::string::npos);
    // A later kiln's optional section is skipped.
    CHECK(read_error(mef::encode_sections(1, {{"GRPH", kNegGraph},
                                              {"XTRA", "anything"},
                                              {"SIGN", mef::encode_signature(sig)},
                                              {"WGTS", mef::encode_weights({})}})) == "(no error)");
    CHECK_THROWS_WITH_AS(engine::read(d.file("missing.mef")), doctest::Contains("engine::read: cannot open '"),
                         ValueError);
    spit(d.file("flipped.mef"), flipped);
    CHECK_THROWS_WITH_AS(engine::read(d.file("flipped.mef")), doctest::Contains("flipped.mef': checksum mismatch"),
                         ValueError);
    // Every cut and every single-byte change is an error, never a crash.
    for (size_t n = 0; n < good.size(); n += 7) CHECK(read_error(good.substr(0, n)) != "(no error)");
    for (size_t i = 0; i < good.size(); i += 5) {
      std::string b = good;
      b[i] = static_cast<char>(b[i] ^ 0x5a);
      CHECK(read_error(b) != "(no error)");
    }
  }

  TEST_CASE("a session exports into a folder and a second session reuses the file") {
    TempDir d;
    auto f = [](Tensor a, Tensor b) { return sigmoid(a) * b + 2.0f; };
    auto s1 = std::make_shared<InferenceSession>();
    s1->export_mefs = d.path.string();
    const auto before = engine::mef_cache_stats();
    CompileOptions o1;
    o1.session = s1;
    CompiledCallable first = compile(f, o1)(f32({8}), f32({8}));
    CHECK(engine::mef_cache_stats().exported == before.exported + 1);
    CHECK_FALSE(first.engine_model().artifact().loaded_from_mef());
    int files = 0;
    for (const auto& e : fs::directory_iterator(d.path)) {
      ++files;
      CHECK(e.path().filename().string().rfind("main-", 0) == 0);
      CHECK(e.path().extension() == ".mef");
    }
    CHECK(files == 1);

    auto s2 = std::make_shared<InferenceSession>();
    s2->precompiled_mefs = d.path.string();
    CompileOptions o2;
    o2.session = s2;
    CompiledCallable second = compile(f, o2)(f32({8}), f32({8}));  // traced again, not optimised
    CHECK(second.engine_model().artifact().loaded_from_mef());
    CHECK(engine::mef_cache_stats().loaded == before.loaded + 1);
    Tensor a = random::normal({8}), b = random::normal({8});
    check_same(first(a, b).leaves, second(a, b).leaves);
    // Another shape is another key: compiled, not loaded.
    CompiledCallable third = compile(f, o2)(f32({4}), f32({4}));
    CHECK_FALSE(third.engine_model().artifact().loaded_from_mef());
    // A damaged file is passed over (and counted), never trusted.
    for (const auto& e : fs::directory_iterator(d.path)) {
      std::string b2 = slurp(e.path().string());
      b2[b2.size() / 2] ^= 1;
      spit(e.path().string(), b2);
    }
    CompiledCallable fourth = compile(f, o2)(f32({8}), f32({8}));
    CHECK_FALSE(fourth.engine_model().artifact().loaded_from_mef());
    CHECK(engine::mef_cache_stats().rejected == before.rejected + 1);
    CHECK(engine::mef_cache_stats().last_rejection.find("checksum mismatch") != std::string::npos);
    check_same(first(a, b).leaves, fourth(a, b).leaves);
  }

  TEST_CASE("capture and replay rerun on the captured buffers and rewrite the captured outputs") {
    auto f = [](Tensor x, Tensor w) {
      Tensor h = matmul(x, w);
      return std::make_tuple(tanh(h) * 2.0f + 1.0f, sum(h, {1}), transpose(h), scalar(7.0f) + 0.0f);
    };
    CompiledCallable run = compile(f)(f32({4, 3}), f32({3, 5}));
    const engine::Model& m = run.engine_model();
    Tensor x = random::normal({4, 3}), w = random::normal({3, 5});
    std::vector<Tensor> in{x, w};
    std::vector<Tensor> outs = m.capture(42, in);
    check_same(outs, run.execute_raw(std::span<const Tensor>(in)));
    CHECK(m.num_captures() == 1);
    // New values in the same buffers: replay rewrites the same output tensors.
    std::vector<const void*> addrs;
    for (const auto& o : outs) addrs.push_back(o.data_ptr());
    for (int rep = 0; rep < 3; ++rep) {
      Tensor nx = random::normal({4, 3});
      std::memcpy(x.data_ptr(), nx.data_ptr(), 12 * sizeof(float));
      m.replay(42, in);
      check_same(outs, run.execute_raw(std::span<const Tensor>(in)));
      for (size_t i = 0; i < outs.size(); ++i) CHECK(outs[i].data_ptr() == addrs[i]);
    }
    // Another handle over the same buffer is the same buffer.
    std::vector<Tensor> same{Tensor(x.buffer(), x.dtype(), x.shape(), x.strides(), x.offset()), w};
    CHECK_NOTHROW(m.replay(42, same));
    CHECK(same_bits(m.captured_outputs(42)[0], outs[0]));

    std::vector<Tensor> other{x, w.clone()};
    CHECK_THROWS_WITH_AS(m.replay(42, other),
                         doctest::Contains("replay(42): argument 1 is not the buffer captured under this key (captured "
                                           "float32[3, 5] cpu at 0x"),
                         ValueError);
    CHECK_THROWS_WITH_AS(m.replay(42, std::vector<Tensor>{x}),
                         doctest::Contains("replay(42): captured with 2 input buffers, got 1"), ValueError);
    CHECK_THROWS_WITH_AS(m.replay(42, std::vector<Tensor>{}), doctest::Contains("replay(42): no input buffers given"),
                         ValueError);
    CHECK_THROWS_WITH_AS(m.replay(7, in), doctest::Contains("replay(7): no capture under this key"), ValueError);
    CHECK_THROWS_WITH_AS(m.capture(1, std::vector<Tensor>{}), doctest::Contains("capture(1): no input buffers given"),
                         ValueError);
    CHECK_THROWS_WITH_AS(m.capture(1, std::vector<Tensor>{x, random::normal({3, 4})}),
                         doctest::Contains("capture(1): argument 1: expected float32[3, 5] cpu, got float32[3, 4] cpu"),
                         ValueError);
    CHECK_THROWS_WITH_AS(m.capture(1, std::vector<Tensor>{x, transpose(random::normal({5, 3}))}),
                         doctest::Contains("capture(1): argument 1: must be contiguous"), ValueError);
    // The largest key works; release drops it; releasing an unknown key is a no-op.
    const uint64_t big = UINT64_MAX;
    m.capture(big, in);
    CHECK(m.num_captures() == 2);
    m.release(big);
    m.release(12345);
    CHECK(m.num_captures() == 1);
    CHECK_THROWS_WITH_AS(m.replay(big, in), doctest::Contains("no capture under this key"), ValueError);
    m.release(42);
    CHECK(m.num_captures() == 0);
  }

  TEST_CASE("capture keys: parsing rejects values outside 0..2^64-1") {
    CHECK(engine::parse_capture_key("0") == 0);
    CHECK(engine::parse_capture_key("18446744073709551615") == UINT64_MAX);
    CHECK(engine::parse_capture_key("0x10") == 16);
    CHECK_THROWS_WITH_AS(engine::parse_capture_key("18446744073709551616"),
                         doctest::Contains("capture key '18446744073709551616' is out of range"), ValueError);
    CHECK_THROWS_WITH_AS(engine::parse_capture_key("-1"), doctest::Contains("capture key '-1' is negative"), ValueError);
    CHECK_THROWS_WITH_AS(engine::parse_capture_key("12ab"), doctest::Contains("is not an integer"), ValueError);
    CHECK_THROWS_WITH_AS(engine::parse_capture_key(""), doctest::Contains("an empty string is not a key"), ValueError);
  }

  TEST_CASE("replays of different keys may run on different threads at once") {
    auto f = [](Tensor x) { return exp(x) * 0.5f - x; };
    CompiledCallable run = compile(f)(f32({256}));
    const engine::Model& m = run.engine_model();
    std::vector<std::vector<Tensor>> ins;
    std::vector<std::vector<Tensor>> outs;
    std::vector<Tensor> want;
    for (uint64_t k = 0; k < 4; ++k) {
      ins.push_back({random::normal({256})});
      outs.push_back(m.capture(k, ins.back()));
      want.push_back(run.execute_raw(std::span<const Tensor>(ins.back()))[0]);
    }
    std::atomic<int> bad{0};
    std::vector<std::thread> ts;
    for (uint64_t k = 0; k < 4; ++k)
      ts.emplace_back([&, k] {
        for (int i = 0; i < 200; ++i) {
          m.replay(k, ins[k]);
          if (!same_bits(outs[k][0], want[k])) ++bad;
          if (k == 0 && i % 50 == 0) {  // capture and release other keys meanwhile
            m.capture(100 + i, ins[0]);
            m.release(100 + i);
          }
        }
      });
    for (auto& t : ts) t.join();
    CHECK(bad == 0);
  }
}

TEST_SUITE("export") {
  TEST_CASE("reading a directory is a kiln::Error, not a stream exception") {
    const std::string dir = std::filesystem::temp_directory_path().string();
    CHECK_THROWS_WITH_AS(kiln::engine::read(dir), doctest::Contains("is a directory"), kiln::ValueError);
    CHECK_THROWS_WITH_AS(kiln::read_npy(dir), doctest::Contains("is a directory"), kiln::Error);
    CHECK_THROWS_WITH_AS(kiln::read_safetensors(dir), doctest::Contains("is a directory"), kiln::Error);
  }

  TEST_CASE("engine::read looks at the header first: an endless stream is refused or read only as far as it says") {
    using namespace kiln;
    // A stream that never ends, counting what was taken from it.
    struct Endless : std::streambuf {
      std::string head;  // the bytes it starts with, then zeros forever
      size_t served = 0;
      char buf[4096];
      int_type underflow() override {
        for (size_t i = 0; i < sizeof buf; ++i, ++served) buf[i] = served < head.size() ? head[served] : '\0';
        setg(buf, buf, buf + sizeof buf);
        return traits_type::to_int_type(buf[0]);
      }
    };
    {
      Endless zeros;
      std::istream in(&zeros);
      CHECK_THROWS_WITH_AS(engine::read(in), doctest::Contains("engine::read: '<stream>': not a MEF file"), ValueError);
      CHECK(zeros.served <= 4096);  // one buffer, not everything
    }
    {
      // A MEF header saying 1000 bytes, then zeros: read up to 1000 + 1 bytes, then refused as corrupted.
      Endless mef;
      mef.head = std::string("KILNMEF\0", 8) + std::string("\x01\0\0\0", 4) +
                 std::string("\xe8\x03\0\0\0\0\0\0", 8) + std::string(4, '\0');
      std::istream in(&mef);
      CHECK_THROWS_AS(engine::read(in), ValueError);
      CHECK(mef.served <= 1001 + 4096);
    }
    // A character device that never ends (reading /dev/zero is harmless): refused at once by its first bytes.
    if (fs::exists("/dev/zero"))
      CHECK_THROWS_WITH_AS(engine::read("/dev/zero"),
                           doctest::Contains("engine::read: '/dev/zero': not a MEF file"), ValueError);
    // A real file still round-trips (the bounded read takes all of it).
    TempDir d;
    CompiledCallable run = compile([](Tensor x) { return x * 2.0f; })(f32({3}));
    run.export_mef(d.file("m.mef"));
    Tensor y = CompiledCallable::from_mef(d.file("m.mef"))(tensor({1.f, 2.f, 3.f}));
    CHECK(y.to_vector<float>() == std::vector<float>{2.f, 4.f, 6.f});
    spit(d.file("long.mef"), slurp(d.file("m.mef")) + "xyz");
    CHECK_THROWS_WITH_AS(engine::read(d.file("long.mef")), doctest::Contains("3 bytes after its end"), ValueError);
  }

  TEST_CASE("export_mef through a symlink writes the link's target; a FIFO is refused, not replaced") {
    using namespace kiln;
    TempDir d;
    CompiledCallable twice = compile([](Tensor x) { return x * 2.0f; })(f32({3}));
    CompiledCallable thrice = compile([](Tensor x) { return x * 3.0f; })(f32({3}));
    const std::string real = d.file("real.mef"), link = d.file("link.mef");
    twice.export_mef(real);
    fs::permissions(real, fs::perms::owner_read | fs::perms::owner_write | fs::perms::group_read);
    fs::create_symlink("real.mef", link);  // relative, as `ln -s real.mef link.mef` makes it
    thrice.export_mef(link);
    CHECK(fs::is_symlink(fs::symlink_status(link)));
    CHECK(fs::read_symlink(link) == fs::path("real.mef"));
    // The target has the new model (3x), written through the link; it kept its permissions.
    CHECK(Tensor(CompiledCallable::from_mef(real)(tensor({1.f, 2.f, 3.f}))).to_vector<float>() ==
          std::vector<float>{3.f, 6.f, 9.f});
    CHECK(fs::status(real).permissions() ==
          (fs::perms::owner_read | fs::perms::owner_write | fs::perms::group_read));
    CHECK_FALSE(fs::exists(d.file("link.mef.tmp")));
    CHECK_FALSE(fs::exists(d.file("real.mef.tmp")));
    // A link to a link in another folder, and a dangling link: the final target is written.
    fs::create_directory(d.file("sub"));
    fs::create_symlink(link, d.file("sub/l2.mef"));
    twice.export_mef(d.file("sub/l2.mef"));
    CHECK(Tensor(CompiledCallable::from_mef(real)(tensor({1.f, 1.f, 1.f}))).to_vector<float>() ==
          std::vector<float>{2.f, 2.f, 2.f});
    fs::create_symlink("new.mef", d.file("dangling.mef"));
    thrice.export_mef(d.file("dangling.mef"));
    CHECK(fs::is_symlink(fs::symlink_status(d.file("dangling.mef"))));
    CHECK(fs::is_regular_file(d.file("new.mef")));

    // A FIFO (a stand-in for a device such as /dev/full) is refused and stays a FIFO; also through a link.
    const std::string fifo = d.file("pipe");
    REQUIRE(::mkfifo(fifo.c_str(), 0600) == 0);
    CHECK_THROWS_WITH_AS(twice.export_mef(fifo),
                         doctest::Contains(("export_mef: '" + fifo +
                                            "' is a FIFO, not a regular file; refusing to replace it")
                                               .c_str()),
                         ValueError);
    CHECK(fs::is_fifo(fs::symlink_status(fifo)));
    fs::create_symlink(fifo, d.file("to_pipe"));
    CHECK_THROWS_WITH_AS(twice.export_mef(d.file("to_pipe")), doctest::Contains(("(a link to '" + fifo + "') is a FIFO").c_str()),
                         ValueError);
    CHECK(fs::is_fifo(fs::symlink_status(fifo)));
    CHECK_FALSE(fs::exists(fifo + ".tmp"));
  }

  TEST_CASE("export_mef refuses an empty path and a directory before writing anything") {
    using namespace kiln;
    TempDir d;
    CompiledCallable run = compile([](Tensor x) { return -x; })(f32({3}));
    const bool dot_tmp_before = fs::exists(".tmp");
    CHECK_THROWS_WITH_AS(run.export_mef(""),
                         doctest::Contains("export_mef: the path is empty (expected the path of the file to write)"),
                         ValueError);
    CHECK(fs::exists(".tmp") == dot_tmp_before);

    const std::string dir = d.file("out");
    fs::create_directory(dir);
    for (const std::string& p : {dir, dir + "/"}) {
      CHECK_THROWS_WITH_AS(run.export_mef(p),
                           doctest::Contains(("export_mef: '" + p + "' is a directory (expected the path of a file")
                                                 .c_str()),
                           ValueError);
    }
    CHECK(fs::is_directory(dir));
    CHECK(fs::is_empty(dir));
    // Nothing but the folder itself: no stray '<path>.tmp' anywhere.
    std::vector<std::string> names;
    for (const auto& e : fs::directory_iterator(d.path)) names.push_back(e.path().filename().string());
    CHECK(names == std::vector<std::string>{"out"});

    // A folder that does not exist: named with the path given (not its '.tmp'), and nothing is left.
    CHECK_THROWS_WITH_AS(run.export_mef(d.file("no/such/f.mef")),
                         doctest::Contains(("export_mef: cannot write '" + d.file("no/such/f.mef") + "': the folder '" +
                                            d.file("no/such") + "' does not exist")
                                               .c_str()),
                         ValueError);
    CHECK_FALSE(fs::exists(d.file("no")));
    // A good path still works and leaves only the file.
    run.export_mef(d.file("out/f.mef"));
    CHECK(fs::exists(d.file("out/f.mef")));
    CHECK_FALSE(fs::exists(d.file("out/f.mef.tmp")));
  }

  TEST_CASE("execute_raw and Model::execute check the input count") {
    using namespace kiln;
    CompiledCallable run = compile([](Tensor x, Tensor y) { return x + y; })(
        TensorLayout(DType::float32, {2}), TensorLayout(DType::float32, {2}));
    CHECK_THROWS_WITH_AS(run.execute_raw(std::vector<Tensor>{ones({2})}),
                         doctest::Contains("expected 2 input tensors"), ValueError);
  }
}
