// The CUDA kernel templates (backends/cuda/kernel_templates.h) compiled for
// the host: every elementwise row of the op table, walked from the table,
// against the float64 reference (tensor/ref_ops.h) on float, double and the
// integer/bool compute types the row accepts, special values included.
// Runs without CUDA: the same text is what nvcc and NVRTC compile.
#include <cstdint>
#include <limits>

#include "../backends/cuda/kernel_templates.h"
#include "../tensor/ref_ops.h"
#include "test_util.h"

namespace {
using namespace kiln;

const std::vector<double>& float_samples() {
  static const std::vector<double> v = {-INFINITY, -100.0, -7.25, -3.0, -2.5, -1.0, -0.5, -1e-3, -0.0, 0.0,
                                        1e-3,      0.25,   0.5,   1.0,  1.5,  2.5,  3.0,  7.25,  100.0, INFINITY,
                                        NAN,       1e-40};  // 1e-40: subnormal in float
  return v;
}
const std::vector<int64_t>& int_samples() {
  static const std::vector<int64_t> v = {-128, -127, -7, -3, -2, -1, 0, 1, 2, 3, 5, 100, 127};
  return v;
}

/// Tolerance of the host build of a functor on compute type T (float
/// results: the C library's float functions, as tensor/ref_ops.h bounds).
template <class T> bool agree(double got, double want) {
  if constexpr (std::is_same_v<T, float>) return kt::close(got, want, 2e-6, 0x1p-126);
  else return kt::close(got, want, 1e-12, 0x1p-1022);
}

template <class T> constexpr DType dt() { return dtype_v<T>; }

/// Which compute types a row takes (mirrors result_dtype's rules).
template <DTypeRule Rule> constexpr bool takes_ints() {
  return Rule != DTypeRule::Float && Rule != DTypeRule::TrueDiv;
}
bool takes_bool(OpId op, DTypeRule rule) {
  return rule == DTypeRule::ToBool || rule == DTypeRule::Compare || op == OpId::Add || op == OpId::Mul ||
         op == OpId::Maximum || op == OpId::Minimum || op == OpId::Where;
}

template <class F, class T> int unary_float(OpId op) {
  int n = 0;
  for (double xd : float_samples()) {
    const T x = T(xd);
    const double got = double(F{}(x));
    const double want = op == OpId::Cast ? double(x) : ref_cast(ref_unary(op, double(x)), dt<T>());
    CAPTURE(xd);
    CHECK_MESSAGE(agree<T>(got, want), op_name(op) << "<" << name(dt<T>()) << ">(" << double(x) << ") = " << got
                                                   << ", reference " << want);
    ++n;
  }
  return n;
}

template <class F, class T> int unary_int(OpId op) {
  int n = 0;
  for (int64_t xi : int_samples()) {
    const T x = T(ref_cast_int(xi, dt<T>()));
    const auto r = F{}(x);
    const int64_t want = op == OpId::Cast ? int64_t(x) : ref_unary_int(op, int64_t(x), dt<T>());
    CHECK_MESSAGE(int64_t(r) == want, op_name(op) << "<" << name(dt<T>()) << ">(" << int64_t(x) << ") = "
                                                  << int64_t(r) << ", reference " << want);
    ++n;
  }
  return n;
}

template <class F, class T> int binary_float(OpId op) {
  int n = 0;
  for (double ad : float_samples())
    for (double bd : float_samples()) {
      const T a = T(ad), b = T(bd);
      const double got = double(F{}(a, b));
      const double want = ref_cast(ref_binary(op, double(a), double(b)), dt<T>());
      CHECK_MESSAGE(agree<T>(got, want), op_name(op) << "<" << name(dt<T>()) << ">(" << double(a) << ", "
                                                     << double(b) << ") = " << got << ", reference " << want);
      ++n;
    }
  return n;
}

template <class F, class T> int binary_int(OpId op) {
  int n = 0;
  for (int64_t ai : int_samples())
    for (int64_t bi : int_samples()) {
      const T a = T(ref_cast_int(ai, dt<T>())), b = T(ref_cast_int(bi, dt<T>()));
      int64_t want = 0;
      try {
        want = ref_binary_int(op, int64_t(a), int64_t(b), dt<T>());
      } catch (const ValueError&) {
        continue;  // integer division by zero / negative power: the front end raises first
      }
      const int64_t got = int64_t(F{}(a, b));
      CHECK_MESSAGE(got == want, op_name(op) << "<" << name(dt<T>()) << ">(" << int64_t(a) << ", " << int64_t(b)
                                             << ") = " << got << ", reference " << want);
      ++n;
    }
  return n;
}

template <class F, class T> int ternary(OpId op) {
  int n = 0;
  const std::vector<double> s = {-INFINITY, -2.5, -1.0, -0.0, 0.0, 0.5, 1.0, 3.0, INFINITY, NAN};
  for (double ad : s)
    for (double bd : s)
      for (double cd : s) {
        if (!std::is_floating_point_v<T> && (std::isnan(ad) || std::isnan(bd) || std::isnan(cd) ||
                                             std::isinf(ad) || std::isinf(bd) || std::isinf(cd)))
          continue;
        const T b = T(bd), c = T(cd);
        double got, want;
        if constexpr (std::is_same_v<F, kiln::hd::Where>) {
          const bool cond = ad != 0.0 || std::isnan(ad);  // the kernel loads the condition as bool
          got = double(F{}(cond, b, c));
          want = ref_ternary(op, ad, double(b), double(c));
        } else {
          const T a = T(ad);
          got = double(F{}(a, b, c));
          want = ref_ternary(op, double(a), double(b), double(c));
        }
        CHECK_MESSAGE(agree<double>(got, want), op_name(op) << "<" << name(dt<T>()) << ">(" << ad << ", " << bd
                                                            << ", " << cd << ") = " << got << ", reference " << want);
        ++n;
      }
  return n;
}

template <class F, DTypeRule Rule> int check_unary(OpId op) {
  int n = unary_float<F, float>(op) + unary_float<F, double>(op);
  if constexpr (takes_ints<Rule>())
    n += unary_int<F, int8_t>(op) + unary_int<F, uint8_t>(op) + unary_int<F, int32_t>(op) + unary_int<F, int64_t>(op);
  return n;
}

template <class F, DTypeRule Rule> int check_binary(OpId op) {
  int n = binary_float<F, float>(op) + binary_float<F, double>(op);
  if constexpr (takes_ints<Rule>()) {
    n += binary_int<F, int8_t>(op) + binary_int<F, uint8_t>(op) + binary_int<F, int32_t>(op) +
         binary_int<F, int64_t>(op);
    if (takes_bool(op, Rule)) n += binary_int<F, bool>(op);
  }
  return n;
}

template <class F, DTypeRule Rule> int check_ternary(OpId op) {
  return ternary<F, float>(op) + ternary<F, double>(op) + ternary<F, int32_t>(op) + ternary<F, int64_t>(op);
}

}  // namespace

TEST_SUITE("cuda_functors") {
  TEST_CASE("every elementwise row's KILN_HD functor matches the float64 reference on the host") {
    int rows = 0;
#define KILN_ROW_Unary(id, rule)                                                              \
  {                                                                                           \
    CAPTURE(#id);                                                                             \
    CHECK(check_unary<kiln::hd::id, DTypeRule::rule>(OpId::id) > 0);                          \
    ++rows;                                                                                   \
  }
#define KILN_ROW_Binary(id, rule)                                                             \
  {                                                                                           \
    CAPTURE(#id);                                                                             \
    CHECK(check_binary<kiln::hd::id, DTypeRule::rule>(OpId::id) > 0);                         \
    ++rows;                                                                                   \
  }
#define KILN_ROW_Ternary(id, rule)                                                            \
  {                                                                                           \
    CAPTURE(#id);                                                                             \
    CHECK(check_ternary<kiln::hd::id, DTypeRule::rule>(OpId::id) > 0);                        \
    ++rows;                                                                                   \
  }
#define KILN_ROW_Reduce(id, rule)
#define KILN_ROW_Scan(id, rule)
#define KILN_ROW_RowNorm(id, rule)
#define KILN_ROW_Matmul(id, rule)
#define KILN_ROW_View(id, rule)
#define KILN_ROW_Data(id, rule)
#define KILN_ROW_Linalg(id, rule)
#define KILN_OP(id, name, arity, cat, rule) KILN_ROW_##cat(id, rule)
#include "../tensor/ops.def"
#undef KILN_OP
    // The walk covered every elementwise row of the table.
    int elementwise = 0;
    for (int i = 0; i < kNumOps; ++i) {
      const OpCategory c = op_info(static_cast<OpId>(i)).category;
      elementwise += c == OpCategory::Unary || c == OpCategory::Binary || c == OpCategory::Ternary;
    }
    CHECK(rows == elementwise);
  }
}
