// CPU kernels of the Ternary rows (where, clamp).
#include <string>

#include "elementwise_functors.h"
#include "elementwise_kernels.h"
#include "elementwise_loop.h"

namespace kiln::cpu {

namespace {

/// out = F(x0, x1, x2); x0 is stored as S0 (bool for where's condition),
/// x1, x2 and out as S. Broadcast operands are staged like strided ones.
template <class F, class S0, class S>
void ternary_run(const Tensor& x0, const Tensor& x1, const Tensor& x2, const Tensor& out) {
  using C0 = detail::compute_t<S0>;
  using C = detail::compute_t<S>;
  ew::launch<4>({&out, &x0, &x1, &x2}, [](char** p, const int64_t* st, int64_t n) {
    ew::StagedOutput<C, S> o(p[0], st[0]);
    ew::StagedInput<S0, C0> i0(p[1], st[1]);
    ew::StagedInput<S, C> i1(p[2], st[2]), i2(p[3], st[3]);
    const bool whole = o.direct() && i0.direct() && i1.direct() && i2.direct();
    ew::for_blocks(n, whole, [&](int64_t b0, int64_t m) {
      const C0* __restrict a = i0.block(b0, m);
      const C* __restrict b = i1.block(b0, m);
      const C* __restrict c = i2.block(b0, m);
      C* __restrict y = o.block(b0);
      F f;
      for (int64_t i = 0; i < m; ++i) y[i] = f(a[i], b[i], c[i]);
      o.commit(b0, m);
    });
  });
}

}  // namespace

void ternary_kernel(OpId op, const Tensor& x0, const Tensor& x1, const Tensor& x2, const Tensor& out) {
  const bool where = op == OpId::Where;
  if ((where && x0.dtype() != DType::bool_) || (!where && x0.dtype() != out.dtype()) ||
      x1.dtype() != out.dtype() || x2.dtype() != out.dtype())
    throw Error("ternary_kernel: " + std::string(op_name(op)) + " operands must be converted to the compute dtype first");
  bool found = visit_op<OpCategory::Ternary>(op, [&](auto tag) {
    using Tag = decltype(tag);
    using F = typename Tag::functor;
    detail::visit_dtype(out.dtype(), [&](auto tt) {
      using S = typename decltype(tt)::type;
      using S0 = std::conditional_t<Tag::op == OpId::Where, bool, S>;
      if constexpr (accepts_dtype<F, Tag::rule, S>())
        ternary_run<F, S0, S>(x0, x1, x2, out);
      else
        throw DTypeError(detail::op_prefix(op) + "no kernel for dtype " + std::string(name(out.dtype())));
    });
  });
  if (!found) throw Error("ternary_kernel: '" + std::string(op_name(op)) + "' is not a ternary row");
}

}  // namespace kiln::cpu
