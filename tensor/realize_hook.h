// kiln (internal): how a realized-on-demand tensor asks its context to run.
#pragma once
#include <span>

#include "op_table.h"

namespace kiln {
class Tensor;
class RealizationContext;
namespace detail {
/// Realizes an unrealized tensor through its RealizationState's context.
/// Throws RealizationError when that is not possible.
void realize_tensor(const Tensor& t);
/// The context ops must go through on this thread, or null when that is the
/// built-in eager context (the fast path).
RealizationContext* active_context();
/// ctx->apply_op(op, in, attrs) (defined in trace/, declared here so tensor/
/// does not include trace/ headers).
Tensor context_apply(RealizationContext* ctx, OpId op, std::span<const Tensor> in, const Attrs& attrs);
}  // namespace detail
}  // namespace kiln
