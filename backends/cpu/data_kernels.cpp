#include "data_kernels.h"

#include <omp.h>

#include <cstring>
#include <type_traits>

#include "../../tensor/dispatch.h"
#include "copy.h"
#include "element_width.h"
#include "strided_loop.h"

namespace kiln::cpu {
namespace {

using detail::TypeTag;

// Calls f(TypeTag<I>{}) for an index dtype (int32 or int64; checked before).
template <class F>
decltype(auto) visit_index(DType d, F&& f) {
  if (d == DType::int32) return f(TypeTag<int32_t>{});
  return f(TypeTag<int64_t>{});
}


// Another view of t's storage.
Tensor view_of(const Tensor& t, Shape shape, Strides strides, int64_t offset) {
  return Tensor(t.buffer(), t.dtype(), std::move(shape), std::move(strides), offset);
}

}  // namespace

void fill(const Tensor& dst, double value) {
  auto L = make_loop<1>(dst.shape(), {&dst});
  detail::visit_dtype(dst.dtype(), [&](auto tag) {
    using T = typename decltype(tag)::type;
    const T v = detail::convert<T>(value);
    run_loop(L, [v](char** p, const int64_t* st, int64_t n) {
      char* d = p[0];
      for (int64_t i = 0; i < n; ++i, d += st[0]) *reinterpret_cast<T*>(d) = v;
    });
  });
}

void concat_into(const Tensor& out, std::span<const Tensor> xs, int64_t axis) {
  const Strides& ost = out.strides();
  int64_t at = 0;
  for (const Tensor& x : xs) {
    const int64_t len = x.shape()[axis];
    if (x.numel() > 0) {
      Shape s = out.shape();
      s[axis] = len;
      copy_into(x, view_of(out, std::move(s), ost, out.offset() + at * ost[axis]));
    }
    at += len;
  }
}

void pad_into(const Tensor& out, const Tensor& x, const std::vector<int64_t>& pads, double value) {
  // Filling everything then overwriting the interior costs at most one extra
  // write per element and keeps a single strided copy.
  fill(out, value);
  if (x.numel() == 0) return;
  const Strides& ost = out.strides();
  int64_t off = out.offset();
  for (size_t i = 0; i < ost.size(); ++i) off += pads[2 * i] * ost[i];
  copy_into(x, view_of(out, x.shape(), ost, off));
}

void tile_into(const Tensor& out, const Tensor& x, const std::vector<int64_t>& reps) {
  if (out.numel() == 0) return;
  // Axis k of out (extent reps[k] * e) is split into (rep, e); the source is x
  // with a broadcast (stride 0) rep axis in front of each of its axes, so one
  // strided copy writes every repetition.
  const int64_t nd = out.ndim(), lead = nd - x.ndim();
  const Strides& ost = out.strides();
  Shape ds(2 * nd), ss(2 * nd);
  Strides dst(2 * nd), sst(2 * nd);
  for (int64_t k = 0; k < nd; ++k) {
    const int64_t e = k < lead ? 1 : x.shape()[k - lead];
    ds[2 * k] = reps[k];
    ds[2 * k + 1] = e;
    dst[2 * k] = e * ost[k];
    dst[2 * k + 1] = ost[k];
    ss[2 * k] = 1;
    ss[2 * k + 1] = e;
    sst[2 * k] = 0;
    sst[2 * k + 1] = k < lead ? 0 : x.strides()[k - lead];
  }
  copy_into(view_of(x, std::move(ss), std::move(sst), x.offset()),
            view_of(out, std::move(ds), std::move(dst), out.offset()));
}

std::optional<int64_t> first_index_outside(const Tensor& index, int64_t lo, int64_t hi) {
  Tensor c = index.contiguous();
  const int64_t n = c.numel();
  if (n == 0) return std::nullopt;
  return visit_index(c.dtype(), [&](auto tag) -> std::optional<int64_t> {
    using I = typename decltype(tag)::type;
    const I* p = static_cast<const I*>(c.data_ptr());
    // The smallest bad position, so the reported index does not depend on threads.
    int64_t bad = n;
#pragma omp parallel for reduction(min : bad) schedule(static) if (n >= kParallelGrain)
    for (int64_t i = 0; i < n; ++i) {
      const int64_t v = p[i];
      if ((v < lo || v >= hi) && i < bad) bad = i;
    }
    if (bad == n) return std::nullopt;
    return static_cast<int64_t>(p[bad]);
  });
}

void gather_into(const Tensor& out, const Tensor& x, int64_t axis, const Tensor& index) {
  if (out.numel() == 0) return;
  // `lines` points at the start of each line of x along `axis` (extent 1
  // there, so it broadcasts); the kernel steps `k` elements down the line.
  Shape ls = x.shape();
  ls[axis] = 1;
  Tensor lines = view_of(x, std::move(ls), x.strides(), x.offset());
  const int64_t line_stride = x.strides()[axis] * static_cast<int64_t>(x.itemsize());
  const int64_t n = x.shape()[axis];
  auto L = make_loop<3>(out.shape(), {&out, &lines, &index});
  visit_index(index.dtype(), [&](auto itag) {
    using I = typename decltype(itag)::type;
    visit_width(x.itemsize(), [&](auto wtag) {
      using W = typename decltype(wtag)::type;
      run_loop(L, [=](char** p, const int64_t* st, int64_t cnt) {
        char* d = p[0];
        const char* s = p[1];
        const char* ip = p[2];
        for (int64_t i = 0; i < cnt; ++i, d += st[0], s += st[1], ip += st[2]) {
          int64_t k = *reinterpret_cast<const I*>(ip);
          if (k < 0) k += n;
          std::memcpy(d, s + k * line_stride, sizeof(W));
        }
      });
    });
  });
}

void one_hot_into(const Tensor& out, const Tensor& index, int64_t classes) {
  fill(out, 0.0);
  Tensor c = index.contiguous();
  const int64_t rows = c.numel();
  if (rows == 0) return;
  char* o = static_cast<char*>(out.data_ptr());
  const int64_t item = static_cast<int64_t>(out.itemsize());
  detail::visit_dtype(out.dtype(), [&](auto otag) {
    using T = typename decltype(otag)::type;
    const T one = detail::convert<T>(1.0);
    visit_index(c.dtype(), [&](auto itag) {
      using I = typename decltype(itag)::type;
      const I* ip = static_cast<const I*>(c.data_ptr());
#pragma omp parallel for schedule(static) if (rows >= kParallelGrain)
      for (int64_t r = 0; r < rows; ++r) std::memcpy(o + (r * classes + ip[r]) * item, &one, sizeof(T));
    });
  });
}

namespace {
template <class T>
T add_values(T a, T b) {
  if constexpr (std::is_same_v<T, bool>) return a || b;
  else if constexpr (std::is_integral_v<T>)  // wraps as numpy's integers do (no signed overflow UB)
    return static_cast<T>(static_cast<uint64_t>(a) + static_cast<uint64_t>(b));
  else return T(static_cast<detail::compute_t<T>>(a) + static_cast<detail::compute_t<T>>(b));
}
}  // namespace

void scatter_into(const Tensor& out, const Tensor& x, int64_t axis, const Tensor& index, const Tensor& src, bool add) {
  copy_into(x, out);
  const int64_t m = index.numel();
  if (m == 0) return;
  const Tensor ic = index.contiguous();
  const Shape& is = index.shape();
  const size_t nd = is.size();
  const int64_t n = out.shape()[axis];
  const Strides &ost = out.strides(), &sst = src.strides();
  detail::visit_dtype(out.dtype(), [&](auto tag) {
    using T = typename decltype(tag)::type;
    T* ob = static_cast<T*>(out.data_ptr());
    const T* sb = static_cast<const T*>(src.data_ptr());
    visit_index(ic.dtype(), [&](auto itag) {
      using I = typename decltype(itag)::type;
      const I* ip = static_cast<const I*>(ic.data_ptr());
      std::vector<int64_t> c(nd, 0);  // the multi-index of position p
      for (int64_t p = 0; p < m; ++p) {
        int64_t k = static_cast<int64_t>(ip[p]);
        if (k < 0) k += n;
        int64_t oo = 0, so = 0;
        for (size_t d = 0; d < nd; ++d) {
          oo += (static_cast<int64_t>(d) == axis ? k : c[d]) * ost[d];
          so += c[d] * sst[d];
        }
        ob[oo] = add ? add_values(ob[oo], sb[so]) : sb[so];
        for (size_t d = nd; d-- > 0;) {
          if (++c[d] < is[d]) break;
          c[d] = 0;
        }
      }
    });
  });
}

}  // namespace kiln::cpu
