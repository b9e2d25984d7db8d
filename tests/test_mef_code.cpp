// MEF files with generated machine code (the CODE section, jit/mef.h): a read
// under the same feature key places the stored code instead of generating it
// (codegen_counts proves it) and computes the same bits as a fresh compile;
// another ISA target or strict mode regenerates; a corrupted or truncated
// section, a bad hash or a malformed relocation regenerates cleanly; files
// without the section load as before.
#include <cmath>
#include <cstdlib>
#include <cstring>

#include "../jit/elementwise_program.h"
#include "../jit/mef.h"
#include "../jit/plan.h"
#include "same_bits.h"
#include "test_util.h"
#include "ulp_env.h"

using namespace kiln;

namespace {

TensorLayout f32(Shape s) { return TensorLayout(DType::float32, std::move(s)); }

// The file export_mef would write for `run` (from memory).
mef::Contents contents_of(const CompiledCallable& run) {
  const engine::CompiledModel& art = run.engine_model().artifact();
  mef::Contents c;
  c.graph_text = art.graph().to_text();
  c.signature = run.signature();
  c.weights = art.weight_slots();
  c.code = mef::code_of(art.plan());
  return c;
}

// Reads `bytes` and runs the result; `made`/`placed` receive how many kernels
// the read generated and placed from the file.
std::vector<Tensor> read_and_run(const std::string& bytes, const std::vector<Tensor>& in, int64_t& made,
                                 int64_t& placed, std::shared_ptr<InferenceSession> session = nullptr) {
  const codegen::CodegenCounts before = codegen::codegen_counts();
  auto art = engine::read_bytes(bytes, "code.mef", std::move(session));
  const codegen::CodegenCounts after = codegen::codegen_counts();
  made = after.generated - before.generated;
  placed = after.loaded - before.loaded;
  engine::Model m(art, {});
  return m.execute(in);
}

void check_same(const std::vector<Tensor>& a, const std::vector<Tensor>& b) {
  REQUIRE(a.size() == b.size());
  for (size_t i = 0; i < a.size(); ++i) CHECK_MESSAGE(kt::same_bits(a[i], b[i]), "result " << i << " differs");
}

// A chain of vector math (the chain) and one with out-of-line calls:
// float pow calls eager's functor per lane, sin of |x| >= kTrigMaxArg calls
// the slow reduction (both through relocation slots).
auto chain = [](Tensor a, Tensor b, Tensor c) { return tanh(a * b + c) * 0.5f + exp(-a); };
auto calls = [](Tensor a, Tensor b) { return sin(a) + pow(b, a * 1e-5f); };


// The first kernel's code bytes in an encoded file (found by content).
size_t code_offset(const std::string& file, const mef::Contents& c) {
  REQUIRE(!c.code.kernels.empty());
  const size_t at = file.find(c.code.kernels[0].image.bytes);
  REQUIRE(at != std::string::npos);
  return at;
}

}  // namespace

TEST_SUITE("mef code") {
  TEST_CASE("a read under the same feature key places the stored code: no code generation, the same bits") {
    CompiledCallable run = compile(chain)(f32({6, 37}), f32({6, 37}), f32({37}));
    const mef::Contents c = contents_of(run);
    REQUIRE(c.code.kernels.size() >= 1);
    CHECK(c.code.feature_key == run.engine_model().artifact().plan().code_feature_key());
    const std::string bytes = mef::encode(c);
    // The section survives decoding exactly.
    const mef::Contents d = mef::decode(bytes, "code.mef");
    REQUIRE(d.code.kernels.size() == c.code.kernels.size());
    CHECK(d.code_note.empty());
    CHECK(d.code.kernels[0].image.bytes == c.code.kernels[0].image.bytes);
    CHECK(d.code.kernels[0].hash == c.code.kernels[0].hash);

    Tensor a = random::normal({6, 37}), b = random::normal({6, 37}), cc = random::normal({37});
    int64_t made = -1, placed = -1;
    std::vector<Tensor> got = read_and_run(bytes, {a, b, cc}, made, placed);
    CHECK(made == 0);
    CHECK(placed == static_cast<int64_t>(c.code.kernels.size()));
    check_same(run(a, b, cc).leaves, got);
    // Independent reference (float64): the documented vmath bounds (4 ulp) are far inside 1e-5.
    const float *pa = a.data<float>(), *pb = b.data<float>(), *pc = cc.data<float>(), *py = got[0].data<float>();
    for (int64_t i = 0; i < 6 * 37; ++i) {
      const double x = pa[i], want = std::tanh(x * pb[i] + pc[i % 37]) * 0.5 + std::exp(-x);
      CHECK(std::abs(py[i] - want) <= 1e-5 * (1 + std::abs(want)));
    }
  }

  TEST_CASE("code with relocations (out-of-line calls) is placed with this process's addresses") {
    CompiledCallable run = compile(calls)(f32({3, 50}), f32({3, 50}));
    const mef::Contents c = contents_of(run);
    size_t relocs = 0;
    for (const auto& k : c.code.kernels) {
      relocs += k.image.relocs.size();
      for (const auto& r : k.image.relocs) {
        REQUIRE(r.offset + 8 <= k.image.bytes.size());
        uint64_t slot = 1;
        std::memcpy(&slot, k.image.bytes.data() + r.offset, 8);
        CHECK(slot == 0);  // addresses are not stored
      }
    }
    CHECK(relocs >= 2);  // scalar_lanes and trig_lanes
    // Large arguments take sin's out-of-line path.
    Tensor a = random::uniform({3, 50}, -3e5, 3e5), b = random::uniform({3, 50}, 0.5, 2.0);
    int64_t made = -1, placed = -1;
    std::vector<Tensor> got = read_and_run(mef::encode(c), {a, b}, made, placed);
    CHECK(made == 0);
    CHECK(placed == static_cast<int64_t>(c.code.kernels.size()));
    check_same(run(a, b).leaves, got);
    const float *pa = a.data<float>(), *pb = b.data<float>(), *py = got[0].data<float>();
    for (int64_t i = 0; i < 150; ++i) {
      const double want = std::sin(double(pa[i])) + std::pow(double(pb[i]), double(pa[i] * 1e-5f));
      CHECK(std::abs(py[i] - want) <= 1e-5 * (1 + std::abs(want)));
    }
  }

  TEST_CASE("another ISA target or strict mode regenerates the code from the graph") {
    CompiledCallable run = compile(chain)(f32({4, 9}), f32({4, 9}), f32({9}));
    const mef::Contents c = contents_of(run);
    const std::string bytes = mef::encode(c);
    Tensor a = random::normal({4, 9}), b = random::normal({4, 9}), cc = random::normal({9});
    const std::vector<Tensor> want = run(a, b, cc).leaves;
    int64_t made = -1, placed = -1;
    const codegen::CpuTarget host = codegen::detect_cpu_target();
    const char* lower = host == codegen::CpuTarget::avx512 ? "avx2" : host == codegen::CpuTarget::avx2 ? "sse2" : nullptr;
    if (lower) {
      EnvTarget env(lower);
      std::string note;
      const std::string key = codegen::codegen_feature_key(codegen::detect_cpu_target(), false);
      CHECK(key != c.code.feature_key);
      CHECK(mef::usable_images(mef::decode(bytes, "x"), key, &note).empty());
      CHECK(note.find("was generated for") != std::string::npos);
      std::vector<Tensor> got = read_and_run(bytes, {a, b, cc}, made, placed);
      CHECK(made >= 1);
      CHECK(placed == 0);
      // What a fresh compile on that target gives.
      CompiledCallable fresh = compile(chain)(f32({4, 9}), f32({4, 9}), f32({9}));
      check_same(fresh(a, b, cc).leaves, got);
    }
    auto strict = std::make_shared<InferenceSession>(KernelOptions{.strict = true});
    std::vector<Tensor> got = read_and_run(bytes, {a, b, cc}, made, placed, strict);
    CHECK(placed == 0);
    const float *pw = want[0].data<float>(), *pg = got[0].data<float>();
    for (int64_t i = 0; i < 36; ++i) CHECK(std::abs(pw[i] - pg[i]) <= 1e-5f * (1 + std::abs(pw[i])));
  }

  TEST_CASE("a corrupted or truncated code section regenerates cleanly, never runs bad code") {
    CompiledCallable run = compile(chain)(f32({5, 8}), f32({5, 8}), f32({8}));
    const mef::Contents c = contents_of(run);
    Tensor a = random::normal({5, 8}), b = random::normal({5, 8}), cc = random::normal({8});
    const std::vector<Tensor> want = run(a, b, cc).leaves;
    int64_t made = -1, placed = -1;
    SUBCASE("a flipped code byte (resealed: the file checksum passes, the kernel hash does not)") {
      std::string bytes = mef::encode(c);
      bytes[code_offset(bytes, c) + 5] ^= 0x5a;
      mef::reseal(bytes);
      std::string note;
      const mef::Contents d = mef::decode(bytes, "x");
      CHECK(mef::usable_images(d, d.code.feature_key, &note).size() + 1 == c.code.kernels.size());
      CHECK(note.find("does not match its hash") != std::string::npos);
      check_same(want, read_and_run(bytes, {a, b, cc}, made, placed));
      CHECK(made >= 1);
    }
    SUBCASE("a truncated section (its length shortened, the file resealed)") {
      std::string full = mef::encode(c);
      const size_t tag = full.find("CODE");
      REQUIRE(tag != std::string::npos);
      uint64_t len = 0;
      std::memcpy(&len, full.data() + tag + 4, 8);
      REQUIRE(len > 40);
      // Keep the first 40 bytes of the payload: a kernel cut in its middle.
      std::string cut = full.substr(0, tag + 12 + 40) + full.substr(tag + 12 + len);
      const uint64_t newlen = 40;
      std::memcpy(cut.data() + tag + 4, &newlen, 8);
      mef::reseal(cut);
      const mef::Contents d = mef::decode(cut, "x");
      CHECK(d.code.kernels.empty());
      CHECK(d.code_note.find("'CODE' (the generated machine code) is malformed") != std::string::npos);
      check_same(want, read_and_run(cut, {a, b, cc}, made, placed));
      CHECK(made >= 1);
      CHECK(placed == 0);
    }
    SUBCASE("a relocation outside the code or naming an unknown callee, with a matching hash") {
      for (int bad = 0; bad < 3; ++bad) {
        mef::Contents e = c;
        auto& k = e.code.kernels[0];
        if (bad == 0) k.image.relocs.push_back({static_cast<uint32_t>(k.image.bytes.size() - 4), 0});
        if (bad == 1) k.image.relocs.push_back({0, 77});
        if (bad == 2) k.image.bytes.clear();
        k.hash = k.image.hash(e.code.feature_key + '\n' + k.program);
        check_same(want, read_and_run(mef::encode(e), {a, b, cc}, made, placed));
        CHECK(made >= 1);
        CHECK(placed == static_cast<int64_t>(c.code.kernels.size()) - 1);
        CHECK_THROWS_AS(codegen::load_elementwise(k.image), Error);
      }
    }
  }

  TEST_CASE("files without a code section (version 2 as written before it) still load and generate") {
    CompiledCallable run = compile(chain)(f32({2, 3}), f32({2, 3}), f32({3}));
    mef::Contents c = contents_of(run);
    c.code = {};
    const std::string bytes = mef::encode(c);
    CHECK(bytes.find("CODE") == std::string::npos);
    const mef::Contents d = mef::decode(bytes, "x");
    CHECK(d.format_version == 2);
    CHECK(d.code.feature_key.empty());
    Tensor a = random::normal({2, 3}), b = random::normal({2, 3}), cc = random::normal({3});
    int64_t made = -1, placed = -1;
    check_same(run(a, b, cc).leaves, read_and_run(bytes, {a, b, cc}, made, placed));
    CHECK(made >= 1);
    CHECK(placed == 0);
  }
}
