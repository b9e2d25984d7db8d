// kiln: tensors made from nothing or from C++ data.
#pragma once
#include <concepts>
#include <initializer_list>
#include <optional>

#include "scalar.h"
#include "tensor.h"

namespace kiln {

/// Uninitialised contiguous tensor.
Tensor empty(const Shape& shape, DType dtype = DType::float32, Device device = Device::cpu());
Tensor zeros(const Shape& shape, DType dtype = DType::float32, Device device = Device::cpu());
Tensor ones(const Shape& shape, DType dtype = DType::float32, Device device = Device::cpu());
/// Every element `value` stored in `dtype` by Scalar's rules (scalar.h):
/// integers exactly; an integer outside an integer dtype's range, or a NaN,
/// infinite or out-of-range float for an integer dtype, throws ValueError
/// (numpy 2); a finite float truncates toward zero.
Tensor full(const Shape& shape, Scalar value, DType dtype = DType::float32, Device device = Device::cpu());
Tensor empty_like(const Tensor& x);
Tensor zeros_like(const Tensor& x);
Tensor ones_like(const Tensor& x);
Tensor full_like(const Tensor& x, Scalar value);
/// numpy.arange: start, start+step, ... < stop (> stop for negative step);
/// ceil((stop - start) / step) elements. step 0 throws ValueError.
Tensor arange(double start, double stop, double step = 1.0, DType dtype = DType::float32);
Tensor arange(int64_t stop, DType dtype = DType::int64);
/// numpy.linspace with endpoint: `num` evenly spaced values from start to stop.
Tensor linspace(double start, double stop, int64_t num, DType dtype = DType::float32);
/// n x m identity (m defaults to n).
Tensor eye(int64_t n, std::optional<int64_t> m = std::nullopt, DType dtype = DType::float32);

/// The C++ element types a literal list may hold.
template <class T>
concept TensorLiteral = std::same_as<T, float> || std::same_as<T, double> || std::same_as<T, int> ||
                        std::same_as<T, int64_t> || std::same_as<T, bool> || std::same_as<T, int16_t> ||
                        std::same_as<T, uint16_t> || std::same_as<T, uint32_t> || std::same_as<T, uint64_t>;

/// From C++ literals: the nesting depth is the rank (1 to 3), so
/// `tensor({{1.0f, 2.0f}, {3.0f, 4.0f}})` is 2 x 2, `tensor({{1.0f}, {2.0f}})`
/// a 2 x 1 column and `tensor({{{1.0f}}})` 1 x 1 x 1 (the element type is
/// deduced, so no two overloads compete). The dtype follows the C++ type
/// (float -> float32, double -> float64, int -> int32, int64_t -> int64,
/// int16_t -> int16, uint16_t -> uint16, uint32_t -> uint32, uint64_t ->
/// uint64, bool -> bool; e.g. `tensor({uint64_t(1) << 63})`) unless `dtype` is given; all elements must have the same
/// C++ type (`{1.0f, 2}` does not compile: write `{1.0f, 2.0f}`). Nested
/// lists must be rectangular (ShapeError otherwise).
template <TensorLiteral T>
Tensor tensor(std::initializer_list<T> v, std::optional<DType> dtype = std::nullopt);
template <TensorLiteral T>
Tensor tensor(std::initializer_list<std::initializer_list<T>> v, std::optional<DType> dtype = std::nullopt);
template <TensorLiteral T>
Tensor tensor(std::initializer_list<std::initializer_list<std::initializer_list<T>>> v,
              std::optional<DType> dtype = std::nullopt);
/// A 0-d tensor.
Tensor scalar(Scalar v, DType dtype = DType::float32);

}  // namespace kiln
