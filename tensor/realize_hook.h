// kiln (internal): how a realized-on-demand tensor asks its context to run.
#pragma once

namespace kiln {
class Tensor;
namespace detail {
/// Realizes an unrealized tensor through its RealizationState's context.
/// Throws RealizationError when that is not possible.
void realize_tensor(const Tensor& t);
}  // namespace detail
}  // namespace kiln
