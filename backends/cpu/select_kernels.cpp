// kiln (internal): CPU kernels of the TopK, SearchSorted, Tril, Triu, Diag,
// NanToNum and Cross rows (select_kernels.h). Built with -ffp-contract=off
// (CMakeLists.txt): cross's products are rounded before the subtraction, as
// the float64 reference (tensor/ref_ops.cpp, ref_select_row) rounds them.
#include "select_kernels.h"

#include <algorithm>
#include <cmath>
#include <cstring>
#include <limits>
#include <type_traits>
#include <utility>
#include <vector>

#include "../../tensor/dispatch.h"
#include "../../tensor/nan_last_order.h"
#include "accumulate.h"
#include "copy.h"
#include "element_width.h"
#include "data_kernels.h"
#include "parallel_ranges.h"

namespace kiln::cpu {
namespace {

using detail::TypeTag;


char* base_of(const Tensor& t) { return static_cast<char*>(t.data_ptr()); }

// Byte strides of t's first `n` axes.
std::vector<int64_t> lead_strides(const Tensor& t, size_t n) {
  std::vector<int64_t> s(n);
  for (size_t d = 0; d < n; ++d) s[d] = t.strides()[d] * static_cast<int64_t>(t.itemsize());
  return s;
}

// Calls f(line, p) for every position `line` (row-major) of the leading
// axes of extents `lead`, p[k] = base[k] moved by operand k's byte strides
// st[k] (one per leading axis). Lines split over threads; f must not throw.
template <int N, class F>
void for_each_lead(const Shape& lead, const std::array<std::vector<int64_t>, N>& st,
                   const std::array<char*, N>& base, int64_t per_line, F&& f) {
  int64_t lines = 1;
  for (int64_t e : lead) lines *= e;
  if (lines == 0) return;
  std::vector<WalkDim<N>> dims(lead.size());
  for (size_t d = 0; d < lead.size(); ++d) {
    dims[d].n = lead[d];
    for (int k = 0; k < N; ++k) dims[d].s[k] = st[k][d];
  }
  parallel_ranges(lines, lines * std::max<int64_t>(per_line, 1), [&](int64_t i0, int64_t i1) {
    Odometer<N> od(dims.data(), static_cast<int>(dims.size()));
    od.seek(i0);
    std::array<char*, N> p;
    for (int64_t i = i0; i < i1; ++i, od.next()) {
      for (int k = 0; k < N; ++k) p[k] = base[k] + od.off[k];
      f(i, p);
    }
  });
}

// numpy's sort order (NaN last) and topk's rank order: one rule for the CPU
// and CUDA kernels (tensor/nan_last_order.h).
using sort_order::ranks_before;
using sort_order::sorted_position;

template <bool Largest>
void topk_lines(const Tensor& x, int64_t k, int64_t axis, const Tensor& idx) {
  detail::visit_dtype(x.dtype(), [&](auto tag) {
    using T = typename decltype(tag)::type;
    using C = detail::compute_t<T>;
    // idx differs from x only in the axis' extent (k); for_each_line walks
    // x's lines and uses only idx's strides.
    for_each_line<2>(x.shape(), axis, {&idx, &x}, [&](const auto& p, const auto& st, int64_t len) {
      const char* s = p[1];
      auto at = [&](int64_t i) { return detail::convert<C>(*reinterpret_cast<const T*>(s + i * st[1])); };
      thread_local std::vector<std::pair<C, int64_t>> best;  // (key, position)
      const auto before = [](const std::pair<C, int64_t>& l, const std::pair<C, int64_t>& r) {
        return ranks_before<Largest>(l.first, l.second, r.first, r.second);
      };
      best.clear();
      if (k <= 1024 && k * 16 <= len) {
        // Bounded heap (worst kept on top): one comparison per element mostly.
        for (int64_t i = 0; i < k; ++i) best.emplace_back(at(i), i);
        std::make_heap(best.begin(), best.end(), before);
        for (int64_t i = k; i < len; ++i) {
          const C c = at(i);
          if (!ranks_before<Largest>(c, i, best.front().first, best.front().second)) continue;
          std::pop_heap(best.begin(), best.end(), before);
          best.back() = {c, i};
          std::push_heap(best.begin(), best.end(), before);
        }
        std::sort_heap(best.begin(), best.end(), before);
      } else {
        for (int64_t i = 0; i < len; ++i) best.emplace_back(at(i), i);
        if (k < len) std::nth_element(best.begin(), best.begin() + k, best.end(), before);
        std::sort(best.begin(), best.begin() + k, before);
      }
      char* io = p[0];
      for (int64_t i = 0; i < k; ++i, io += st[0]) *reinterpret_cast<int64_t*>(io) = best[static_cast<size_t>(i)].second;
    });
  });
}

// a converted to dtype and broadcast to shape (a itself when it already is).
Tensor as_operand(const Tensor& a, DType dtype, const Shape& shape) {
  if (a.dtype() == dtype && a.shape() == shape) return a;
  Tensor r = Tensor::empty(shape, dtype);
  if (r.numel() > 0) copy_into(a, r);
  return r;
}

// One component of the cross product: x1 * y2 - x2 * y1 in the compute
// type, each product rounded (no contraction in this file); integers wrap
// (arithmetic modulo 2^64, then truncated to T).
template <class T>
T cross_term(T x1, T y2, T x2, T y1) {
  if constexpr (std::is_integral_v<T>) {
    auto u = [](T v) { return static_cast<uint64_t>(static_cast<int64_t>(v)); };
    return static_cast<T>(u(x1) * u(y2) - u(x2) * u(y1));
  } else {
    using C = detail::compute_t<T>;
    const C p = detail::convert<C>(x1) * detail::convert<C>(y2);
    const C q = detail::convert<C>(x2) * detail::convert<C>(y1);
    return detail::convert<T>(static_cast<C>(p - q));
  }
}

}  // namespace

void topk_into(const Tensor& out, const Tensor& x, int64_t k, int64_t axis, bool largest) {
  if (out.numel() == 0) return;
  if (largest) topk_lines<true>(x, k, axis, out);
  else topk_lines<false>(x, k, axis, out);
}

void searchsorted_into(const Tensor& out, const Tensor& seq, const Tensor& values, bool right) {
  if (out.numel() == 0) return;
  const int64_t n = seq.shape().back();
  const int64_t sstep = seq.strides().back() * static_cast<int64_t>(seq.itemsize());
  const bool batched = seq.ndim() > 1;
  // 1-d seq: every element of values is a line of one (the seq's lead stride 0);
  // batched: each row of values (last axis) searches the seq row of its lead.
  const size_t nlead = batched ? static_cast<size_t>(values.ndim() - 1) : static_cast<size_t>(values.ndim());
  const Shape lead(values.shape().begin(), values.shape().begin() + static_cast<int64_t>(nlead));
  const int64_t m = batched ? values.shape().back() : 1;
  const int64_t vstep = batched ? values.strides().back() * static_cast<int64_t>(values.itemsize()) : 0;
  const int64_t ostep = batched ? out.strides().back() * static_cast<int64_t>(out.itemsize()) : 0;
  const std::array<std::vector<int64_t>, 3> st = {lead_strides(out, nlead),
                                                  batched ? lead_strides(seq, nlead) : std::vector<int64_t>(nlead, 0),
                                                  lead_strides(values, nlead)};
  int64_t log_n = 1;
  while ((int64_t{1} << log_n) < n + 1) ++log_n;
  detail::visit_dtype(seq.dtype(), [&](auto tag) {
    using T = typename decltype(tag)::type;
    using C = detail::compute_t<T>;
    for_each_lead<3>(lead, st, {base_of(out), base_of(seq), base_of(values)}, m * log_n,
                     [&](int64_t, const std::array<char*, 3>& p) {
                       const char* s = p[1];
                       auto at = [&](int64_t i) { return detail::convert<C>(*reinterpret_cast<const T*>(s + i * sstep)); };
                       for (int64_t j = 0; j < m; ++j) {
                         const C v = detail::convert<C>(*reinterpret_cast<const T*>(p[2] + j * vstep));
                         *reinterpret_cast<int64_t*>(p[0] + j * ostep) = sorted_position(at, n, v, right);
                       }
                     });
  });
}

void triangle_into(const Tensor& out, const Tensor& x, int64_t k, bool lower) {
  if (out.numel() == 0) return;
  const size_t nd = static_cast<size_t>(x.ndim());
  const int64_t rows = x.shape()[nd - 2], cols = x.shape()[nd - 1];
  const Shape lead(x.shape().begin(), x.shape().end() - 1);
  const int64_t ostep = out.strides().back() * static_cast<int64_t>(out.itemsize());
  const int64_t xstep = x.strides().back() * static_cast<int64_t>(x.itemsize());
  visit_width(x.itemsize(), [&](auto tag) {
    using W = typename decltype(tag)::type;
    for_each_lead<2>(lead, {lead_strides(out, nd - 1), lead_strides(x, nd - 1)}, {base_of(out), base_of(x)}, cols,
                     [&](int64_t line, const std::array<char*, 2>& p) {
                       const int64_t r = line % rows;
                       for (int64_t c = 0; c < cols; ++c) {
                         const bool keep = lower ? c - r <= k : c - r >= k;
                         *reinterpret_cast<W*>(p[0] + c * ostep) =
                             keep ? *reinterpret_cast<const W*>(p[1] + c * xstep) : W(0);
                       }
                     });
  });
}

void diag_into(const Tensor& out, const Tensor& x, int64_t k) {
  if (out.numel() == 0) return;
  const int64_t xi = x.itemsize();
  char* ob = base_of(out);
  const char* xb = base_of(x);
  visit_width(x.itemsize(), [&](auto tag) {
    using W = typename decltype(tag)::type;
    if (x.ndim() == 1) {
      fill(out, 0.0);  // 0 bits in every dtype
      const int64_t n = x.shape()[0], r0 = k >= 0 ? 0 : -k, c0 = k >= 0 ? k : 0;
      const int64_t os0 = out.strides()[0] * xi, os1 = out.strides()[1] * xi, xs = x.strides()[0] * xi;
      for (int64_t i = 0; i < n; ++i)
        *reinterpret_cast<W*>(ob + (r0 + i) * os0 + (c0 + i) * os1) = *reinterpret_cast<const W*>(xb + i * xs);
    } else {
      const int64_t len = out.shape()[0], r0 = k >= 0 ? 0 : -k, c0 = k >= 0 ? k : 0;
      const int64_t xs0 = x.strides()[0] * xi, xs1 = x.strides()[1] * xi, os = out.strides()[0] * xi;
      for (int64_t i = 0; i < len; ++i)
        *reinterpret_cast<W*>(ob + i * os) = *reinterpret_cast<const W*>(xb + (r0 + i) * xs0 + (c0 + i) * xs1);
    }
  });
}

void nan_to_num_into(const Tensor& out, const Tensor& x, double nan, double posinf, double neginf) {
  if (out.numel() == 0) return;
  if (!is_floating(x.dtype())) {
    copy_into(x, out);
    return;
  }
  auto L = make_loop<2>(out.shape(), {&out, &x});
  detail::visit_dtype(x.dtype(), [&](auto tag) {
    using T = typename decltype(tag)::type;
    if constexpr (std::is_same_v<T, float16_t> || std::is_same_v<T, bfloat16_t> || std::is_floating_point_v<T>) {
      using C = detail::compute_t<T>;
      const T rn = detail::convert<T>(nan), rp = detail::convert<T>(posinf), rm = detail::convert<T>(neginf);
      run_loop(L, [&](char** p, const int64_t* st, int64_t cnt) {
        char* o = p[0];
        const char* s = p[1];
        for (int64_t i = 0; i < cnt; ++i, o += st[0], s += st[1]) {
          const T v = *reinterpret_cast<const T*>(s);
          const C c = detail::convert<C>(v);
          *reinterpret_cast<T*>(o) = c != c ? rn : c == std::numeric_limits<C>::infinity() ? rp
                                                : c == -std::numeric_limits<C>::infinity() ? rm
                                                                                           : v;
        }
      });
    }
  });
}

void cross_into(const Tensor& out, const Tensor& a_in, const Tensor& b_in, int64_t axis) {
  if (out.numel() == 0) return;
  const Tensor a = as_operand(a_in, out.dtype(), out.shape()), b = as_operand(b_in, out.dtype(), out.shape());
  detail::visit_dtype(out.dtype(), [&](auto tag) {
    using T = typename decltype(tag)::type;
    for_each_line<3>(out.shape(), axis, {&out, &a, &b}, [](const auto& p, const auto& st, int64_t) {
      auto ld = [&](int k, int i) { return *reinterpret_cast<const T*>(p[k] + i * st[k]); };
      const T a0 = ld(1, 0), a1 = ld(1, 1), a2 = ld(1, 2), b0 = ld(2, 0), b1 = ld(2, 1), b2 = ld(2, 2);
      *reinterpret_cast<T*>(p[0]) = cross_term(a1, b2, a2, b1);
      *reinterpret_cast<T*>(p[0] + st[0]) = cross_term(a2, b0, a0, b2);
      *reinterpret_cast<T*>(p[0] + 2 * st[0]) = cross_term(a0, b1, a1, b0);
    });
  });
}

}  // namespace kiln::cpu
