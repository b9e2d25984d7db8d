// MEF files with the execution plan (the PLAN section, jit/mef_plan.h): a
// read under the same key restores the compiled plan without planning (the
// same steps, memory plan and description) and, with the CODE section,
// without generating any code (elementwise kernels or GEMMs), and computes
// bitwise what the compiled callable computes; another key (strict mode, no
// fusion, another layout version) or a file without the section plans the
// graph as before and says why; every kind of damage to the section is a
// ValueError naming 'PLAN', the byte offset and the field, never a crash.
#include <unistd.h>

#include <algorithm>
#include <cmath>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <functional>
#include <set>

#include "../backends/cpu/jit/small_gemm.h"
#include "../jit/elementwise_program.h"
#include "../jit/mef.h"
#include "../jit/mef_plan.h"
#include "../jit/plan.h"
#include "same_bits.h"
#include "test_util.h"

using namespace kiln;

namespace {

TensorLayout f32(Shape s) { return TensorLayout(DType::float32, std::move(s)); }

// A file in a fresh folder, removed at the end.
struct TempFile {
  std::filesystem::path path;
  TempFile() {
    path = std::filesystem::temp_directory_path() / ("kiln_mef_plan_test_" + std::to_string(getpid()) + ".mef");
  }
  ~TempFile() {
    std::error_code ec;
    std::filesystem::remove(path, ec);
  }
};

std::string slurp(const std::string& p) {
  std::ifstream f(p, std::ios::binary);
  return std::string((std::istreambuf_iterator<char>(f)), std::istreambuf_iterator<char>());
}

// The file export_mef writes for `run` (from memory), optionally without CODE or PLAN.
mef::Contents contents_of(const CompiledCallable& run, bool code = true, bool plan = true) {
  const engine::CompiledModel& art = run.engine_model().artifact();
  mef::Contents c;
  c.graph_text = art.graph().to_text();
  c.signature = run.signature();
  c.weights = art.weight_slots();
  if (code) c.code = mef::code_of(art.plan());
  if (plan) c.plan = mef::encode_plan(art.plan());
  return c;
}

struct Read {
  std::shared_ptr<const engine::CompiledModel> art;
  int64_t kernels_made = 0, gemms_made = 0;
};

Read read(const std::string& bytes, std::shared_ptr<InferenceSession> session = nullptr) {
  const codegen::CodegenCounts k0 = codegen::codegen_counts(), g0 = codegen::small_gemm_counts();
  Read r;
  r.art = engine::read_bytes(bytes, "plan.mef", std::move(session));
  r.kernels_made = codegen::codegen_counts().generated - k0.generated;
  r.gemms_made = codegen::small_gemm_counts().generated - g0.generated;
  return r;
}

std::vector<Tensor> run_model(const std::shared_ptr<const engine::CompiledModel>& art, const std::vector<Tensor>& in) {
  engine::Model m(art, {});
  return m.execute(in);
}

void check_same(const std::vector<Tensor>& a, const std::vector<Tensor>& b) {
  REQUIRE(a.size() == b.size());
  for (size_t i = 0; i < a.size(); ++i) CHECK_MESSAGE(kt::same_bits(a[i], b[i]), "result " << i << " differs");
}

// The message of the error reading `bytes` raises ("(no error)" if none);
// fails the test when it is not a ValueError.
std::string read_error(const std::string& bytes, std::shared_ptr<InferenceSession> session = nullptr) {
  try {
    engine::read_bytes(bytes, "plan.mef", std::move(session));
  } catch (const ValueError& e) {
    return e.what();
  } catch (const std::exception& e) {
    FAIL("not a ValueError: " << e.what());
  }
  return "(no error)";
}

// A compiled graph and inputs for it.
struct Case {
  const char* name;
  std::function<CompiledCallable()> make;
  std::function<std::vector<Tensor>()> inputs;
};

std::vector<Case> cases() {
  return {
      {"fused chain",
       [] {
         return compile([](Tensor a, Tensor b, Tensor c) { return tanh(a * b + c) * 0.5f + exp(-a); })(
             f32({6, 37}), f32({6, 37}), f32({37}));
       },
       [] { return std::vector<Tensor>{random::normal({6, 37}), random::normal({6, 37}), random::normal({37})}; }},
      {"small GEMMs with epilogues (a chain of them)",
       [] {
         return compile([](Tensor x, Tensor w) {
           Tensor h = x;
           for (int i = 0; i < 5; ++i) h = tanh(matmul(h, w) + static_cast<float>(i) * 0.25f);
           return h;
         })(f32({4, 8}), f32({8, 8}));
       },
       [] { return std::vector<Tensor>{random::normal({4, 8}), random::normal({8, 8}) * 0.3f}; }},
      {"GEMM with a transposed operand and a bias, softmax + log_softmax pair, column sum (three results)",
       [] {
         return compile([](Tensor x, Tensor w, Tensor b) {
           Tensor h = matmul(x, transpose(w, 0, 1)) + b;
           return std::make_tuple(softmax(h, -1), log_softmax(h, -1), sum(h * h, {0}));
         })(f32({6, 5}), f32({3, 5}), f32({3}));
       },
       [] { return std::vector<Tensor>{random::normal({6, 5}), random::normal({3, 5}), random::normal({3})}; }},
      {"a GEMM epilogue whose output's column sums are made in it (a bias gradient), a column sum step",
       [] {
         return compile([](Tensor a, Tensor w, Tensor h) {
           Tensor dz = matmul(a, transpose(w, 0, 1)) * (1.0f - h * h);
           return std::make_tuple(dz, sum(dz, {0}), sum(h, {0}));
         })(f32({6, 5}), f32({9, 5}), f32({6, 9}));
       },
       [] { return std::vector<Tensor>{random::normal({6, 5}), random::normal({9, 5}), random::normal({6, 9})}; }},
      {"a group absorbed by softmax, a group with a reduction",
       [] {
         return compile([](Tensor x, Tensor m, Tensor y) {
           return std::make_tuple(softmax(x * 0.25f + m, -1), sum(exp(y) * 2.0f, {1}));
         })(f32({4, 16}), f32({4, 16}), f32({3, 7}));
       },
       [] { return std::vector<Tensor>{random::normal({4, 16}), random::normal({4, 16}), random::normal({3, 7})}; }},
      {"layer_norm and a max, eager op steps and views",
       [] {
         return compile([](Tensor x) {
           Tensor y = layer_norm(x) + max(x, {1}, true);
           return std::make_tuple(cumsum(exp(y), 0) * 2.0f, reshape(transpose(y, 0, 1) * 3.0f, {16}));
         })(f32({2, 8}));
       },
       [] { return std::vector<Tensor>{random::normal({2, 8})}; }},
      {"a matmul large enough for the BLAS",
       [] { return compile([](Tensor x, Tensor w) { return relu(matmul(x, w)) * 0.5f; })(f32({260, 260}), f32({260, 260})); },
       [] { return std::vector<Tensor>{random::normal({260, 260}), random::normal({260, 260})}; }},
  };
}

uint32_t u32_at(const std::string& b, size_t at) {
  uint32_t v;
  std::memcpy(&v, b.data() + at, 4);
  return v;
}
uint64_t u64_at(const std::string& b, size_t at) {
  uint64_t v;
  std::memcpy(&v, b.data() + at, 8);
  return v;
}
void set_u32(std::string& b, size_t at, uint32_t v) { std::memcpy(b.data() + at, &v, 4); }
void set_u64(std::string& b, size_t at, uint64_t v) { std::memcpy(b.data() + at, &v, 8); }

}  // namespace

TEST_SUITE("mef plan") {
  TEST_CASE("ImmTable (a step's constant table) holds what a std::vector holds: inside up to 2, then on the heap") {
    std::vector<uint64_t> ref;
    codegen::ImmTable t;
    CHECK(t.empty());
    CHECK(sizeof(codegen::ImmTable) == sizeof(std::vector<uint64_t>));
    for (uint64_t k = 0; k < 9; ++k) {
      const uint64_t v = 0x9e3779b97f4a7c15ull * (k + 1);
      ref.push_back(v);
      t.push_back(v);
      REQUIRE(t.size() == ref.size());
      CHECK(std::equal(t.begin(), t.end(), ref.begin()));
      codegen::ImmTable copy(t);  // copies, then moves, at every size (inline and heap)
      CHECK(copy == t);
      codegen::ImmTable moved(std::move(copy));
      CHECK(moved == t);
      CHECK(copy.empty());
      codegen::ImmTable assigned;
      assigned.push_back(1);
      assigned = moved;
      CHECK(assigned == t);
      assigned = std::move(moved);
      CHECK(assigned == t);
      CHECK(moved.empty());
      assigned[0] ^= 1;
      CHECK(!(assigned == t));
    }
    codegen::ImmTable r;
    r.resize(3);
    CHECK(r.size() == 3);
    CHECK((r[0] == 0 && r[1] == 0 && r[2] == 0));
#if defined(__GNUC__) && !defined(__clang__)
#pragma GCC diagnostic push
    // GCC 12 follows data()'s inline branch here, not the heap it now uses
    // (3 > 2 inline entries), and reports r[2] outside the inline array.
#pragma GCC diagnostic ignored "-Warray-bounds"
#endif
    r[2] = 7;
#if defined(__GNUC__) && !defined(__clang__)
#pragma GCC diagnostic pop
#endif
    r.resize(1);
    r.resize(2);
    CHECK(r[1] == 0);  // entries past the size are zeroed when it grows again
    CHECK(r.data() != nullptr);
  }

  TEST_CASE("a read with PLAN (and CODE) restores the compiled plan: no planning, no code generated, the same bits") {
    std::set<codegen::PlanStep::Kind> kinds;
    for (const Case& k : cases()) {
      const std::string name = k.name;
      CAPTURE(name);
      CompiledCallable run = k.make();
      const codegen::ExecutionPlan& compiled = run.engine_model().artifact().plan();
      const mef::Contents c = contents_of(run);
      REQUIRE(!c.plan.empty());
      const std::string bytes = mef::encode(c);
      // the section survives decoding exactly
      CHECK(mef::decode(bytes, "x").plan == c.plan);
      const Read r = read(bytes);
      const codegen::ExecutionPlan& restored = r.art->plan();
      CHECK(restored.read_note() == "");
      CHECK(r.kernels_made == 0);
      CHECK(r.gemms_made == 0);
      // the same steps and memory plan
      REQUIRE(restored.steps().size() == compiled.steps().size());
      for (size_t s = 0; s < compiled.steps().size(); ++s) {
        const codegen::PlanStep &a = compiled.steps()[s], &b = restored.steps()[s];
        CHECK(a.kind == b.kind);
        CHECK(a.operands == b.operands);
        CHECK(a.inputs == b.inputs);
        CHECK(a.output == b.output);
        CHECK(a.output2 == b.output2);
        CHECK(a.imm_table == b.imm_table);
        CHECK((a.program && b.program ? *a.program == *b.program : a.program == b.program));
        if (a.kind != codegen::PlanStep::Kind::gemm_fused) CHECK(a.loop.shape == b.loop.shape);  // (unused there)
        CHECK(a.reduce_output == b.reduce_output);
        kinds.insert(a.kind);
      }
      CHECK(restored.arena_bytes() == compiled.arena_bytes());
      CHECK(restored.arena_offsets() == compiled.arena_offsets());
      CHECK(restored.release_after() == compiled.release_after());
      CHECK(restored.describe(false) == compiled.describe(false));
      // the same bits
      const std::vector<Tensor> in = k.inputs();
      check_same(run.execute_raw(std::span<const Tensor>(in)), run_model(r.art, in));
      // a PLAN without CODE: no planning, the kernels generated, the same bits
      const mef::Contents nc = contents_of(run, false, true);
      const Read r2 = read(mef::encode(nc));
      CHECK(r2.art->plan().read_note() == "");
      CHECK(r2.art->plan().describe(false) == compiled.describe(false));
      check_same(run.execute_raw(std::span<const Tensor>(in)), run_model(r2.art, in));
    }
    // every step kind was restored
    for (auto kind : {codegen::PlanStep::Kind::op, codegen::PlanStep::Kind::fused, codegen::PlanStep::Kind::row,
                      codegen::PlanStep::Kind::gemm, codegen::PlanStep::Kind::column_sum,
                      codegen::PlanStep::Kind::fused_row, codegen::PlanStep::Kind::gemm_fused})
      CHECK_MESSAGE(kinds.count(kind), "no step of kind " << int(kind));
  }

  TEST_CASE("restored small GEMMs with epilogues against a float64 reference") {
    CompiledCallable run = compile([](Tensor x, Tensor w) { return tanh(matmul(x, w) + 0.5f) * 2.0f; })(f32({4, 8}),
                                                                                                       f32({8, 8}));
    const Read r = read(mef::encode(contents_of(run)));
    bool epilogue = false;
    for (const auto& s : r.art->plan().steps()) epilogue |= s.kind == codegen::PlanStep::Kind::gemm_fused;
    CHECK(epilogue == (codegen::detect_cpu_target() >= codegen::CpuTarget::avx2));
    Tensor x = random::normal({4, 8}), w = random::normal({8, 8});
    const std::vector<Tensor> got = run_model(r.art, {x, w});
    const float *px = x.data<float>(), *pw = w.data<float>(), *py = got[0].data<float>();
    for (int i = 0; i < 4; ++i)
      for (int j = 0; j < 8; ++j) {
        double acc = 0;
        for (int k = 0; k < 8; ++k) acc += double(px[i * 8 + k]) * pw[k * 8 + j];
        const double want = std::tanh(acc + 0.5) * 2.0;
        CHECK(std::abs(py[i * 8 + j] - want) <= 1e-5 * (1 + std::abs(want)));
      }
  }

  TEST_CASE("a column-sum step of a transposed value (as earlier plans made it) restores and sums as eager does") {
    // Plans before tester t20's F9 summed sum(x.transpose(), {0}) as a
    // column-sum step of a contiguous copy (other bits than eager's); now
    // the sum is an op step. Such a file still reads, and its step runs
    // eager's reduce() on the view (a run and a capture).
    auto f = [](Tensor x) { return sum(x.transpose(), {0}); };
    CompiledCallable run = compile(f)(f32({33, 64}));
    mef::Contents c = contents_of(run);
    const auto& steps = run.engine_model().artifact().plan().steps();
    REQUIRE(steps.size() == 2);  // the permute and the sum, op steps
    REQUIRE(steps[1].op == OpId::Sum);
    std::string pat;  // u8 kind, u32 node for each
    for (const auto& st : steps) {
      REQUIRE(st.kind == codegen::PlanStep::Kind::op);
      pat += '\0';
      for (int b = 0; b < 4; ++b) pat += static_cast<char>((static_cast<uint32_t>(st.node) >> (8 * b)) & 0xff);
    }
    const size_t at = c.plan.find(pat);
    REQUIRE(at != std::string::npos);
    c.plan[at + 5] = static_cast<char>(codegen::PlanStep::Kind::column_sum);
    const Read r = read(mef::encode(c));
    CHECK(r.art->plan().read_note() == "");
    REQUIRE(r.art->plan().steps()[1].kind == codegen::PlanStep::Kind::column_sum);
    const Tensor x = random::normal({33, 64}, 0.0, 20.0);
    const Tensor want = f(x);
    CHECK_FALSE(kt::same_bits(want, sum(x.transpose().contiguous(), {0})));  // the two orders differ here
    CHECK(kt::same_bits(run_model(r.art, {x})[0], want));
    engine::Model m(r.art, {});
    const std::vector<Tensor> captured = m.capture(7, std::vector<Tensor>{x});
    CHECK(kt::same_bits(captured[0], want));
    m.replay(7, std::vector<Tensor>{x});
    CHECK(kt::same_bits(captured[0], want));
  }

  TEST_CASE("another key, another layout version or no PLAN section: the graph is planned, the note says why") {
    const Case k = cases()[2];
    CompiledCallable run = k.make();
    const std::vector<Tensor> in = k.inputs();
    const std::vector<Tensor> want = run.execute_raw(std::span<const Tensor>(in));
    mef::Contents c = contents_of(run);
    {
      auto strict = std::make_shared<InferenceSession>(KernelOptions{.strict = true});
      const Read r = read(mef::encode(c), strict);
      const std::string& note = r.art->plan().read_note();
      CHECK(note.find("planned on reading: the file's plan was made for '") == 0);
      CHECK(note.find(" strict") != std::string::npos);  // this kiln's key names strict mode
      const std::vector<Tensor> got = run_model(r.art, in);
      for (size_t i = 0; i < got.size(); ++i) CHECK(allclose(got[i], want[i], 1e-5, 1e-5));
    }
    {
      auto unfused = std::make_shared<InferenceSession>(KernelOptions{.fuse = false});
      const Read r = read(mef::encode(c), unfused);
      CHECK(r.art->plan().read_note().find("fusion off") != std::string::npos);
      for (const auto& s : r.art->plan().steps()) CHECK(s.kind == codegen::PlanStep::Kind::op);
      const std::vector<Tensor> got = run_model(r.art, in);
      for (size_t i = 0; i < got.size(); ++i) CHECK(allclose(got[i], want[i], 1e-5, 1e-5));
    }
    {
      mef::Contents v = c;
      set_u32(v.plan, 0, 99);
      const Read r = read(mef::encode(v));
      CHECK(r.art->plan().read_note() == "planned on reading: the file's plan has layout version 99, this kiln reads " +
                                                std::to_string(mef::kPlanLayoutVersion));
      check_same(want, run_model(r.art, in));
    }
    {
      mef::Contents v = c;
      v.plan.clear();
      const std::string bytes = mef::encode(v);
      CHECK(bytes.find("PLAN") == std::string::npos);
      const Read r = read(bytes);
      CHECK(r.art->plan().read_note() == "planned on reading: the file has no PLAN section");
      check_same(want, run_model(r.art, in));
    }
  }

  TEST_CASE("a read with CODE and no PLAN plans the graph but places the GEMMs with epilogues from CODE") {
    CompiledCallable run = cases()[1].make();
    const mef::Contents c = contents_of(run, true, false);
    size_t gemm_images = 0;
    for (const auto& k : c.code.kernels) gemm_images += k.program.rfind("sgemm ", 0) == 0;
    const bool generated_gemms = codegen::detect_cpu_target() >= codegen::CpuTarget::avx2;
    CHECK((gemm_images >= 1) == generated_gemms);
    const Read r = read(mef::encode(c));
    CHECK(r.art->plan().read_note() == "planned on reading: the file has no PLAN section");
    CHECK(r.gemms_made == 0);
    const std::vector<Tensor> in = cases()[1].inputs();
    check_same(run.execute_raw(std::span<const Tensor>(in)), run_model(r.art, in));
  }

  TEST_CASE("export_mef writes PLAN by default; a re-export of a restored plan is the same section") {
    CompiledCallable run = cases()[1].make();
    const mef::Contents c = contents_of(run);
    const Read r = read(mef::encode(c));
    CHECK(mef::encode_plan(r.art->plan()) == c.plan);
    TempFile f;
    run.export_mef(f.path.string());
    const mef::Contents e = mef::decode(slurp(f.path.string()), "f.mef");
    CHECK(e.plan == c.plan);
    CHECK(engine::read(f.path.string())->plan().read_note() == "");
  }

  TEST_CASE("a PLAN whose constant table or instructions were edited (checksums recomputed) is refused, naming PLAN and the field") {
    // y = x * 2.5 + 1: the fused step reads 2.5 and 1 from its constant
    // table. Editing 2.5 into 7 in the PLAN payload and writing the file
    // again (mef::encode: every checksum right) used to load and compute
    // x * 7 + 1; the table is now checked against the graph's constants.
    CompiledCallable run = compile([](Tensor x) { return x * 2.5f + 1.0f; })(f32({4, 33}));
    Tensor x = random::normal({4, 33});
    mef::Contents c = contents_of(run);
    REQUIRE_FALSE(c.plan.empty());
    // the untouched file: restored plan, y = 2.5 x + 1 (float32 reference loop, one rounding each)
    {
      Read r = read(mef::encode(c));
      CHECK(r.art->plan().read_note() == "");
      const Tensor y = run_model(r.art, {x})[0];
      const std::vector<float> xs = x.to_vector<float>(), ys = y.to_vector<float>();
      for (size_t i = 0; i < xs.size(); ++i) {
        volatile float product = xs[i] * 2.5f;  // rounded (no contraction into an fma here)
        const float fused = std::fmaf(xs[i], 2.5f, 1.0f), rounded_twice = product + 1.0f;
        CHECK((ys[i] == fused || ys[i] == rounded_twice));
      }
    }
    uint64_t from = 0, to = 0;
    const float f25 = 2.5f, f7 = 7.0f;
    std::memcpy(&from, &f25, 4);
    std::memcpy(&to, &f7, 4);
    std::string from_b(8, '\0'), to_b(8, '\0');
    std::memcpy(from_b.data(), &from, 8);
    std::memcpy(to_b.data(), &to, 8);
    const size_t at = c.plan.find(from_b);
    REQUIRE(at != std::string::npos);
    REQUIRE(c.plan.find(from_b, at + 1) == std::string::npos);  // the one table entry
    c.plan.replace(at, 8, to_b);
    const std::string e = read_error(mef::encode(c));
    CHECK(e.find("section 'PLAN' (the execution plan) is malformed at byte ") != std::string::npos);
    CHECK(e.find("table constant 0 is 0x40e00000, but fused node ") != std::string::npos);
    CHECK(e.find(" (mul) reads the graph's constant %") != std::string::npos);
    CHECK(e.find("(float32[] cpu) with the bits 0x40200000") != std::string::npos);
    // the same for an instruction: the program's add edited into a sub
    mef::Contents c2 = contents_of(run);
    const std::string add_name = std::string("\x03\0\0\0", 4) + "add", sub_name = std::string("\x03\0\0\0", 4) + "sub";
    const size_t op_at = c2.plan.find(add_name);
    REQUIRE(op_at != std::string::npos);
    REQUIRE(c2.plan.find(add_name, op_at + 1) == std::string::npos);
    c2.plan.replace(op_at, add_name.size(), sub_name);
    const std::string e2 = read_error(mef::encode(c2));
    CHECK(e2.find("section 'PLAN' (the execution plan) is malformed at byte ") != std::string::npos);
    CHECK(e2.find("(sub) is not fused node ") != std::string::npos);
    CHECK(e2.find(" (add) with its attributes and dtype") != std::string::npos);
  }

  TEST_CASE("each kind of damage to the PLAN section is a ValueError naming PLAN, the byte and the field") {
    // No fusion: every step an op step, so the layout's offsets are simple:
    // version, key, node and value counts, 0 programs, the step count, steps
    // of a kind byte and a node, then the arena.
    CompileOptions o;
    o.session = std::make_shared<InferenceSession>(KernelOptions{.fuse = false});
    CompiledCallable run = compile([](Tensor x) { return exp(x) * 2.0f + 1.0f; }, o)(f32({3, 5}));
    const mef::Contents c = contents_of(run);
    const std::string& p = c.plan;
    const size_t L = u32_at(p, 4), nodes = 8 + L, programs = 16 + L, steps = 20 + L, step0 = 24 + L;
    REQUIRE(u32_at(p, programs) == 0);
    REQUIRE(u32_at(p, steps) == 3);
    REQUIRE(p.size() > step0 + 15);
    auto err = [&](const std::function<void(std::string&)>& edit) {
      mef::Contents v = c;
      edit(v.plan);
      return read_error(mef::encode(v), o.session);
    };
    auto at = [](size_t byte) { return "section 'PLAN' (the execution plan) is malformed at byte " + std::to_string(byte) + " of "; };
    CHECK(err([](std::string&) {}) == "(no error)");
    std::string e = err([&](std::string& b) { b[step0] = 9; });
    CHECK(e.find(at(step0)) != std::string::npos);
    CHECK(e.find("unknown step kind 9") != std::string::npos);
    CHECK(e.rfind("engine::read: 'plan.mef': ", 0) == 0);
    e = err([&](std::string& b) { set_u32(b, step0 + 1, 4000); });
    CHECK(e.find(at(step0 + 1)) != std::string::npos);
    CHECK(e.find("an op step's node: node 4000 is out of range") != std::string::npos);
    e = err([&](std::string& b) { set_u32(b, step0 + 1, 0); });  // node 0: the input
    CHECK(e.find(at(step0) + std::to_string(p.size()) + ": step 0: node 0 is not an op") != std::string::npos);
    e = err([&](std::string& b) { set_u32(b, step0 + 6, u32_at(b, step0 + 1)); });  // step 1 runs step 0's node again
    CHECK(e.find("step 1: writes value %") != std::string::npos);
    CHECK(e.find("a second time") != std::string::npos);
    e = err([&](std::string& b) { std::swap(b[step0 + 1], b[step0 + 6]); });  // steps swapped: a read before the write
    CHECK(e.find("before it is written") != std::string::npos);
    e = err([&](std::string& b) { set_u32(b, nodes, 1); });
    CHECK(e.find(at(nodes)) != std::string::npos);
    CHECK(e.find("the plan is for a graph of 1 nodes") != std::string::npos);
    e = err([&](std::string& b) { set_u32(b, steps, 0x7fffffff); });
    CHECK(e.find(at(steps + 4)) != std::string::npos);
    CHECK(e.find("the step count says 2147483647 items") != std::string::npos);
    e = err([&](std::string& b) { set_u32(b, programs, 0x10000000); });
    CHECK(e.find(at(programs + 4)) != std::string::npos);
    CHECK(e.find("the program count says 268435456 items") != std::string::npos);
    e = err([&](std::string& b) { b += 'x'; });
    CHECK(e.find("1 unexpected bytes at the end") != std::string::npos);
    // the arena: its last slot (u32 value, u64 offset) ends the section
    REQUIRE(run.engine_model().artifact().plan().arena_bytes() > 0);
    const size_t slot = p.size() - 12;
    e = err([&](std::string& b) { set_u64(b, slot + 4, uint64_t(1) << 40); });
    CHECK(e.find(at(slot)) != std::string::npos);
    CHECK(e.find("does not fit an arena of") != std::string::npos);
    e = err([&](std::string& b) { set_u64(b, slot + 4, 8); });
    CHECK(e.find("at arena offset 8 does not fit") != std::string::npos);  // not 64-byte aligned
    e = err([&](std::string& b) { set_u32(b, slot, 0x7ffffff0); });
    CHECK(e.find("out of range") != std::string::npos);
    e = err([&](std::string& b) { set_u32(b, slot, 0); });  // the input's value
    CHECK(e.find("has an arena slot but no step writes it") != std::string::npos);
    // exp's result (step 0) is still read by the multiplication (step 1)
    // that writes the other slot: one offset for both is refused
    {
      const auto& offsets = run.engine_model().artifact().plan().arena_offsets();
      REQUIRE(std::count_if(offsets.begin(), offsets.end(), [](int64_t o) { return o >= 0; }) == 2);
      REQUIRE(u32_at(p, slot - 12) != u32_at(p, slot));
      REQUIRE(u64_at(p, slot - 12 + 4) != u64_at(p, slot + 4));
    }
    e = err([&](std::string& b) { set_u64(b, slot + 4, u64_at(b, slot - 12 + 4)); });
    CHECK(e.find(at(slot)) != std::string::npos);
    CHECK(e.find("are live at the same step and overlap in the arena") != std::string::npos);
    CHECK(e.find("float32[3, 5]") != std::string::npos);
    // every truncation
    for (size_t n = 1; n < p.size(); ++n) {
      CAPTURE(n);
      e = err([&](std::string& b) { b.resize(n); });
      CHECK(e.find("section 'PLAN' (the execution plan) is malformed at byte ") != std::string::npos);
    }
  }

  TEST_CASE("single-bit and byte damage anywhere in a fused plan: a ValueError naming PLAN, another plan, or the same one; never a crash") {
    for (int which : {1, 2, 3}) {
      const Case k = cases()[which];
      const std::string name = k.name;
      CAPTURE(name);
      CompiledCallable run = k.make();
      const mef::Contents c = contents_of(run);
      const std::vector<Tensor> in = k.inputs();
      int errors = 0;
      for (size_t i = 0; i < c.plan.size(); ++i)
        for (unsigned char mask : {0x01, 0x80, 0xff}) {
          mef::Contents v = c;
          v.plan[i] = static_cast<char>(v.plan[i] ^ mask);
          std::shared_ptr<const engine::CompiledModel> art;
          try {
            art = engine::read_bytes(mef::encode(v), "plan.mef");
          } catch (const ValueError& e) {
            const std::string m = e.what();
            CHECK_MESSAGE(m.find("section 'PLAN' (the execution plan) is malformed at byte ") != std::string::npos,
                          "byte " << i << ": " << m);
            ++errors;
            continue;
          }
          // what loads runs (wrong numbers at worst: a changed constant), or raises an Error
          try {
            (void)art->plan().describe(false);
            (void)run_model(art, in);
          } catch (const Error&) {
          }
        }
      CHECK(errors > static_cast<int>(c.plan.size()));
    }
  }
}
