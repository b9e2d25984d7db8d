// Walks the whole op table: every row must be exercised by its category's
// checker against the float64 reference (see op_table_checks.h).
#include "op_table_checks.h"
#include "test_util.h"

TEST_SUITE("op_table") {
  TEST_CASE("every op-table row is checked against the reference") {
    using namespace kiln;
    for (int i = 0; i < kNumOps; ++i) {
      const OpInfo& r = op_info(OpId(i));
      CAPTURE(r.name);
      int cases = 0;
      switch (r.category) {
        case OpCategory::Unary: cases = kt::check_unary_op(r.id); break;
        case OpCategory::Binary: cases = kt::check_binary_op(r.id); break;
        case OpCategory::Ternary: cases = kt::check_ternary_op(r.id); break;
        case OpCategory::Reduce: cases = kt::check_reduce_op(r.id); break;
        case OpCategory::Scan: cases = kt::check_scan_op(r.id); break;
        case OpCategory::RowNorm: cases = kt::check_rownorm_op(r.id); break;
        case OpCategory::Matmul: cases = kt::check_matmul_op(r.id); break;
        case OpCategory::View: cases = kt::check_view_op(r.id); break;
        case OpCategory::Data: cases = kt::check_data_op(r.id); break;
      }
      CHECK_MESSAGE(cases > 0, r.name << ": its checker compared no cases");
    }
  }

  TEST_CASE("op names round-trip and rows are in enum order") {
    using namespace kiln;
    for (int i = 0; i < kNumOps; ++i) {
      CHECK(static_cast<int>(op_info(OpId(i)).id) == i);
      CHECK(op_from_name(op_info(OpId(i)).name) == OpId(i));
    }
    CHECK_THROWS_AS(op_from_name("no_such_op"), kiln::ValueError);
  }
}
