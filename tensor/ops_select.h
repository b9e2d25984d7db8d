// kiln (internal): the shape rule of the op table's selection, window and
// matrix-structure rows (TopK, SearchSorted, MaxPool2d, AvgPool2d, Tril,
// Triu, Diag, NanToNum, Cross; category Data in tensor/ops.def). Their
// public functions (topk, searchsorted in sorting.h; max_pool2d, avg_pool2d
// in einsum.h; tril, triu, diag, nan_to_num, cross in matrix_ops.h) are
// defined in ops_select.cpp. Not part of <kiln/kiln.h>.
#pragma once
#include <span>

#include "op_table.h"

namespace kiln::detail {

/// True for the rows above.
bool is_select_row(OpId op);

/// Result shape of one of the rows above for inputs of dtypes `dtypes` and
/// shapes `shapes` (arity checked before), checking every input and
/// attribute: ShapeError (ranks, extents, a pool kernel wider than the padded
/// input, cross without extent 3), IndexError (axes), ValueError (topk's k
/// outside [0, extent], non-positive kernel/stride/dilation, negative
/// padding or padding above half the kernel, malformed attrs.ints), DTypeError
/// (avg_pool2d of a non-float dtype, searchsorted of two dtypes), each
/// naming the op and the argument.
Shape select_row_shape(OpId op, std::span<const DType> dtypes, std::span<const Shape* const> shapes, const Attrs& a);

}  // namespace kiln::detail
