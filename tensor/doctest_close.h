// kiln: doctest assertions that compare tensors with assert_close's rules
// and print its report on failure. Opt-in (needs doctest); include it after
// <doctest/doctest.h> is available:
//
//     #include <doctest/doctest.h>
//     #include <kiln/doctest_close.h>
//
//     CHECK_CLOSE(y, y_ref);                  // dtype-default tolerances
//     CHECK_CLOSE(y, y_ref, 1e-4, 1e-6);      // rtol, atol
//     REQUIRE_CLOSE(y, y_ref, 0.0, 0.0, true);  // exact, NaN == NaN
//
// The optional arguments are assert_close's: rtol, atol, equal_nan (a
// missing tolerance is the dtype's default, see default_tolerance). CHECK_
// records a failure and goes on; REQUIRE_ ends the test case. A failure
// prints the expression, then the report:
//
//     test_x.cpp:12: ERROR: CHECK_CLOSE( y, y_ref ) failed:
//     assert_close: tensors are not close (float32, shape [2, 3]; rtol=1.3e-06, atol=1e-05)
//     Mismatched elements: 1 / 6 (16.7%)
//     ...
//
// An exception from the comparison (an undefined tensor, a bad tolerance, a
// tensor that cannot be realized) is a failure that names it. Also defined
// with a KILN_ prefix (KILN_CHECK_CLOSE, KILN_REQUIRE_CLOSE); the short
// names are skipped when something else defines them.
#pragma once
#include <doctest/doctest.h>

#include <exception>
#include <string>

#include "testing.h"

#ifndef DOCTEST_CONFIG_DISABLE
namespace kiln::doctest_detail {

/// "" when close, else what to print: the report, or the exception's message.
template <class... Opt>
std::string close_failure(const char* expr, const Tensor& actual, const Tensor& expected, Opt... opt) {
  std::string r;
  try {
    r = close_report(actual, expected, opt...);
  } catch (const std::exception& e) {
    return std::string(expr) + " threw " + e.what();
  }
  return r.empty() ? r : std::string(expr) + " failed:\n" + r;
}

/// Counts a passed check, as doctest's own assertions do (so -s lists it).
/// ResultBuilder is doctest's internal (detail) type behind CHECK; its
/// interface has been stable through doctest 2.4.
inline void count_pass(const char* file, int line, const char* expr, doctest::assertType::Enum at) {
  doctest::detail::ResultBuilder rb(at, file, line, expr);
  rb.setResult(doctest::detail::Result(true));
  rb.log();
}

}  // namespace kiln::doctest_detail
#endif

#ifdef DOCTEST_CONFIG_DISABLE
// doctest disabled: the assertions compile to nothing, as doctest's own do.
#define KILN_CLOSE_ASSERT_(level, fail_macro, ...) static_cast<void>(0)
#else
#define KILN_CLOSE_ASSERT_(level, fail_macro, ...)                                                        \
  do {                                                                                                    \
    const std::string kiln_close_failure_ =                                                               \
        ::kiln::doctest_detail::close_failure(#level "_CLOSE( " #__VA_ARGS__ " )", __VA_ARGS__);           \
    if (kiln_close_failure_.empty())                                                                      \
      ::kiln::doctest_detail::count_pass(__FILE__, __LINE__, #level "_CLOSE( " #__VA_ARGS__ " )",         \
                                         doctest::assertType::DT_##level);                                \
    else                                                                                                  \
      fail_macro(__FILE__, __LINE__, kiln_close_failure_);                                                \
  } while (false)
#endif

#define KILN_CHECK_CLOSE(...) KILN_CLOSE_ASSERT_(CHECK, DOCTEST_ADD_FAIL_CHECK_AT, __VA_ARGS__)
#define KILN_REQUIRE_CLOSE(...) KILN_CLOSE_ASSERT_(REQUIRE, DOCTEST_ADD_FAIL_AT, __VA_ARGS__)
#ifndef CHECK_CLOSE
#define CHECK_CLOSE(...) KILN_CHECK_CLOSE(__VA_ARGS__)
#endif
#ifndef REQUIRE_CLOSE
#define REQUIRE_CLOSE(...) KILN_REQUIRE_CLOSE(__VA_ARGS__)
#endif
