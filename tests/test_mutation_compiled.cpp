// Mutable graph sources (GraphRealizationContext::add_mutable_source) and
// compiled in-place writes: functionalised in the IR, written back when a call
// ends, the same bits as eager, recorded in MEF files.
#include <unistd.h>

#include <cstring>
#include <filesystem>

#include "../io/file_bytes.h"
#include "../jit/mef.h"
#include "same_bits.h"
#include "test_util.h"

using namespace kiln;

namespace {
using kt::same_bits;
TensorLayout f32(Shape s) { return TensorLayout(DType::float32, std::move(s)); }
std::string temp_path(const char* name) {
  return (std::filesystem::temp_directory_path() / (std::string("kiln_mut_") + std::to_string(getpid()) + "_" + name))
      .string();
}
// One SGD-with-momentum step; the same code runs eagerly and traced.
Tensor sgd_step(const Tensor& w, const Tensor& v, const Tensor& g) {
  v.mul_(0.9).add_(g);
  w -= 0.1 * v;
  return sum(w * w);
}
}  // namespace

TEST_SUITE("mutation_compiled") {
  TEST_CASE("compile of an optimizer step updates the captured weights in place, bit for bit as eager") {
    Tensor w = random::normal({64}), v = zeros({64});
    Tensor we = w.clone(), ve = v.clone();
    const void* wp = w.data_ptr();
    const void* vp = v.data_ptr();
    auto step = [&](Tensor g) { return sgd_step(w, v, g); };
    // strict numerics: no FMA contraction, so compiled == eager bit for bit
    CompileOptions o;
    o.session = std::make_shared<InferenceSession>(KernelOptions{.strict = true});
    CompiledCallable run = compile(step, o)(f32({64}));
    // tracing wrote nothing
    CHECK(same_bits(w, we));
    CHECK(same_bits(v, ve));
    // the IR has the weights as mutable sources and their final values as extra outputs
    CHECK(run.weights().count("mutable.0") == 1);
    CHECK(run.weights().count("mutable.1") == 1);
    for (int i = 0; i < 3; ++i) {
      Tensor g = random::normal({64});
      Tensor loss = run(g).tensor();
      Tensor loss_e = sgd_step(we, ve, g);
      CHECK(same_bits(v, ve));
      CHECK(same_bits(w, we));
      CHECK(same_bits(loss, loss_e));
    }
    CHECK(w.data_ptr() == wp);  // in place: the same memory
    CHECK(v.data_ptr() == vp);
    // against a float64 reference of the three steps
    // (the compiled call also sees writes made to its mutable sources between calls)
    v.zero_();
    ve.zero_();
    Tensor g = random::normal({64});
    run(g);
    sgd_step(we, ve, g);
    CHECK(same_bits(v, g));  // 0.9 * 0 + g
    CHECK(same_bits(w, we));
  }

  TEST_CASE("default numerics: the compiled step stays within float32 rounding of eager") {
    Tensor w = random::normal({256}), v = zeros({256});
    Tensor we = w.clone(), ve = v.clone();
    CompiledCallable run = compile([&](Tensor g) { return sgd_step(w, v, g); })(f32({256}));
    for (int i = 0; i < 4; ++i) {
      Tensor g = random::normal({256});
      run(g);
      sgd_step(we, ve, g);
    }
    kt::check_all_close(w, kt::values(we), 1e-6, 1e-6, "w");
    kt::check_all_close(v, kt::values(ve), 1e-6, 1e-6, "v");
  }

  TEST_CASE("float64 reference of a compiled in-place update") {
    Tensor w = Tensor::from_vector(std::vector<double>{1, -2, 3, 0.5});
    auto f = [&](Tensor g) {
      w.mul_(2.0).add_(g).clamp_(-4.0, 4.0);
      return w + 0.0;
    };
    CompiledCallable run = compile(f)(TensorLayout(DType::float64, {4}));
    Tensor g = Tensor::from_vector(std::vector<double>{0.25, 1, -3, 10});
    Tensor r = run(g).tensor();
    const std::vector<double> want = {2.25, -3, 3, 4};
    CHECK(w.to_vector<double>() == want);
    CHECK(r.to_vector<double>() == want);
    run(g);
    CHECK(w.to_vector<double>() == std::vector<double>{4, -4, 3, 4});
  }

  TEST_CASE("an argument written in place is written back into the caller's tensor") {
    auto f = [](Tensor x, Tensor y) {
      x += y;
      x.mul_(2.0f);
      return x - 1.0f;
    };
    CompiledCallable run = compile(f)(f32({3}), f32({3}));
    Tensor a = Tensor::from_vector(std::vector<float>{1, 2, 3}), b = Tensor::from_vector(std::vector<float>{10, 20, 30});
    const uint64_t v0 = a.buffer().version();
    Tensor r = run(a, b).tensor();
    CHECK(a.to_vector<float>() == std::vector<float>{22, 44, 66});
    CHECK(r.to_vector<float>() == std::vector<float>{21, 43, 65});
    CHECK(b.to_vector<float>() == std::vector<float>{10, 20, 30});
    CHECK(a.buffer().version() > v0);
    // jit does the same
    auto jf = jit(f);
    Tensor c = Tensor::from_vector(std::vector<float>{0, 0, 1});
    jf(c, b);
    CHECK(c.to_vector<float>() == std::vector<float>{20, 40, 62});
  }

  TEST_CASE("a result that the optimiser reduced to a written argument keeps its in-call value") {
    // -(-x) simplifies to x itself; x is then written back: the result must not follow it
    auto f = [](Tensor x) {
      Tensor y = neg(neg(x));
      x.neg_();
      return y;
    };
    CompiledCallable run = compile(f)(f32({2}));
    Tensor a = Tensor::from_vector(std::vector<float>{-4, 5});
    Tensor r = run(a).tensor();
    CHECK(r.to_vector<float>() == std::vector<float>{-4, 5});
    CHECK(a.to_vector<float>() == std::vector<float>{4, -5});
  }

  TEST_CASE("in-place writes do not cross a deduplicated subgraph call: refused, and fine inlined") {
    Tensor w = Tensor::from_vector(std::vector<float>{1, 2});
    auto body = as_subgraph([&](Tensor x) {
      w.add_(x);
      return x * 2.0f;
    }, "upd");
    auto f = [&](Tensor x) { return body(x); };
    CHECK_THROWS_WITH_AS(compile(f)(f32({2})), doctest::Contains("writes into a captured tensor"), RealizationError);
    auto arg = as_subgraph([](Tensor x) {
      x.mul_(2.0f);
      return x + 0.0f;
    }, "arg");
    CHECK_THROWS_WITH_AS(compile([&](Tensor x) { return arg(x); })(f32({2})), doctest::Contains("writes into an argument"),
                         RealizationError);
    CompileOptions inl;
    inl.allow_subgraphs = false;
    CompiledCallable run = compile(f, inl)(f32({2}));
    run(Tensor::from_vector(std::vector<float>{10, 20}));
    CHECK(w.to_vector<float>() == std::vector<float>{11, 22});
  }

  TEST_CASE("add_mutable_source: explicit, reads and writes functionalised, constants refused after a read") {
    Tensor buf = Tensor::from_vector(std::vector<float>{1, 2});
    Graph g("m", {TensorType(DType::float32, {2})});
    {
      GraphRealizationContext ctx(g);
      auto st = ctx.add_mutable_source(buf);
      CHECK(st->values[0].type().shape == Shape{2});
      Tensor x = Tensor::from_graph_value(g.inputs()[0]);
      buf.add_(x);
      buf.mul_(x);
      REQUIRE(ctx.mutable_sources().size() == 1);
      CHECK(ctx.mutable_sources()[0].written);
      CHECK(ctx.mutable_sources()[0].weight == "mutable.0");
      CHECK(ctx.mutable_sources()[0].value != st->values[0].id);  // a new SSA value per write
      CHECK(buf.to_vector<float>() == std::vector<float>{1, 2});   // nothing written while tracing
      Tensor other = ones({2});
      Tensor y = x + other;  // read as a constant
      CHECK_THROWS_WITH_AS(ctx.add_mutable_source(other), doctest::Contains("already read as a constant"),
                           RealizationError);
      CHECK_THROWS_AS(other.add_(1.0f), RealizationError);
      g.output(y);
    }
  }

  TEST_CASE("MEF records the write-backs; files of format version 1 keep loading") {
    Tensor w = Tensor::from_vector(std::vector<float>{1, 2, 3});
    auto f = [&](Tensor g) {
      w -= g;
      return w * 2.0f;
    };
    CompiledCallable run = compile(f)(f32({3}));
    const std::string path = temp_path("opt.mef");
    run.export_mef(path);
    // loaded with a fresh tensor bound to the mutable weight
    Tensor w2 = Tensor::from_vector(std::vector<float>{10, 20, 30});
    CompiledCallable back = CompiledCallable::from_mef(path, {{"mutable.0", w2}});
    Tensor r = back(Tensor::from_vector(std::vector<float>{1, 1, 1})).tensor();
    CHECK(w2.to_vector<float>() == std::vector<float>{9, 19, 29});
    CHECK(r.to_vector<float>() == std::vector<float>{18, 38, 58});
    CHECK(w.to_vector<float>() == std::vector<float>{1, 2, 3});
    auto art = engine::read(path);
    CHECK(art->mef_origin().format_version == 2);
    REQUIRE(art->signature()->writes.size() == 1);
    CHECK(art->signature()->writes[0].weight == "mutable.0");
    // a version 1 file (no MUTW section): the same sections under the old version number
    CompiledCallable plain = compile([](Tensor x) { return x * 3.0f; })(f32({2}));
    plain.export_mef(path);
    mef::Contents c = mef::decode(io_detail::read_file_bytes(path, "test"), path);
    const std::string v1 = mef::encode_sections(1, {{"META", c.writer},
                                                    {"GRPH", c.graph_text},
                                                    {"SIGN", mef::encode_signature(c.signature)},
                                                    {"WGTS", mef::encode_weights(c.weights)}});
    io_detail::write_file_bytes(path, v1, "test");
    auto old = engine::read(path);
    CHECK(old->mef_origin().format_version == 1);
    CHECK(old->signature()->writes.empty());
    CompiledCallable ob = CompiledCallable::from_mef(path);
    CHECK(ob(Tensor::from_vector(std::vector<float>{1, 2})).tensor().to_vector<float>() == std::vector<float>{3, 6});
    // a write-back naming an argument that does not exist is refused
    run.export_mef(path);
    mef::Contents cm = mef::decode(io_detail::read_file_bytes(path, "test"), path);
    cm.signature.writes[0] = WriteBack{5, ""};
    CHECK_THROWS_WITH_AS(engine::read_bytes(mef::encode(cm), "bad.mef"), doctest::Contains("a write-back names argument 5"),
                         ValueError);
    std::filesystem::remove(path);
  }
}
