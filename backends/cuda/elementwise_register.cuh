// kiln (internal): registration of the precompiled elementwise kernels, one
// per op-table row, shared by elementwise_unary.cu and
// elementwise_binary.cu (which split the rows so that nvcc compiles them in
// parallel). The including file defines KILN_CUDA_ROWS_UNARY, _BINARY
// and/or _TERNARY (1) before including this header, once.
#include "elementwise.cuh"

namespace kiln::cuda {
namespace {

/// Registers row Id's kernel (functor Op, N inputs). The Cast row has its
/// own kernel (cast.cu): its generic one is never instantiated.
template <OpId Id, class Op, DTypeRule Rule, int N> void register_row() {
  if constexpr (Id != OpId::Cast)
    detail::register_kernel(Id, DeviceType::cuda, row_kernel<Op, Rule, N>, row_dtypes<Op, Rule>());
}

#define KILN_CUDA_ROW(id, rule, n) register_row<OpId::id, hd::id, DTypeRule::rule, n>();
#if KILN_CUDA_ROWS_UNARY
#define KILN_CUDA_IF_Unary(id, rule) KILN_CUDA_ROW(id, rule, 1)
#else
#define KILN_CUDA_IF_Unary(id, rule)
#endif
#if KILN_CUDA_ROWS_BINARY
#define KILN_CUDA_IF_Binary(id, rule) KILN_CUDA_ROW(id, rule, 2)
#else
#define KILN_CUDA_IF_Binary(id, rule)
#endif
#if KILN_CUDA_ROWS_TERNARY
#define KILN_CUDA_IF_Ternary(id, rule) KILN_CUDA_ROW(id, rule, 3)
#else
#define KILN_CUDA_IF_Ternary(id, rule)
#endif
#define KILN_CUDA_IF_Reduce(id, rule)
#define KILN_CUDA_IF_Scan(id, rule)
#define KILN_CUDA_IF_RowNorm(id, rule)
#define KILN_CUDA_IF_Matmul(id, rule)
#define KILN_CUDA_IF_View(id, rule)
#define KILN_CUDA_IF_Data(id, rule)
#define KILN_CUDA_IF_Linalg(id, rule)

[[maybe_unused]] const bool registered = [] {
#define KILN_OP(id, name, arity, cat, rule) KILN_CUDA_IF_##cat(id, rule)
#include "../../tensor/ops.def"
#undef KILN_OP
  return true;
}();

}  // namespace
}  // namespace kiln::cuda
