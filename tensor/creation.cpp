// kiln: tensors made from nothing or from C++ data (see creation.h).
#include "creation.h"

#include <algorithm>
#include <cmath>
#include <cstring>
#include <string>
#include <type_traits>

#include "allocation_error.h"
#include "device_memory.h"
#include "dispatch.h"
#include "kernel_registry.h"
#include "num_str.h"
#include "scalar_store.h"

// Values must match numpy's bit for bit: no fused multiply-add contraction
// (-march=native enables FMA, and GCC contracts a*b+c by default in C++).
#if defined(__clang__)
#pragma clang fp contract(off)
#elif defined(__GNUC__)
#pragma GCC optimize("fp-contract=off")
#endif

namespace kiln {

namespace {

// Fills below this many elements stay on one thread (thread start-up costs
// more than the stores).
constexpr int64_t kFillGrain = int64_t(1) << 16;

using detail::num_str;

// Stores `value` (converted to t's dtype by Scalar's rules, exact for
// integers; errors name `op`) into every element of the contiguous tensor t.
void fill(const Tensor& t, const Scalar& value, const char* op) {
  const int64_t n = t.numel();
  void* p = t.data_ptr();
  detail::visit_dtype(t.dtype(), [&](auto tag) {
    using T = typename decltype(tag)::type;
    const T v = detail::scalar_as<T>(value, op);  // checked even when n == 0, as numpy
    if (n == 0) return;
    T* d = static_cast<T*>(p);
#pragma omp parallel for schedule(static) if (n >= kFillGrain)
    for (int64_t i = 0; i < n; ++i) d[i] = v;
  });
}

// Element i = f(i) converted to t's dtype; f returns double.
template <class F>
void fill_indexed(const Tensor& t, F&& f) {
  const int64_t n = t.numel();
  if (n == 0) return;
  void* p = t.data_ptr();
  detail::visit_dtype(t.dtype(), [&](auto tag) {
    using T = typename decltype(tag)::type;
    T* d = static_cast<T*>(p);
#pragma omp parallel for schedule(static) if (n >= kFillGrain)
    for (int64_t i = 0; i < n; ++i) d[i] = detail::convert<T>(f(i));
  });
}

// A converted copy that does not go through the op table (creation must work
// before, and independently of, the Cast kernel).
Tensor converted(const Tensor& t, DType dtype) {
  if (t.dtype() == dtype) return t;
  Tensor out = Tensor::empty(t.shape(), dtype);
  if (out.numel() > 0) detail::copy_into(t, out);
  return out;
}

// Appends the elements of a (nested) literal list to `flat`, recording the
// extents in `shape` at `depth` (the first list at each depth sets it; the
// others must match: ShapeError naming the list's index in its parent).
template <class S, class T>
void flatten_list(std::initializer_list<T> v, size_t depth, size_t index, Shape& shape, std::vector<S>& flat) {
  if (shape.size() <= depth) shape.resize(depth + 1, -1);
  const int64_t n = static_cast<int64_t>(v.size());
  if (shape[depth] < 0) shape[depth] = n;
  if (shape[depth] != n)
    throw ShapeError("tensor: nested lists must be rectangular; row 0 has " + std::to_string(shape[depth]) +
                     " elements but row " + std::to_string(index) + " has " + std::to_string(n) + " (nesting depth " +
                     std::to_string(depth) + ")");
  size_t i = 0;
  for (const auto& e : v) {
    if constexpr (std::is_arithmetic_v<T>) flat.push_back(static_cast<S>(e));
    else flatten_list(e, depth + 1, i++, shape, flat);
  }
}

template <class T, int Depth, class L>
Tensor from_literal(L v, std::optional<DType> dtype) {
  using S = std::conditional_t<std::is_same_v<T, bool>, uint8_t, T>;  // vector<bool> has no data()
  Shape shape;
  std::vector<S> flat;
  flatten_list(v, 0, 0, shape, flat);
  // An empty list at some depth leaves the deeper extents unknown: 0.
  shape.resize(Depth, 0);
  for (auto& e : shape) e = std::max<int64_t>(e, 0);
  // A literal value the requested integer dtype cannot hold is an error, as
  // numpy 2's np.array([-1], np.uint16) (the rule of full and fill_), not a
  // silent wrap by the cast.
  if constexpr (!std::is_same_v<T, bool>)
    if (dtype && is_integral(*dtype) && *dtype != DType::bool_ && *dtype != dtype_v<T>)
      for (const S& x : flat) check_scalar_fits(Scalar(x), *dtype, "tensor");
  Tensor t = Tensor::from_data(flat.data(), dtype_v<T>, flat.size(), shape);
  return dtype ? converted(t, *dtype) : t;
}

}  // namespace

namespace detail {
Tensor empty_for(const Shape& shape, DType dtype, Device device, const char* op) {
  const int64_t n = checked_numel(shape, op);
  if (static_cast<uint64_t>(n) > SIZE_MAX / size_of(dtype))
    throw ShapeError(std::string(op) + ": shape " + shape_str(shape) + " of " + std::string(name(dtype)) +
                     " needs more bytes than fit in size_t");
  try {
    return Tensor::empty(shape, dtype, device);
  } catch (...) {
    rethrow_allocation_error_as(op);
  }
}
}  // namespace detail

Tensor empty(const Shape& shape, DType dtype, Device device) {
  return detail::empty_for(shape, dtype, device, "empty");
}

Tensor zeros(const Shape& shape, DType dtype, Device device) {
  Tensor t = detail::empty_for(shape, dtype, device, "zeros");
  // All-zero bytes are 0 / +0.0 / false in every kiln dtype.
  const int64_t nbytes = t.numel() * static_cast<int64_t>(size_of(dtype));
  if (!device.is_cpu()) {  // a stream-ordered memset on the device
    if (nbytes > 0) detail::device_memory(device, "zeros").zero(device.index, t.data_ptr(), size_t(nbytes));
    return t;
  }
  char* p = static_cast<char*>(t.data_ptr());
  constexpr int64_t kChunk = int64_t(1) << 20;
  const int64_t chunks = (nbytes + kChunk - 1) / kChunk;
#pragma omp parallel for schedule(static) if (chunks > 1)
  for (int64_t c = 0; c < chunks; ++c)
    std::memset(p + c * kChunk, 0, static_cast<size_t>(std::min(kChunk, nbytes - c * kChunk)));
  return t;
}

namespace {
Tensor filled(const Shape& shape, const Scalar& value, DType dtype, Device device, const char* op) {
  if (!device.is_cpu()) return filled(shape, value, dtype, Device::cpu(), op).to(device);
  Tensor t = detail::empty_for(shape, dtype, device, op);
  fill(t, value, op);
  return t;
}
}  // namespace

Tensor ones(const Shape& shape, DType dtype, Device device) { return filled(shape, 1.0, dtype, device, "ones"); }

Tensor full(const Shape& shape, Scalar value, DType dtype, Device device) {
  return filled(shape, value, dtype, device, "full");
}

namespace {
void defined_like(const Tensor& x, const char* op) {
  if (!x.defined()) throw ValueError(std::string(op) + ": x is an undefined tensor (no shape or dtype to copy)");
}
}  // namespace
Tensor empty_like(const Tensor& x) {
  defined_like(x, "empty_like");
  return Tensor::empty(x.shape(), x.dtype(), x.device());
}
Tensor zeros_like(const Tensor& x) {
  defined_like(x, "zeros_like");
  return zeros(x.shape(), x.dtype(), x.device());
}
Tensor ones_like(const Tensor& x) {
  defined_like(x, "ones_like");
  return ones(x.shape(), x.dtype(), x.device());
}
Tensor full_like(const Tensor& x, Scalar value) {
  defined_like(x, "full_like");
  return full(x.shape(), value, x.dtype(), x.device());
}

Tensor arange(double start, double stop, double step, DType dtype) {
  if (!std::isfinite(start) || !std::isfinite(stop) || !std::isfinite(step))
    throw ValueError("arange: start, stop and step must be finite, got start=" + num_str(start) +
                     ", stop=" + num_str(stop) + ", step=" + num_str(step));
  if (step == 0) throw ValueError("arange: step must not be zero");
  // numpy: len = ceil((stop - start) / step), at least 0.
  const double len = std::ceil((stop - start) / step);
  if (!(len < 9.2e18))
    throw ShapeError("arange: start=" + num_str(start) + ", stop=" + num_str(stop) + ", step=" + num_str(step) +
                     " gives " + num_str(len) + " elements, more than int64 can count");
  const int64_t n = len > 0 ? static_cast<int64_t>(len) : 0;
  if (dtype == DType::bool_ && n > 2)
    throw DTypeError("arange: a bool result can have at most 2 elements (as in numpy), got " + std::to_string(n));
  Tensor t = detail::empty_for({n}, dtype, Device::cpu(), "arange");
  if (n == 0) return t;
  void* p = t.data_ptr();
  detail::visit_dtype(dtype, [&](auto tag) {
    using T = typename decltype(tag)::type;
    T* d = static_cast<T*>(p);
    // numpy's <dtype>_fill: the first two values are start and start + step
    // cast to the dtype; element i is first + i * (second - first) computed
    // in the dtype's own arithmetic (float for the 16-bit floats, wrapping
    // for integers). So e.g. arange(0.5, 3, 0.7, int) is [0, 1, 2, 3].
    const T v0 = detail::convert<T>(start), v1 = detail::convert<T>(start + step);
    d[0] = v0;
    if (n > 1) d[1] = v1;
    if constexpr (std::is_same_v<T, bool>) {
      return;
    } else if constexpr (std::is_integral_v<T>) {
      // in an unsigned type at least as wide as unsigned int: uint16 * uint16 would promote to int and overflow it
      using U = std::conditional_t<(sizeof(T) < sizeof(unsigned)), unsigned, std::make_unsigned_t<T>>;
      const U first = static_cast<U>(static_cast<std::make_unsigned_t<T>>(v0)),
              delta = static_cast<U>(static_cast<U>(static_cast<std::make_unsigned_t<T>>(v1)) - first);
#pragma omp parallel for schedule(static) if (n >= kFillGrain)
      for (int64_t i = 2; i < n; ++i) d[i] = static_cast<T>(static_cast<U>(first + static_cast<U>(i) * delta));
    } else {
      using C = detail::compute_t<T>;
      const C first = static_cast<C>(v0), delta = static_cast<C>(v1) - first;
#pragma omp parallel for schedule(static) if (n >= kFillGrain)
      for (int64_t i = 2; i < n; ++i) d[i] = detail::convert<T>(first + static_cast<C>(i) * delta);
    }
  });
  return t;
}

Tensor arange(int64_t stop, DType dtype) {
  Tensor t = detail::empty_for({stop > 0 ? stop : 0}, dtype, Device::cpu(), "arange");
  const int64_t n = t.numel();
  if (n == 0) return t;
  void* p = t.data_ptr();
  detail::visit_dtype(dtype, [&](auto tag) {
    using T = typename decltype(tag)::type;
    T* d = static_cast<T*>(p);
    // Integer dtypes take the index exactly (no trip through double above 2^53).
#pragma omp parallel for schedule(static) if (n >= kFillGrain)
    for (int64_t i = 0; i < n; ++i) {
      if constexpr (std::is_integral_v<T> && !std::is_same_v<T, bool>)
        d[i] = static_cast<T>(i);  // wraps for narrow types, as numpy's astype does
      else
        d[i] = detail::convert<T>(static_cast<double>(i));
    }
  });
  return t;
}

Tensor linspace(double start, double stop, int64_t num_, DType dtype) {
  if (num_ < 0) throw ValueError("linspace: num must be non-negative, got " + std::to_string(num_));
  Tensor t = detail::empty_for({num_}, dtype, Device::cpu(), "linspace");
  if (num_ == 0) return t;
  // numpy: y = i * step + start in float64, y[-1] = stop; integer dtypes
  // take floor(y) (numpy >= 1.20).
  const double step = num_ > 1 ? (stop - start) / static_cast<double>(num_ - 1) : 0.0;
  const bool to_int = !is_floating(dtype) && dtype != DType::bool_;
  const int64_t last = num_ - 1;
  fill_indexed(t, [=](int64_t i) {
    double y = (num_ > 1 && i == last) ? stop : static_cast<double>(i) * step + start;
    return to_int ? std::floor(y) : y;
  });
  return t;
}

Tensor eye(int64_t n, std::optional<int64_t> m, DType dtype) {
  const int64_t cols = m.value_or(n);
  if (n < 0 || cols < 0)
    throw ValueError("eye: sizes must be non-negative, got n=" + std::to_string(n) + ", m=" + std::to_string(cols));
  checked_numel({n, cols}, "eye");
  Tensor t = zeros({n, cols}, dtype);
  const int64_t d = std::min(n, cols);
  if (d == 0) return t;
  char* p = static_cast<char*>(t.data_ptr());
  const size_t item = size_of(dtype);
  detail::visit_dtype(dtype, [&](auto tag) {
    using T = typename decltype(tag)::type;
    const T one = detail::convert<T>(1.0);
    for (int64_t i = 0; i < d; ++i) std::memcpy(p + (i * cols + i) * item, &one, item);
  });
  return t;
}

template <TensorLiteral T>
Tensor tensor(std::initializer_list<T> v, std::optional<DType> dtype) {
  return from_literal<T, 1>(v, dtype);
}
template <TensorLiteral T>
Tensor tensor(std::initializer_list<std::initializer_list<T>> v, std::optional<DType> dtype) {
  return from_literal<T, 2>(v, dtype);
}
template <TensorLiteral T>
Tensor tensor(std::initializer_list<std::initializer_list<std::initializer_list<T>>> v, std::optional<DType> dtype) {
  return from_literal<T, 3>(v, dtype);
}
#define KILN_TENSOR_LITERAL(T)                                                                                   \
  template Tensor tensor<T>(std::initializer_list<T>, std::optional<DType>);                                     \
  template Tensor tensor<T>(std::initializer_list<std::initializer_list<T>>, std::optional<DType>);              \
  template Tensor tensor<T>(std::initializer_list<std::initializer_list<std::initializer_list<T>>>, std::optional<DType>);
KILN_TENSOR_LITERAL(float)
KILN_TENSOR_LITERAL(double)
KILN_TENSOR_LITERAL(int)
KILN_TENSOR_LITERAL(int64_t)
KILN_TENSOR_LITERAL(bool)
KILN_TENSOR_LITERAL(int16_t)
KILN_TENSOR_LITERAL(uint16_t)
KILN_TENSOR_LITERAL(uint32_t)
KILN_TENSOR_LITERAL(uint64_t)
#undef KILN_TENSOR_LITERAL

Tensor scalar(Scalar v, DType dtype) { return full({}, v, dtype); }

}  // namespace kiln
