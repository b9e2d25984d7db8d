// kiln (internal): the Scan rows (cumsum), one line along the axis at a time.
#include "accumulate.h"
#include "parallel_ranges.h"
#include "reduce_kernels.h"

namespace kiln::cpu {

void cumsum(const Tensor& x, int64_t axis, const Tensor& out) {
  detail::visit_dtype(x.dtype(), [&](auto tag) {
    using In = typename decltype(tag)::type;
    using Acc = sum_acc_t<In>;
    using Out = sum_out_t<In>;
    if (out.dtype() != dtype_v<Out>) throw Error("cumsum: internal error: output dtype does not match the input's");
    for_each_line<2>(x.shape(), axis, {&out, &x}, [](const auto& p, const auto& st, int64_t len) {
      char* o = p[0];
      const char* s = p[1];
      Acc a = Acc(0);
      for (int64_t i = 0; i < len; ++i, o += st[0], s += st[1]) {
        a += acc_load<Acc>(*reinterpret_cast<const In*>(s));
        *reinterpret_cast<Out*>(o) = detail::convert<Out>(a);
      }
    });
  });
}

}  // namespace kiln::cpu
