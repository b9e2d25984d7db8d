// kiln (internal): the Scan rows (cumsum, cumprod, sort, argsort), one line
// along the axis at a time.
#include <algorithm>
#include <numeric>
#include <vector>

#include "accumulate.h"
#include "parallel_ranges.h"
#include "reduce_kernels.h"

namespace kiln::cpu {

namespace {

template <bool Prod>
void running(const Tensor& x, int64_t axis, const Tensor& out) {
  detail::visit_dtype(x.dtype(), [&](auto tag) {
    using In = typename decltype(tag)::type;
    using Acc = sum_acc_t<In>;
    using Out = sum_out_t<In>;
    if (out.dtype() != dtype_v<Out>) throw Error("cumsum: internal error: output dtype does not match the input's");
    for_each_line<2>(x.shape(), axis, {&out, &x}, [](const auto& p, const auto& st, int64_t len) {
      char* o = p[0];
      const char* s = p[1];
      Acc a = Acc(Prod ? 1 : 0);
      for (int64_t i = 0; i < len; ++i, o += st[0], s += st[1]) {
        // uint64 accumulators wrap as int64 would (no signed-overflow UB).
        if constexpr (Prod) a *= acc_load<Acc>(*reinterpret_cast<const In*>(s));
        else a += acc_load<Acc>(*reinterpret_cast<const In*>(s));
        *reinterpret_cast<Out*>(o) = detail::convert<Out>(a);
      }
    });
  });
}

/// Strict weak order of numpy's sort: NaN above everything (and equal to
/// NaN), so ascending puts NaNs last.
template <class C>
bool less_nan_last(C a, C b) {
  if (is_nan(a)) return false;
  if (is_nan(b)) return true;
  return a < b;
}

// Sorts each line by a stable merge sort of its positions: values for Sort,
// positions (int64) for ArgSort. Equal keys keep their order in both
// directions (descending compares b < a).
void sort_lines(const Tensor& x, int64_t axis, bool descending, bool indices, const Tensor& out) {
  detail::visit_dtype(x.dtype(), [&](auto tag) {
    using T = typename decltype(tag)::type;
    using C = detail::compute_t<T>;
    for_each_line<2>(x.shape(), axis, {&out, &x}, [&](const auto& p, const auto& st, int64_t len) {
      thread_local std::vector<C> key;
      thread_local std::vector<int64_t> pos;
      key.resize(static_cast<size_t>(len));
      pos.resize(static_cast<size_t>(len));
      const char* s = p[1];
      for (int64_t i = 0; i < len; ++i, s += st[1]) key[i] = detail::convert<C>(*reinterpret_cast<const T*>(s));
      std::iota(pos.begin(), pos.end(), int64_t(0));
      if (descending)
        std::stable_sort(pos.begin(), pos.end(), [](int64_t a, int64_t b) { return less_nan_last(key[b], key[a]); });
      else
        std::stable_sort(pos.begin(), pos.end(), [](int64_t a, int64_t b) { return less_nan_last(key[a], key[b]); });
      char* o = p[0];
      const char* base = p[1];
      for (int64_t i = 0; i < len; ++i, o += st[0]) {
        if (indices) *reinterpret_cast<int64_t*>(o) = pos[i];
        else *reinterpret_cast<T*>(o) = *reinterpret_cast<const T*>(base + pos[i] * st[1]);
      }
    });
  });
}

}  // namespace

void cumsum(const Tensor& x, int64_t axis, const Tensor& out) { running<false>(x, axis, out); }
void cumprod(const Tensor& x, int64_t axis, const Tensor& out) { running<true>(x, axis, out); }
void sort(const Tensor& x, int64_t axis, bool descending, bool indices, const Tensor& out) {
  sort_lines(x, axis, descending, indices, out);
}

}  // namespace kiln::cpu
