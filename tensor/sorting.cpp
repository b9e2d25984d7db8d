// topk, searchsorted, unique, nonzero and argwhere, built on the Scan rows
// (sort, argsort) and elementwise rows.
#include "sorting.h"

#include <string>

#include "creation.h"
#include "error.h"
#include "kernel_registry.h"
#include "matrix_ops.h"
#include "ops.h"
#include "realize_hook.h"

namespace kiln {

TopK topk(const Tensor& x, int64_t k, int64_t axis, bool largest) {
  if (x.ndim() == 0) throw IndexError("topk: a 0-d tensor has no axis " + std::to_string(axis));
  const int64_t n = x.shape()[normalize_axis(axis, x.ndim(), "topk")];
  if (k < 0 || k > n)
    throw ValueError("topk: k must be in [0, " + std::to_string(n) + "] (the extent of axis " + std::to_string(axis) +
                     " of shape " + shape_str(x.shape()) + "), got " + std::to_string(k));
  // The first k of a stable sort: ties keep the lower index first, as
  // torch.topk's sorted CPU result does. Eagerly, a device's selection
  // kernel gives the same bits without sorting whole lines; while a graph
  // records, the composite below is what gets traced.
  if (detail::active_context() == nullptr) {
    x.realize();
    const auto topk_kernel = detail::device_utilities(x.device(), "topk").topk;
    if (topk_kernel != nullptr) {
      const int64_t ax = normalize_axis(axis, x.ndim(), "topk");
      Shape s = x.shape();
      s[ax] = k;
      TopK r{detail::output_tensor(s, x.dtype(), x.device()), detail::output_tensor(s, DType::int64, x.device())};
      topk_kernel(x, k, ax, largest, r.values, r.indices);
      return r;
    }
  }
  Tensor idx = slice(argsort(x, axis, largest), axis, 0, k);
  return {gather(x, axis, idx), idx};
}

namespace {

/// a < b in numpy's sort order (NaN above everything), elementwise.
Tensor nan_last_less(const Tensor& a, const Tensor& b) {
  return logical_or(less(a, b), logical_and(isnan(b), logical_not(isnan(a))));
}

/// The host values of a data-dependent op's input, or a RealizationError
/// naming `op` inside a traced function.
std::vector<bool> truth_values(const Tensor& x, const char* op) {
  try {
    return cast(x, DType::bool_).to_vector<bool>();
  } catch (const RealizationError& e) {
    throw RealizationError(std::string(op) + ": the result's shape depends on the data, so it cannot be recorded "
                           "into a graph (call it outside jit/compile/stage, or use a mask with where()): " + e.what());
  }
}

/// The int64 positions of the true elements of the 1-d mask.
Tensor truth_positions(const Tensor& mask, const char* op) {
  const std::vector<bool> t = truth_values(mask, op);
  std::vector<int64_t> pos;
  for (size_t i = 0; i < t.size(); ++i)
    if (t[i]) pos.push_back(static_cast<int64_t>(i));
  const int64_t n = static_cast<int64_t>(pos.size());
  return Tensor::from_vector(std::move(pos), {n});
}

}  // namespace

Tensor searchsorted(const Tensor& sorted_sequence, const Tensor& values, bool right) {
  if (sorted_sequence.ndim() != 1)
    throw ShapeError("searchsorted: sorted_sequence must be 1-d, got shape " + shape_str(sorted_sequence.shape()));
  Tensor v = unsqueeze(values, -1);  // [..., 1] against [n]
  // left: count of s < v; right: count of s <= v, i.e. not (v < s).
  Tensor below = right ? logical_not(nan_last_less(v, sorted_sequence)) : nan_last_less(sorted_sequence, v);
  return sum(below, {-1});
}

std::vector<Tensor> nonzero(const Tensor& x) {
  const std::vector<bool> t = truth_values(x, "nonzero");
  const int64_t nd = x.ndim();
  std::vector<std::vector<int64_t>> coords(static_cast<size_t>(nd));
  std::vector<int64_t> idx(static_cast<size_t>(nd), 0);
  for (size_t i = 0; i < t.size(); ++i) {
    if (t[i])
      for (int64_t d = 0; d < nd; ++d) coords[d].push_back(idx[d]);
    for (int64_t d = nd - 1; d >= 0; --d) {  // row-major odometer
      if (++idx[d] < x.shape()[d]) break;
      idx[d] = 0;
    }
  }
  std::vector<Tensor> out;
  for (auto& c : coords) {
    const int64_t n = static_cast<int64_t>(c.size());
    out.push_back(Tensor::from_vector(std::move(c), {n}));
  }
  return out;
}

Tensor argwhere(const Tensor& x) {
  if (x.ndim() == 0)  // numpy: one row of no coordinates when true, none when false
    return zeros({truth_values(x, "argwhere")[0] ? 1 : 0, 0}, DType::int64);
  std::vector<Tensor> c = nonzero(x);
  for (Tensor& t : c) t = unsqueeze(t, 1);
  return concat(c, 1);
}

Unique unique(const Tensor& x) {
  const Tensor flat = reshape(x, {x.numel()});
  const int64_t n = flat.numel();
  const Tensor perm = argsort(flat);
  const Tensor sorted = gather(flat, 0, perm);
  // A new value starts where a sorted neighbour differs (NaN equal to NaN).
  Tensor starts;
  if (n > 0) {
    Tensor hi = slice(sorted, 0, 1, std::nullopt), lo = slice(sorted, 0, 0, -1);
    Tensor differs = logical_and(not_equal(hi, lo), logical_not(logical_and(isnan(hi), isnan(lo))));
    starts = concat({full({1}, true, DType::bool_), differs}, 0);
  } else {
    starts = zeros({0}, DType::bool_);
  }
  const Tensor first = truth_positions(starts, "unique");  // positions in `sorted` where each value starts
  const int64_t groups = first.numel();
  Unique u;
  u.values = index_select(sorted, 0, first);
  u.counts = groups > 0 ? diff(concat({first, full({1}, n, DType::int64)}, 0)) : zeros({0}, DType::int64);
  // Group id of each sorted element, moved back to the element's own position.
  const Tensor gid = cumsum(starts, 0) - int64_t(1);
  u.inverse = n > 0 ? reshape(gather(gid, 0, argsort(perm)), x.shape()) : zeros(x.shape(), DType::int64);
  return u;
}

}  // namespace kiln
