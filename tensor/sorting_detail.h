// kiln (internal): nonzero as the bool-mask index uses it (tensor/indexing.cpp).
#pragma once
#include <vector>

namespace kiln {
class Tensor;
namespace detail {
/// nonzero(mask) for x[mask]: the same coordinates, with the errors of a
/// traced or lazy mask naming "index (a bool mask)" rather than nonzero.
std::vector<Tensor> bool_index_positions(const Tensor& mask);
}  // namespace detail
}  // namespace kiln
