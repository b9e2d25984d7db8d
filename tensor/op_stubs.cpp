// TEMPORARY weak stubs so the library links while categories are written in
// parallel. Each category file's strong definitions replace these.
// Delete this file when every category is implemented.
#include "op_table.h"

namespace kiln::detail {
#define KILN_CATEGORY(cat)                                                                              \
  __attribute__((weak)) TensorLayout infer_##cat(OpId op, std::span<const TensorLayout>, const Attrs&) { \
    throw Error(op_prefix(op) + "not implemented yet (" #cat ")");                                      \
  }                                                                                                      \
  __attribute__((weak)) Tensor eager_##cat(OpId op, std::span<const Tensor>, const Attrs&) {             \
    throw Error(op_prefix(op) + "not implemented yet (" #cat ")");                                      \
  }
KILN_CATEGORY(unary)
KILN_CATEGORY(binary)
KILN_CATEGORY(ternary)
KILN_CATEGORY(reduce)
KILN_CATEGORY(scan)
KILN_CATEGORY(rownorm)
KILN_CATEGORY(matmul)
KILN_CATEGORY(view)
KILN_CATEGORY(data)
#undef KILN_CATEGORY
}  // namespace kiln::detail
