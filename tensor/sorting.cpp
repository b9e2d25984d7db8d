// unique, nonzero and argwhere, built on the Scan rows (sort, argsort) and
// elementwise rows (topk and searchsorted are rows: ops_select.cpp).
#include "sorting.h"

#include <string>

#include "creation.h"
#include "error.h"
#include "matrix_ops.h"
#include "ops.h"
#include "realize_hook.h"
#include "sorting_detail.h"

namespace kiln {

namespace {

/// The host values of a data-dependent op's input, or a RealizationError
/// naming `op` inside a traced function or a kiln::lazy() scope; `instead`
/// names what to use there (a fixed-size variant, a mask).
std::vector<bool> truth_values(const Tensor& x, const char* op, const char* instead) {
  // Traced, the input is a symbolic value (or becomes one: even a captured
  // tensor's cast is recorded), so there is nothing to count: one message
  // naming the op, not to_vector's explanation tacked on.
  if (detail::recording_graph())
    throw RealizationError(std::string(op) + ": the result's shape depends on the data, and inside jit/compile/stage "
                           "tensors are symbolic values with no data until the compiled function runs, so " + op +
                           " cannot be traced; use " + instead + ", or call it outside the traced function");
  try {
    return cast(x, DType::bool_).to_vector<bool>();
  } catch (const RealizationError& e) {
    // a kiln::lazy() scope: its values come when the scope ends
    throw RealizationError(std::string(op) + ": the result's shape depends on the data, which a kiln::lazy() "
                           "scope computes only when it ends (call it after the lazy() scope, compute the input "
                           "before entering it, or use a mask with where()): " + e.what());
  }
}

/// nonzero of `x`, with errors naming `op` (nonzero, argwhere, a bool index).
std::vector<Tensor> nonzero_named(const Tensor& x, const char* op, const char* instead) {
  const std::vector<bool> t = truth_values(x, op, instead);
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

/// The int64 positions of the true elements of the 1-d mask.
Tensor truth_positions(const Tensor& mask, const char* op, const char* instead) {
  const std::vector<bool> t = truth_values(mask, op, instead);
  std::vector<int64_t> pos;
  for (size_t i = 0; i < t.size(); ++i)
    if (t[i]) pos.push_back(static_cast<int64_t>(i));
  const int64_t n = static_cast<int64_t>(pos.size());
  return Tensor::from_vector(std::move(pos), {n});
}

}  // namespace

std::vector<Tensor> nonzero(const Tensor& x) {
  return nonzero_named(x, "nonzero",
                       "nonzero_static(x, size, fill) for a fixed number of positions, or a mask with where()");
}

std::vector<Tensor> detail::bool_index_positions(const Tensor& mask) {
  return nonzero_named(mask, "index (a bool mask)",
                       "where(mask, x, fill) or masked_fill to keep the shape, or nonzero_static(mask, size, fill) "
                       "for a fixed number of positions");
}

namespace {
constexpr const char* kArgwhereInstead = "nonzero_static(x, size, fill) for a fixed number of coordinates";
}  // namespace

Tensor argwhere(const Tensor& x) {
  if (x.ndim() == 0)  // numpy: one row of no coordinates when true, none when false
    return zeros({truth_values(x, "argwhere", kArgwhereInstead)[0] ? 1 : 0, 0}, DType::int64);
  std::vector<Tensor> c = nonzero_named(x, "argwhere", kArgwhereInstead);
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
  // positions in `sorted` where each value starts
  const Tensor first = truth_positions(starts, "unique", "unique_static(x, size, fill) for a fixed number of values");
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
