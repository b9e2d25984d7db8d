// Eager float32 exp runs the code generator's vector math
// (backends/cpu/jit/unary_vmath.h) on every CPU target, tanh on the AVX2
// and AVX-512 targets (Eigen's on SSE2): checked here against
// a float64 reference (std::exp / std::tanh in double) on edge inputs (NaN,
// +-inf, +-0, subnormals, exp's overflow and underflow bounds, tanh's
// saturation), on runs whose length is no multiple of the vector width, for
// position independence (a value's result does not depend on where it sits
// in the run, on strides or on the thread split) and bitwise against the
// compiled (where eager runs the generated code) and strict-compiled forms.
#include <omp.h>

#include <algorithm>
#include <bit>
#include <cfloat>
#include <cmath>
#include <cstdint>
#include <cstdlib>
#include <limits>
#include <random>
#include <string>
#include <vector>

#include "../backends/cpu/jit/unary_vmath.h"
#include "../backends/cpu/stream_store.h"
#include "../jit/elementwise_program.h"
#include "test_util.h"
#include "ulp_env.h"

namespace {

using namespace kiln;
using codegen::CpuTarget;

constexpr float kInf = std::numeric_limits<float>::infinity();
constexpr float kNaN = std::numeric_limits<float>::quiet_NaN();

uint32_t bits(float f) { return std::bit_cast<uint32_t>(f); }
bool same(float a, float b) { return bits(a) == bits(b) || (std::isnan(a) && std::isnan(b)); }



std::vector<CpuTarget> targets() {
  std::vector<CpuTarget> v;
  for (CpuTarget t : {CpuTarget::sse2, CpuTarget::avx2, CpuTarget::avx512})
    if (t <= codegen::detect_cpu_target()) v.push_back(t);
  return v;
}

/// Edge inputs of exp and tanh, then random values over the whole range
/// that matters (len elements in all).
std::vector<float> edge_inputs(size_t len) {
  const float ln_max = std::log(FLT_MAX);  // 88.72284: e^x overflows just above
  std::vector<float> v = {
      kNaN, -kNaN, kInf, -kInf, 0.0f, -0.0f,
      // subnormal and tiny inputs (exp = 1, tanh = x)
      std::numeric_limits<float>::denorm_min(), -std::numeric_limits<float>::denorm_min(), 1e-40f, -1e-40f,
      FLT_MIN, -FLT_MIN, 1e-8f, -1e-8f, 0x1p-12f, -0x1p-12f,
      // exp's overflow bound
      ln_max, std::nextafter(ln_max, 0.0f), std::nextafter(ln_max, 100.0f), 88.72f, 88.73f, 89.0f, 100.0f, 1e30f,
      FLT_MAX,
      // exp's normal/subnormal boundary (e^x = FLT_MIN at x = -87.33655) and its underflow to 0
      // (e^x = 2^-149 at x = -103.27893, half of it at -103.97208)
      -87.33654f, -87.33655f, -87.33656f, -87.5f, -95.0f, -100.0f, -103.27892f, -103.27893f, -103.278935f,
      -103.9720f, -103.9721f, -103.97208f, -104.0f, -110.0f, -150.0f, -1e30f, -FLT_MAX,
      // exp near 0 and integers (exact powers of e do not exist; 2^k scaling paths)
      0.5f, -0.5f, 1.0f, -1.0f, 0.34657359f, 0.69314718f, -0.69314718f, 10.0f, -10.0f, 50.0f, -50.0f,
      // tanh: small |x|, the switch between forms, saturation to +-1
      0x1p-8f, -0x1p-8f, 1e-3f, -1e-3f, 0.55f, -0.55f, 0.625f, -0.625f, 2.0f, -2.0f, 8.0f, -8.0f, 9.0f, -9.0f,
      9.01f, -9.01f, 10.0f, -10.0f, 20.0f, -20.0f};
  std::mt19937 rng(18);
  std::uniform_real_distribution<float> wide(-110.0f, 95.0f), narrow(-5.0f, 5.0f);
  std::uniform_int_distribution<uint32_t> any;
  while (v.size() < len) {
    const size_t k = v.size() % 3;
    v.push_back(k == 0 ? wide(rng) : k == 1 ? narrow(rng) : std::bit_cast<float>(any(rng)));
  }
  v.resize(len);
  return v;
}

Tensor f32(const std::vector<float>& v) { return Tensor::from_vector(v, {int64_t(v.size())}); }

/// Inputs around the bounds of exp's AVX2/SSE2 fast path (every lane's
/// k = round(x log2e) in [-125, 127], vmath.cpp: exp_fast_path): x = k ln2
/// +- a little for k = -127..-123 and 125..129 (so vectors hold lanes on
/// both sides), and the same for -x (exp's negated form is not used here,
/// but tanh's reduction runs on -2|x|).
std::vector<float> fast_path_bounds() {
  std::vector<float> v;
  for (int k : {-127, -126, -125, -124, -123, 125, 126, 127, 128, 129})
    for (double d : {-0.5, -0.49, -0.2, 0.0, 0.2, 0.49, 0.5}) {
      const float x = float((k + d) * 0.69314718055994530942);
      v.push_back(x);
      v.push_back(std::nextafter(x, 0.0f));
      v.push_back(-x);
    }
  return v;
}

/// body(t, op) for exp and tanh on each target this CPU runs, with
/// KILN_JIT_TARGET set to that target.
template <class Body>
void each_target_and_op(Body&& body) {
  for (CpuTarget t : targets()) {
    EnvTarget env(codegen::cpu_target_name(t));
    const std::string tn = codegen::cpu_target_name(t);
    CAPTURE(tn);
    for (OpId op : {OpId::Exp, OpId::Tanh}) {
      CAPTURE(op_name(op));
      body(t, op);
    }
  }
}

/// Fails a check for each y[i] more than `bound` ulp from op(xs[i])
/// computed in float64 (the first five shown); returns the largest error.
double check_ulp(OpId op, const std::vector<float>& xs, const float* y, double bound) {
  double worst = 0;
  int bad = 0;
  for (size_t i = 0; i < xs.size(); ++i) {
    const double ref = op == OpId::Exp ? std::exp(double(xs[i])) : std::tanh(double(xs[i]));
    const double e = ulp_error(y[i], ref);
    worst = std::max(worst, e);
    if (e > bound && bad++ < 5)
      FAIL_CHECK(op_name(op) << "(" << xs[i] << ") = " << y[i] << ", float64 " << ref << ": " << e << " ulp");
  }
  CHECK(bad == 0);
  return worst;
}

/// fn(ptrs = {y, x}, n) of a cached_unary_vmath kernel.
void run_kernel(codegen::InnerLoopFn fn, float* y, const float* x, int64_t n) {
  char* p[2] = {reinterpret_cast<char*>(y), reinterpret_cast<char*>(const_cast<float*>(x))};
  const int64_t st[2] = {4, 4};
  fn(p, st, n);
}

}  // namespace

TEST_SUITE("eager_vmath") {
  TEST_CASE("eager float32 exp and tanh against float64 on edge inputs, every target and run length") {
    const std::vector<float> xs = edge_inputs(1000);
    each_target_and_op([&](CpuTarget t, OpId op) {
      // vmath_alg.h's bounds; on SSE2 eager tanh is Eigen's (ref_ops.h: <= 6 ulp measured)
      const bool generated = op == OpId::Exp || t != CpuTarget::sse2;
      const double bound = op == OpId::Exp ? 2.0 : generated ? 4.0 : 6.0;
      const Tensor y = op == OpId::Exp ? kiln::exp(f32(xs)) : kiln::tanh(f32(xs));
      REQUIRE(y.dtype() == DType::float32);
      const float* py = y.data<float>();
      const double worst = check_ulp(op, xs, py, bound);
      MESSAGE(op_name(op) << " on " << std::string(codegen::cpu_target_name(t)) << ": max " << worst << " ulp on " << xs.size()
                          << " edge and random inputs");
      // exact special values and bounds
      if (op == OpId::Exp) {
        CHECK(py[2] == kInf);              // exp(inf)
        CHECK(bits(py[3]) == bits(0.0f));  // exp(-inf) = +0
        CHECK(py[4] == 1.0f);
        CHECK(py[5] == 1.0f);
      } else {
        CHECK(py[2] == 1.0f);
        CHECK(py[3] == -1.0f);
        CHECK(bits(py[4]) == bits(0.0f));
        CHECK(bits(py[5]) == bits(-0.0f));
        CHECK(bits(py[6]) == bits(xs[6]));  // tanh(denorm_min) = denorm_min
        CHECK(bits(py[7]) == bits(xs[7]));
      }
      CHECK(std::isnan(py[0]));
      CHECK(std::isnan(py[1]));
      // Runs of every length 1..67 (tails of no multiple of 4, 8 or 16
      // elements) starting at every offset 0..3 give each value the bits
      // it has in the long run.
      for (int64_t off = 0; off < 4; ++off)
        for (int64_t n = 1; n <= 67; ++n) {
          const Tensor x = kiln::slice(f32(xs), 0, off, off + n);
          const Tensor r = op == OpId::Exp ? kiln::exp(x) : kiln::tanh(x);
          const float* pr = r.data<float>();
          int diff = 0;
          for (int64_t i = 0; i < n; ++i) diff += !same(pr[i], py[off + i]);
          if (diff) FAIL_CHECK("run of " << n << " at offset " << off << ": " << diff << " values differ");
        }
    });
  }

  TEST_CASE("eager exp and tanh: strides, 16-bit floats, in place and the thread split keep the bits") {
    const std::vector<float> xs = edge_inputs(70001);
    const Tensor x = f32(xs);
    for (OpId op : {OpId::Exp, OpId::Tanh}) {
      CAPTURE(op_name(op));
      auto f = [op](const Tensor& a) { return op == OpId::Exp ? kiln::exp(a) : kiln::tanh(a); };
      const Tensor y = f(x);
      const float* py = y.data<float>();
      // every other element (strided, staged in blocks) and a reversed view
      {
        const Tensor s = f(kiln::slice(x, 0, 0, int64_t(xs.size()), 2));
        const float* ps = s.data<float>();
        int diff = 0;
        for (int64_t i = 0; i < s.numel(); ++i) diff += !same(ps[i], py[2 * i]);
        CHECK(diff == 0);
        const Tensor r = f(kiln::flip(x, {0})).contiguous();
        const float* pr = r.data<float>();
        diff = 0;
        for (int64_t i = 0; i < r.numel(); ++i) diff += !same(pr[i], py[int64_t(xs.size()) - 1 - i]);
        CHECK(diff == 0);
      }
      // one thread and two give the same bits
      {
        const int before = omp_get_max_threads();
        omp_set_num_threads(1);
        const Tensor one = f(x);
        omp_set_num_threads(2);
        const Tensor two = f(x);
        omp_set_num_threads(before);
        int diff = 0;
        for (int64_t i = 0; i < one.numel(); ++i)
          diff += !same(one.data<float>()[i], py[i]) + !same(two.data<float>()[i], py[i]);
        CHECK(diff == 0);
      }
      // float16 / bfloat16: computed in float32 (the same kernel), rounded once
      for (DType d : {DType::float16, DType::bfloat16}) {
        CAPTURE(name(d));
        const Tensor h = kiln::slice(x, 0, 0, 4096).to(d);
        const Tensor got = f(h).to(DType::float32);
        const Tensor want = f(h.to(DType::float32)).to(d).to(DType::float32);
        int diff = 0;
        for (int64_t i = 0; i < got.numel(); ++i) diff += !same(got.data<float>()[i], want.data<float>()[i]);
        CHECK(diff == 0);
      }
      // in place
      {
        Tensor z = x.clone();
        if (op == OpId::Exp) z.exp_();
        else z.tanh_();
        int diff = 0;
        for (int64_t i = 0; i < z.numel(); ++i) diff += !same(z.data<float>()[i], py[i]);
        CHECK(diff == 0);
      }
    }
  }

  TEST_CASE("eager exp and tanh equal the compiled and strict-compiled results bitwise") {
    const std::vector<float> xs = edge_inputs(1003);
    const Tensor x = f32(xs);
    for (OpId op : {OpId::Exp, OpId::Tanh}) {
      CAPTURE(op_name(op));
      auto f = [op](Tensor a) { return op == OpId::Exp ? kiln::exp(a) : kiln::tanh(a); };
      const Tensor eager = f(x);
      // on SSE2 eager tanh is Eigen's: only the strict compile runs it
      const bool generated = op == OpId::Exp || codegen::detect_cpu_target() != CpuTarget::sse2;
      const Tensor compiled = compile(f)(x.layout())(x).tensor();
      CompileOptions so;
      so.session = std::make_shared<InferenceSession>(KernelOptions{.strict = true});
      const Tensor strict = compile(f, so)(x.layout())(x).tensor();
      int dc = 0, ds = 0;
      for (int64_t i = 0; i < x.numel(); ++i) {
        dc += !same(compiled.data<float>()[i], eager.data<float>()[i]);
        ds += !same(strict.data<float>()[i], eager.data<float>()[i]);
      }
      if (generated) CHECK(dc == 0);
      CHECK(ds == 0);
    }
  }

  TEST_CASE("streaming-store kernels of exp and tanh: the plain kernel's bits, float64 bounds, every target") {
    // Eager exp/tanh on outputs of ew::kStreamMinBytes and more run
    // cached_unary_vmath(op, streaming = true): the same generated code with
    // non-temporal stores on runs of >= kStreamMinElements with a 64-byte
    // aligned output. Checked here: edge inputs, lanes straddling exp's
    // fast-path bounds, run lengths below, at and above the streaming
    // threshold and no multiple of the vector width, outputs at every
    // alignment 0..15 floats past a 64-byte boundary (guards around them
    // untouched), in place; then eager on a streamed output.
    std::vector<float> xs = edge_inputs(3 * 4096 + 77);
    const std::vector<float> fb = fast_path_bounds();
    for (size_t i = 0; i < fb.size(); ++i) xs[100 + 37 * i] = fb[i];  // scattered: vectors mix both sides
    const int64_t n_all = int64_t(xs.size());
    each_target_and_op([&](CpuTarget t, OpId op) {
      const codegen::InnerLoopFn plain = codegen::cached_unary_vmath(op);
      const codegen::InnerLoopFn strm = codegen::cached_unary_vmath(op, /*streaming=*/true);
      if (op == OpId::Tanh && t == CpuTarget::sse2) {  // Eigen's tanh there
        const bool neither = plain == nullptr && strm == nullptr;
        CHECK(neither);
        return;
      }
      const bool both = plain != nullptr && strm != nullptr, distinct = strm != plain;
      REQUIRE(both);
      CHECK(distinct);
      // the plain kernel's values against float64
      std::vector<float> want(xs.size());
      run_kernel(plain, want.data(), xs.data(), n_all);
      check_ulp(op, xs, want.data(), op == OpId::Exp ? 2.0 : 4.0);
      // the streaming kernel: the same bits at every length and alignment
      const Tensor buf = Tensor::empty({n_all + 64}, DType::float32);  // 64-byte aligned (allocator)
      float* const b = buf.data<float>();
      REQUIRE(reinterpret_cast<uintptr_t>(b) % 64 == 0);
      const float guard = -12345.5f;
      for (int64_t n : {int64_t(1), int64_t(7), int64_t(4095), int64_t(4096), int64_t(4097), int64_t(4096 + 13),
                        int64_t(2 * 4096 + 8), n_all - 16})
        for (int64_t off : {0, 1, 5, 8, 15, 16}) {
          CAPTURE(n);
          CAPTURE(off);
          const int64_t x0 = n == n_all - 16 ? 16 - (off & 1) : 0;  // input misaligned against the output too
          std::fill(b, b + n_all + 64, guard);
          run_kernel(strm, b + off, xs.data() + x0, n);
          int diff = 0, touched = 0;
          for (int64_t i = 0; i < n; ++i) diff += !same(b[off + i], want[size_t(x0 + i)]);
          for (int64_t i = 0; i < off; ++i) touched += b[i] != guard;
          for (int64_t i = off + n; i < n_all + 64; ++i) touched += b[i] != guard;
          CHECK(diff == 0);
          CHECK(touched == 0);
        }
      // in place (y == x), streamed
      {
        std::copy(xs.begin(), xs.end(), b);
        run_kernel(strm, b, b, n_all);
        int diff = 0;
        for (int64_t i = 0; i < n_all; ++i) diff += !same(b[i], want[size_t(i)]);
        CHECK(diff == 0);
      }
      // eager on an output above the streaming threshold (two threads):
      // the plain kernel's bits, so those of compiled code on this target
      {
        const int64_t n = cpu::ew::kStreamMinBytes / 4 + 19;
        std::vector<float> big(static_cast<size_t>(n));
        for (int64_t i = 0; i < n; ++i) big[size_t(i)] = xs[size_t(i % n_all)];
        const Tensor bx = f32(big);
        const int before = omp_get_max_threads();
        omp_set_num_threads(2);
        const Tensor y = op == OpId::Exp ? kiln::exp(bx) : kiln::tanh(bx);
        omp_set_num_threads(before);
        int64_t diff = 0;
        for (int64_t i = 0; i < n; ++i) diff += !same(y.data<float>()[i], want[size_t(i % n_all)]);
        CHECK(diff == 0);
      }
    });
  }

  TEST_CASE("eager float64 exp and tanh keep the float64 kernels") {
    const std::vector<double> xs = {0.0, -0.0, 1.0, -1.0, 700.0, -700.0, 709.7, -745.0, 1e-300, 0.5, 20.0, -20.0};
    const Tensor x = Tensor::from_vector(xs, {int64_t(xs.size())});
    const Tensor e = kiln::exp(x), t = kiln::tanh(x);
    REQUIRE(e.dtype() == DType::float64);
    for (size_t i = 0; i < xs.size(); ++i) {
      CAPTURE(xs[i]);
      const double we = std::exp(xs[i]), wt = std::tanh(xs[i]);
      CHECK(std::fabs(e.data<double>()[i] - we) <= 1e-12 * std::fabs(we) + 1e-320);
      CHECK(std::fabs(t.data<double>()[i] - wt) <= 1e-12 * std::fabs(wt));
    }
  }
}
