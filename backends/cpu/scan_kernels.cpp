// kiln (internal): the Scan rows (cumsum, cumprod, sort, argsort), one line
// along the axis at a time.
#include <algorithm>
#include <cstring>
#include <type_traits>
#include <utility>
#include <numeric>
#include <vector>

#include "../../tensor/nan_last_order.h"
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
/// NaN), so ascending puts NaNs last (one rule for every backend's sorting
/// and selection kernels: tensor/nan_last_order.h).
using sort_order::less_nan_last;

/// Orderable uint32 key of a float32 / int32 (unsigned comparison gives the
/// numeric order): NaN maps above +inf (all NaNs equal) and -0 to +0, so the
/// key's order is exactly less_nan_last's.
template <class C>
uint32_t radix_key(C v) {
  uint32_t u;
  if constexpr (std::is_same_v<C, float>) {
    if (v != v) return 0xFFFFFFFFu;
    if (v == 0.0f) v = 0.0f;
    std::memcpy(&u, &v, 4);
    return (u & 0x80000000u) ? ~u : (u | 0x80000000u);
  } else {
    std::memcpy(&u, &v, 4);
    return u ^ 0x80000000u;
  }
}

/// Stable LSD radix sort (4 byte passes, skipping a pass whose byte is the
/// same everywhere) of (key << 32 | position) pairs by key; the positions
/// end in `pos`. Descending inverts the keys, which keeps ties in order.
template <class C>
void radix_argsort(const std::vector<C>& key, bool descending, std::vector<int64_t>& pos) {
  const size_t n = key.size();
  thread_local std::vector<uint64_t> a, b;
  a.resize(n);
  b.resize(n);
  for (size_t i = 0; i < n; ++i) {
    const uint32_t k = descending ? ~radix_key(key[i]) : radix_key(key[i]);
    a[i] = (uint64_t(k) << 32) | uint64_t(i);
  }
  for (int shift = 32; shift < 64; shift += 8) {
    size_t count[257] = {};
    for (size_t i = 0; i < n; ++i) ++count[((a[i] >> shift) & 0xFF) + 1];
    if (count[((a[0] >> shift) & 0xFF) + 1] == n) continue;  // one byte value: nothing moves
    for (int d = 0; d < 256; ++d) count[d + 1] += count[d];
    for (size_t i = 0; i < n; ++i) b[count[(a[i] >> shift) & 0xFF]++] = a[i];
    a.swap(b);
  }
  for (size_t i = 0; i < n; ++i) pos[i] = static_cast<int64_t>(a[i] & 0xFFFFFFFFu);
}

// Sorts each line as a stable sort would (equal keys keep their order in
// both directions; descending puts NaN first). ArgSort: an LSD radix sort for
// 4-byte keys, a stable merge sort of positions otherwise. Sort (values
// only): equal keys differ in bits only for -0/+0 and NaN payloads, so the
// NaNs are set aside in order, the rest std::sort-ed, and the run of zeros
// rewritten with the zeros in their original order: the same bits as the
// stable sort at std::sort's cost.
void sort_lines(const Tensor& x, int64_t axis, bool descending, bool indices, const Tensor& out) {
  detail::visit_dtype(x.dtype(), [&](auto tag) {
    using T = typename decltype(tag)::type;
    using C = detail::compute_t<T>;
    for_each_line<2>(x.shape(), axis, {&out, &x}, [&](const auto& p, const auto& st, int64_t len) {
      const char* s = p[1];
      char* o = p[0];
      if (!indices) {
        thread_local std::vector<T> nans, zeros;
        thread_local std::vector<C> v;
        nans.clear();
        zeros.clear();
        v.clear();
        for (int64_t i = 0; i < len; ++i, s += st[1]) {
          const T raw = *reinterpret_cast<const T*>(s);
          const C c = detail::convert<C>(raw);
          if (is_nan(c)) nans.push_back(raw);
          else {
            if constexpr (std::is_floating_point_v<C>)
              if (c == C(0)) zeros.push_back(raw);
            v.push_back(c);
          }
        }
        if (descending) std::sort(v.begin(), v.end(), [](C a, C b) { return b < a; });
        else std::sort(v.begin(), v.end());
        auto put = [&](T t) {
          *reinterpret_cast<T*>(o) = t;
          o += st[0];
        };
        if (descending)
          for (const T& t : nans) put(t);
        size_t z = 0;
        for (const C& c : v) {
          if constexpr (std::is_floating_point_v<C>)
            if (c == C(0)) {
              put(zeros[z++]);
              continue;
            }
          put(detail::convert<T>(c));  // exact: c came from a T
        }
        if (!descending)
          for (const T& t : nans) put(t);
        return;
      }
      thread_local std::vector<C> key;
      thread_local std::vector<int64_t> pos;
      key.resize(static_cast<size_t>(len));
      pos.resize(static_cast<size_t>(len));
      for (int64_t i = 0; i < len; ++i, s += st[1]) key[i] = detail::convert<C>(*reinterpret_cast<const T*>(s));
      constexpr bool radix = sizeof(C) == 4 && (std::is_same_v<C, float> || std::is_same_v<C, int32_t>);
      if (radix && len > 64 && len < (int64_t(1) << 32)) {
        if constexpr (radix) radix_argsort(key, descending, pos);
      } else {
        std::iota(pos.begin(), pos.end(), int64_t(0));
        if (descending)
          std::stable_sort(pos.begin(), pos.end(), [](int64_t a, int64_t b) { return less_nan_last(key[b], key[a]); });
        else
          std::stable_sort(pos.begin(), pos.end(), [](int64_t a, int64_t b) { return less_nan_last(key[a], key[b]); });
      }
      for (int64_t i = 0; i < len; ++i, o += st[0]) *reinterpret_cast<int64_t*>(o) = pos[i];
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
