// CPU kernels of the Binary rows, and the integer-domain check the front end
// runs before integer division and pow.
#include <atomic>
#include <string>

#include "elementwise_functors.h"
#include "elementwise_kernels.h"
#include "elementwise_loop.h"
#include "stream_store.h"

namespace kiln::cpu {

namespace {

/// y[i] = F(a[i], b[SB * i]) with SB in {0, 1}: b steps with a or is one
/// broadcast value, known at compile time so the loop vectorises.
template <class F, class C, class O, int SB>
void binary_block(const C* __restrict a, const C* __restrict b, O* __restrict y, int64_t m) {
  F f;
  for (int64_t i = 0; i < m; ++i) y[i] = f(a[i], b[SB * i]);
}

/// The run function of binary_run: Stream selects the streaming-store form
/// of unit-stride runs (stream_store.h) for outputs of kStreamMinBytes and
/// more; the values computed are the same.
template <class F, class S, bool Stream>
void binary_inner(char** p, const int64_t* st, int64_t n) {
  using C = detail::compute_t<S>;
  using O = decltype(F{}(C{}, C{}));
  using SO = std::conditional_t<std::is_same_v<O, bool>, bool, S>;
  ew::StagedOutput<O, SO> o(p[0], st[0]);
  ew::StagedInput<S, C> ia(p[1], st[1]), ib(p[2], st[2]);
  // A broadcast right operand is passed as one value, so `x * 2` and
  // friends run the vector-scalar loop; a broadcast left operand is staged
  // (two loop variants instead of four keep the code small).
  const bool sb = ib.broadcast();
  const C vb = sb ? ib.value() : C{};
  const bool whole = o.direct() && ia.direct() && (sb || ib.direct());
  if constexpr (Stream) {
    if (whole) {
      const C* a = ia.block(0, n);
      const C* b = sb ? &vb : ib.block(0, n);
      ew::stream_out(o.block(0), n, [&](int64_t i0, int64_t m, O* y) {
        if (sb) binary_block<F, C, O, 0>(a + i0, b, y, m);
        else binary_block<F, C, O, 1>(a + i0, b + i0, y, m);
      });
      return;
    }
  }
  ew::for_blocks(n, whole, [&](int64_t i0, int64_t m) {
    O* y = o.block(i0);
    if (sb) binary_block<F, C, O, 0>(ia.block(i0, m), &vb, y, m);
    else binary_block<F, C, O, 1>(ia.block(i0, m), ib.block(i0, m), y, m);
    o.commit(i0, m);
  });
}

template <class F, class S>
void binary_run(const Tensor& a, const Tensor& b, const Tensor& out) {
  using C = detail::compute_t<S>;
  using O = decltype(F{}(C{}, C{}));
  using SO = std::conditional_t<std::is_same_v<O, bool>, bool, S>;
  if (out.dtype() != dtype_v<SO>)
    throw Error("binary_kernel: output dtype " + std::string(name(out.dtype())) + " does not match the row's " +
                std::string(name(dtype_v<SO>)));
  // Streaming stores for large float/double outputs only (other dtypes keep
  // one instantiation per op: compile time).
  if constexpr ((std::is_same_v<S, float> || std::is_same_v<S, double>) && std::is_same_v<O, SO>) {
    if (out.numel() * static_cast<int64_t>(out.itemsize()) >= ew::kStreamMinBytes) {
      ew::launch<3>({&out, &a, &b}, &binary_inner<F, S, true>);
      return;
    }
  }
  ew::launch<3>({&out, &a, &b}, &binary_inner<F, S, false>);
}

}  // namespace

void binary_kernel(OpId op, const Tensor& a, const Tensor& b, const Tensor& out) {
  if (a.dtype() != b.dtype())
    throw Error("binary_kernel: operands have dtypes " + std::string(name(a.dtype())) + " and " +
                std::string(name(b.dtype())) + " (convert to the compute dtype first)");
  bool found = visit_op<OpCategory::Binary>(op, [&](auto tag) {
    using Tag = decltype(tag);
    using F = typename Tag::functor;
    detail::visit_dtype(a.dtype(), [&](auto tt) {
      using S = typename decltype(tt)::type;
      // Logical rows get bool operands (the front end converts them), so
      // they are only instantiated for bool.
      constexpr bool logical = Tag::rule == DTypeRule::ToBool;
      if constexpr (accepts_dtype<F, Tag::rule, S>() && (!logical || std::is_same_v<S, bool>))
        binary_run<F, S>(a, b, out);
      else
        throw DTypeError(detail::op_prefix(op) + "no kernel for dtype " + std::string(name(a.dtype())));
    });
  });
  if (!found) throw Error("binary_kernel: '" + std::string(op_name(op)) + "' is not a binary row");
}

bool any_element(const Tensor& t, ElementTest test) {
  std::atomic<bool> found{false};
  detail::visit_dtype(t.dtype(), [&](auto tt) {
    using S = typename decltype(tt)::type;
    if constexpr (std::is_integral_v<S> && !std::is_same_v<S, bool>) {
      if (t.numel() == 0) return;
      run_loop(make_loop<1>(t.shape(), {&t}), [&](char** p, const int64_t* st, int64_t n) {
        const char* q = p[0];
        bool hit = false;
        for (int64_t i = 0; i < n; ++i, q += st[0]) {
          S v = *reinterpret_cast<const S*>(q);
          if constexpr (std::is_signed_v<S>) hit |= test == ElementTest::zero ? v == S(0) : v < S(0);
          else hit |= test == ElementTest::zero && v == S(0);
        }
        if (hit) found.store(true, std::memory_order_relaxed);
      });
    } else {
      throw Error("any_element: expected an integer tensor, got " + std::string(name(t.dtype())));
    }
  });
  return found.load();
}

}  // namespace kiln::cpu
