// kiln tests: the table-driven check. test_op_table.cpp walks every row of
// the op table and calls its category's checker, which runs the op on random
// inputs of every dtype it accepts (empty and size-1 dims, broadcasting,
// transposed/strided/negative-stride views, NaN and +-inf) and compares with
// a float64 reference. A checker returns how many cases it compared; a row
// whose checker compares nothing fails the walk.
#pragma once
#include <kiln/kiln.h>

#include "test_util.h"

namespace kt {
int check_unary_op(kiln::OpId op);
int check_binary_op(kiln::OpId op);
int check_ternary_op(kiln::OpId op);
int check_reduce_op(kiln::OpId op);
/// The Scan rows other than cumsum (cumprod, sort, argsort).
int check_order_op(kiln::OpId op);
int check_scan_op(kiln::OpId op);
int check_rownorm_op(kiln::OpId op);
int check_matmul_op(kiln::OpId op);
int check_view_op(kiln::OpId op);
int check_data_op(kiln::OpId op);
/// The Conv2d row on x of shape s (made 4-d) laid out as k (tests/test_einsum_conv.cpp).
int check_conv2d_row(kiln::DType d, const kiln::Shape& s, ViewKind k, uint64_t seed);
/// The selection, window and matrix-structure rows (TopK ... Cross) on
/// inputs derived from shape s laid out as k (tests/test_select_rows.cpp).
int check_select_row(kiln::OpId op, kiln::DType d, const kiln::Shape& s, ViewKind k, uint64_t seed);
/// The Linalg rows by reconstruction (tests/test_linalg_decomp.cpp).
int check_linalg_op(kiln::OpId op);
}  // namespace kt
