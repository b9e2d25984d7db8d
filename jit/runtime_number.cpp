// jit's runtime numbers outside a trace (jit/jit_function.h).
#include "jit_function.h"

namespace kiln::detail {

Tensor eager_number(const Tensor& number, std::span<const Tensor> leaves) {
  const DType nd = number.dtype();
  const ScalarKind k = weak_kind_of(nd);
  bool any = false;
  DType d = DType::bool_;
  for (const Tensor& t : leaves)
    if (t.defined() && t.ndim() > 0) {
      d = any ? promote_types(d, t.dtype()) : t.dtype();
      any = true;
    }
  const DType want = any ? promote_with_scalar(d, k) : weak_default_dtype(k);
  return want == nd ? number : cast(number, want);
}

}  // namespace kiln::detail
