// kiln: Eigen interop (opt-in; pulls in Eigen's headers, so <kiln/kiln.h>
// does not include it). A project that includes it needs Eigen's include
// path too: find_package(Eigen3) and link Eigen3::Eigen next to kiln::kiln.
//
//   Eigen::MatrixXf m = Eigen::MatrixXf::Random(3, 4);
//   kiln::Tensor t = kiln::from_eigen(m);             // a [3, 4] float32 copy
//   auto view = kiln::as_eigen_map<float>(t);         // no copy: writes go to t
#pragma once
#include <Eigen/Core>
#include <string>
#include <type_traits>

#include "kiln.h"

namespace kiln {

namespace detail {
template <class T>
inline constexpr bool is_eigen_interop_scalar_v =
    std::is_same_v<T, bool> || std::is_same_v<T, uint8_t> || std::is_same_v<T, int8_t> ||
    std::is_same_v<T, int32_t> || std::is_same_v<T, int64_t> || std::is_same_v<T, float> ||
    std::is_same_v<T, double>;
}  // namespace detail

/// A row-major [rows, cols] tensor copied from any Eigen dense expression
/// (matrix, vector, block, product, ...). The dtype follows the scalar type:
/// float -> float32, double -> float64, int32_t -> int32, int64_t -> int64,
/// int8_t/uint8_t/bool likewise. Vectors keep Eigen's 2-d shape ([n, 1] for a
/// column vector, [1, n] for a row vector); reshape for 1-d.
template <class Derived>
Tensor from_eigen(const Eigen::DenseBase<Derived>& m) {
  using T = typename Derived::Scalar;
  static_assert(detail::is_eigen_interop_scalar_v<T>,
                "from_eigen: the Eigen scalar type must be bool, uint8_t, int8_t, int32_t, int64_t, float or double");
  using RowMajor = Eigen::Matrix<T, Eigen::Dynamic, Eigen::Dynamic, Eigen::RowMajor>;
  const int64_t rows = static_cast<int64_t>(m.rows()), cols = static_cast<int64_t>(m.cols());
  Tensor t = Tensor::empty({rows, cols}, dtype_v<T>);
  if (rows * cols > 0) Eigen::Map<RowMajor>(t.data<T>(), m.rows(), m.cols()) = m.derived();
  return t;
}

/// A row-major Eigen::Map over the data of `t`, without copying: a 2-d tensor
/// maps as [rows, cols], a 1-d tensor of n elements as an n x 1 column, a 0-d
/// tensor as 1 x 1. Writes through the map change `t` (and every view that
/// shares its storage). The map does not own the memory: keep a Tensor that
/// shares the storage alive while the map is used.
/// Throws DTypeError when T is not the tensor's element type, and ShapeError
/// when the tensor has more than 2 dimensions or is not contiguous (call
/// contiguous() first).
template <class T>
Eigen::Map<Eigen::Matrix<T, Eigen::Dynamic, Eigen::Dynamic, Eigen::RowMajor>> as_eigen_map(const Tensor& t) {
  static_assert(detail::is_eigen_interop_scalar_v<T>,
                "as_eigen_map: T must be bool, uint8_t, int8_t, int32_t, int64_t, float or double");
  if (t.dtype() != dtype_v<T>)
    throw DTypeError("as_eigen_map: the tensor has dtype " + std::string(name(t.dtype())) +
                     " but the map's scalar type is " + std::string(name(dtype_v<T>)));
  if (t.ndim() > 2)
    throw ShapeError("as_eigen_map: expected a 0-d, 1-d or 2-d tensor, got shape " + shape_str(t.shape()));
  if (!t.is_contiguous())
    throw ShapeError("as_eigen_map: expected a contiguous tensor, got shape " + shape_str(t.shape()) +
                     " with strides " + shape_str(t.strides()) + " (call contiguous() first)");
  const Eigen::Index rows = t.ndim() >= 1 ? static_cast<Eigen::Index>(t.shape()[0]) : 1;
  const Eigen::Index cols = t.ndim() == 2 ? static_cast<Eigen::Index>(t.shape()[1]) : 1;
  return Eigen::Map<Eigen::Matrix<T, Eigen::Dynamic, Eigen::Dynamic, Eigen::RowMajor>>(t.data<T>(), rows, cols);
}

}  // namespace kiln
