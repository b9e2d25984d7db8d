// Differential fuzzer: random graphs (1 to 30 ops from the op table, random
// shapes with broadcasting and size-0/size-1 dims, random strides, every
// dtype) run eagerly, compiled, and in float64 (the reference); compiled
// must match eager within the documented tolerance, and bitwise in strict
// mode. CI runs 1,000 graphs from fixed seeds; KILN_FUZZ_GRAPHS=N runs more.
// Some ops write in place (into an input or an earlier value, with an operand
// that may be a flipped view aliasing the destination): the written inputs
// are compared too (compiled writes them back when the call ends).
#include <cstdlib>
#include <cstring>
#include <functional>
#include <random>

#include "fuzz_cases.h"
#include "test_util.h"

using namespace kiln;

namespace {
using namespace kiln::fuzz_cases;

double tolerance(DType d) {
  switch (d) {
    case DType::float16: return 2e-2;
    case DType::bfloat16: return 1e-1;
    case DType::float32: return 1e-4;
    case DType::float64: return 1e-9;
    default: return 0;
  }
}

// About one unit in the last place of dtype d (relative).
double ulp_of(DType d) {
  switch (d) {
    case DType::float16: return 0x1p-10;
    case DType::bfloat16: return 0x1p-7;
    case DType::float64: return 0x1p-52;
    default: return 0x1p-23;
  }
}

int graphs_to_run() {
  const char* e = std::getenv("KILN_FUZZ_GRAPHS");
  return e ? std::max(1, std::atoi(e)) : 1000;
}

// KILN_FUZZ_FIRST=S starts at seed S (to replay one failing seed).
uint64_t first_seed() {
  const char* e = std::getenv("KILN_FUZZ_FIRST");
  return e ? std::strtoull(e, nullptr, 10) : 1000;
}


void fuzz(bool strict) {
  auto session = std::make_shared<InferenceSession>(KernelOptions{.strict = strict});
  const int n = graphs_to_run();
  int failures = 0;
  int64_t compared = 0, skipped = 0;
  for (int g = 0; g < n && failures < 5; ++g) {
    const uint64_t seed = first_seed() + static_cast<uint64_t>(g);
    FuzzCase c = make_case(seed);
    auto fn = [&c](std::vector<Tensor> xs) { return run_case(c, xs); };
    // Each run gets its own copies (same layouts): in-place ops write into them.
    std::vector<Tensor> eager_in = clone_like(c.inputs), got_in = clone_like(c.inputs);
    std::vector<Tensor> eager = run_case(c, eager_in);
    CompileOptions co;
    co.session = session;
    CompiledCallable run = compile(fn, co)(c.inputs);
    std::vector<Tensor> got = run(got_in).as<std::vector<Tensor>>();
    // written inputs are results too
    for (size_t i = 0; i < c.inputs.size(); ++i) {
      got.push_back(got_in[i]);
      eager.push_back(eager_in[i]);
    }
    // float64 reference: the same program on float64 copies of the inputs.
    std::vector<Tensor> ref, ref_nudged;
    if (is_floating(c.dtype)) {
      std::vector<Tensor> x64, x64n;
      for (auto& t : c.inputs) {
        x64.push_back(t.to(DType::float64));
        // The inputs moved by about one ulp of the case's dtype: where the
        // float64 results move by more than the tolerance, the element is
        // ill-conditioned (cos(exp(x^2)) at x = 5) and any two correct
        // roundings may disagree, so it is not compared.
        x64n.push_back(x64.back() * (1.0 + ulp_of(c.dtype)));
      }
      ref = run_case(c, x64);
      ref_nudged = run_case(c, x64n);
      for (size_t i = 0; i < x64.size(); ++i) {
        ref.push_back(x64[i]);
        ref_nudged.push_back(x64n[i]);
      }
    }
    REQUIRE(got.size() == eager.size());
    for (size_t k = 0; k < got.size(); ++k) {
      CAPTURE(seed);
      CAPTURE(k);
      REQUIRE(got[k].shape() == eager[k].shape());
      REQUIRE(got[k].dtype() == eager[k].dtype());
      auto gv = kt::values(got[k]), ev = kt::values(eager[k]);
      std::vector<char> ill(gv.size(), 0);
      if (!ref.empty()) {
        const auto rv = kt::values(ref[k]), nv = kt::values(ref_nudged[k]);
        for (size_t i = 0; i < gv.size(); ++i)
          ill[i] = !kt::close(nv[i], rv[i], tolerance(c.dtype) / 4, tolerance(c.dtype) / 4);
      }
      for (size_t i = 0; i < gv.size(); ++i) {
        if (!strict && ill[i]) {
          ++skipped;
          continue;
        }
        ++compared;
        bool ok = strict ? (std::memcmp(&gv[i], &ev[i], sizeof(double)) == 0 || (std::isnan(gv[i]) && std::isnan(ev[i])))
                         : kt::close(gv[i], ev[i], tolerance(c.dtype), tolerance(c.dtype));
        if (!ok) {
          ++failures;
          std::string prog;
          for (const auto& op : c.ops)
            prog += std::to_string(op.kind) + ":" + std::string(op_name(op.op)) + "(" + std::to_string(op.a) + "," +
                    std::to_string(op.b) + ") ";
          FAIL_CHECK("program " << prog << " dtype " << name(c.dtype));
          FAIL_CHECK("seed " << seed << " output " << k << " element " << i << ": compiled " << gv[i] << " eager "
                             << ev[i] << std::string(strict ? " (strict: must be bitwise equal)" : ""));
          break;
        }
      }
      if (!ref.empty() && c.dtype == DType::float32) {
        // Both must be near the float64 reference (loose: chains amplify rounding).
        auto rv = kt::values(ref[k]);
        int far = 0;
        for (size_t i = 0; i < gv.size(); ++i)
          far += !ill[i] && !kt::close(gv[i], rv[i], 1e-2, 1e-3) && !kt::close(ev[i], rv[i], 1e-2, 1e-3);
        CHECK_MESSAGE(far == 0, "seed " << seed << ": compiled and eager both far from the float64 reference");
      }
    }
  }
  MESSAGE(compared << " elements compared, " << skipped << " ill-conditioned ones skipped");
  // The conditioning filter must stay an exception, not hide the comparison.
  CHECK(skipped * 50 <= compared);
  CHECK(failures == 0);
}

}  // namespace

TEST_SUITE("fuzz") {
  TEST_CASE("compiled matches eager on random graphs (documented tolerance)") { fuzz(false); }
  TEST_CASE("strict mode: compiled is bitwise equal to eager on random graphs") { fuzz(true); }
}
