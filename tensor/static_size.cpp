// nonzero_static and unique_static (static_size.h): fixed-size results
// composed from op-table rows, so they record into graphs like any op.
#include "static_size.h"

#include <algorithm>
#include <string>

#include "creation.h"
#include "error.h"
#include "ops.h"
#include "sorting.h"

namespace kiln {

namespace {

void check_size(int64_t size, const char* op) {
  if (size < 0) throw ValueError(std::string(op) + ": size must be >= 0, got " + std::to_string(size));
}

// The first min(size, n) entries of the 1-d int64 `order`, then zeros up to `size`.
Tensor first_padded(const Tensor& order, int64_t n, int64_t size) {
  const int64_t k = std::min(size, n);
  Tensor head = slice(order, 0, 0, k);
  if (size == k) return head;
  return concat({head, zeros({size - k}, DType::int64)}, 0);
}

// Runs f, naming `op` in front of a kiln error raised by an op it is built
// from ("full: cannot convert ..." -> "unique_static: full: cannot convert
// ..."), keeping the error's type.
template <class F>
auto named(const char* op, F&& f) {
  auto msg = [op](const Error& e) {
    const std::string w = e.what();
    return w.rfind(std::string(op) + ":", 0) == 0 ? w : std::string(op) + ": " + w;
  };
  try {
    return f();
  } catch (const ShapeError& e) {
    throw ShapeError(msg(e));
  } catch (const DTypeError& e) {
    throw DTypeError(msg(e));
  } catch (const IndexError& e) {
    throw IndexError(msg(e));
  } catch (const ValueError& e) {
    throw ValueError(msg(e));
  } catch (const RealizationError&) {
    throw;
  } catch (const Error& e) {  // e.g. Buffer::allocate's out of memory
    throw Error(msg(e));
  }
}

// The positions of the true elements of the 1-d bool `mask`, in ascending
// order, followed by the false ones: a stable argsort of !mask.
Tensor true_first(const Tensor& mask) { return argsort(cast(logical_not(mask), DType::int32), 0); }

}  // namespace

namespace {

std::vector<Tensor> nonzero_static_impl(const Tensor& x, int64_t size, int64_t fill) {
  check_size(size, "nonzero_static");
  if (x.ndim() == 0)
    throw ShapeError("nonzero_static: a 0-d tensor has no axis to give coordinates along (reshape it to [1] first)");
  const int64_t n = x.numel(), nd = x.ndim();
  std::vector<Tensor> out;
  if (n == 0) {
    for (int64_t d = 0; d < nd; ++d) out.push_back(full({size}, fill, DType::int64));
    return out;
  }
  const Tensor mask = cast(reshape(x, {n}), DType::bool_);  // nonzero and NaN are true
  const Tensor pos = first_padded(true_first(mask), n, size);
  const Tensor count = sum(cast(mask, DType::int64));
  const Tensor valid = less(arange(size, DType::int64), count);
  const Tensor fill_t = full({}, fill, DType::int64);
  int64_t stride = n;
  for (int64_t d = 0; d < nd; ++d) {
    const int64_t extent = x.shape()[d];
    stride /= extent;
    Tensor c = floor_divide(pos, full({}, stride, DType::int64));
    if (d > 0) c = remainder(c, full({}, extent, DType::int64));
    out.push_back(where(valid, c, fill_t));
  }
  return out;
}

UniqueStatic unique_static_impl(const Tensor& x, int64_t size, Scalar fill) {
  check_size(size, "unique_static");
  const Tensor fill_t = full({}, fill, x.dtype());
  const int64_t n = x.numel();
  UniqueStatic u;
  if (n == 0) {
    u.values = full({size}, fill, x.dtype());
    u.inverse = zeros(x.shape(), DType::int64);
    u.counts = zeros({size}, DType::int64);
    u.count = zeros({}, DType::int64);
    return u;
  }
  const Tensor flat = reshape(x, {n});
  const Tensor perm = argsort(flat, 0);
  const Tensor sorted = gather(flat, 0, perm);
  // A new value starts where a sorted neighbour differs (NaN equal to NaN), as unique() does.
  Tensor starts = full({1}, true, DType::bool_);
  if (n > 1) {
    const Tensor hi = slice(sorted, 0, 1, std::nullopt), lo = slice(sorted, 0, 0, -1);
    const Tensor differs = logical_and(not_equal(hi, lo), logical_not(logical_and(isnan(hi), isnan(lo))));
    starts = concat({starts, differs}, 0);
  }
  const Tensor gid = cumsum(starts, 0) - int64_t(1);  // int64: each sorted element's value number
  u.count = sum(cast(starts, DType::int64));
  const Tensor valid = less(arange(size, DType::int64), u.count);
  const Tensor first = first_padded(true_first(starts), n, size);  // where each value starts in `sorted`
  u.values = where(valid, gather(sorted, 0, first), fill_t);
  // Counts: every sorted element adds 1 to its value's slot; dropped values go to a spare slot.
  const Tensor slot = minimum(gid, full({}, size, DType::int64));
  u.counts = slice(scatter_add(zeros({size + 1}, DType::int64), 0, slot, ones({n}, DType::int64)), 0, 0, size);
  u.inverse = reshape(gather(gid, 0, argsort(perm, 0)), x.shape());
  return u;
}

}  // namespace

std::vector<Tensor> nonzero_static(const Tensor& x, int64_t size, int64_t fill) {
  return named("nonzero_static", [&] { return nonzero_static_impl(x, size, fill); });
}

UniqueStatic unique_static(const Tensor& x, int64_t size, Scalar fill) {
  return named("unique_static", [&] { return unique_static_impl(x, size, fill); });
}

}  // namespace kiln
