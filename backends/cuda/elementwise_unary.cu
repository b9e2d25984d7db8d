// The CUDA kernels of the Unary rows of the op table (Cast: cast.cu).
#include "elementwise.cuh"

namespace kiln::cuda {
namespace {
[[maybe_unused]] const bool registered = [] {
#define KILN_CUDA_Unary(id, rule)                                                                   \
  if (OpId::id != OpId::Cast)                                                                      \
    detail::register_kernel(OpId::id, DeviceType::cuda, row_kernel<hd::id, DTypeRule::rule, 1>,     \
                            row_dtypes<hd::id, DTypeRule::rule>());
#define KILN_OP(id, name, arity, cat, rule) KILN_CUDA_IF_##cat(id, rule)
#define KILN_CUDA_IF_Unary(id, rule) KILN_CUDA_Unary(id, rule)
#define KILN_CUDA_IF_Binary(id, rule)
#define KILN_CUDA_IF_Ternary(id, rule)
#define KILN_CUDA_IF_Reduce(id, rule)
#define KILN_CUDA_IF_Scan(id, rule)
#define KILN_CUDA_IF_RowNorm(id, rule)
#define KILN_CUDA_IF_Matmul(id, rule)
#define KILN_CUDA_IF_View(id, rule)
#define KILN_CUDA_IF_Data(id, rule)
#define KILN_CUDA_IF_Linalg(id, rule)
#include "../../tensor/ops.def"
#undef KILN_OP
  return true;
}();
}  // namespace
}  // namespace kiln::cuda
