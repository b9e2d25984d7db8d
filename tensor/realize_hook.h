// kiln (internal): how a realized-on-demand tensor asks its context to run.
#pragma once
#include <cstdint>
#include <optional>
#include <span>
#include <string>

#include "op_table.h"

namespace kiln {
class Tensor;
class RealizationContext;
namespace detail {
/// Realizes an unrealized tensor through its RealizationState's context.
/// Throws RealizationError when that is not possible.
void realize_tensor(const Tensor& t);
/// As realize_tensor for an op `who` that reads values on the host (item,
/// to_vector, print): a traced tensor (jit/compile/stage) is a
/// RealizationError naming `who` and saying that values exist only when the
/// compiled function runs. Does nothing for a realized tensor.
void realize_for(const Tensor& t, const char* who);
/// The context ops must go through on this thread, or null when that is the
/// built-in eager context (the fast path).
RealizationContext* active_context();
/// ctx->apply_op(op, in, attrs) (defined in trace/, declared here so tensor/
/// does not include trace/ headers).
Tensor context_apply(RealizationContext* ctx, OpId op, std::span<const Tensor> in, const Attrs& attrs);
/// True while the innermost context on this thread records into a graph
/// (stage, jit, compile): a value computed now on the host would be baked
/// into that graph as a constant. False for the eager and lazy contexts.
bool recording_graph();

// In-place writes (tensor/mutation.cpp) ask the contexts (trace/) how to proceed.
/// How a write into a tensor is carried out in the current context.
enum class WriteMode : uint8_t {
  eager,       ///< into the destination's memory, now
  functional,  ///< recorded: the destination's handle is rebound to the new graph value
};
/// Decides the mode of a write into `dst` by `who`: functional for an
/// unrealized tensor of the current context, or for a realized one while a
/// graph context records (it becomes a mutable source); eager otherwise (an
/// unrealized tensor of another context is realized first). A write
/// through a view of a traced tensor is functional too (recorded as a
/// scatter into its base); it throws RealizationError when the base is a
/// constant of the trace and ValueError for a broadcast view.
WriteMode begin_write(const Tensor& dst, const char* who);
/// Rebinds `dst` (functional mode) to `value`, an unrealized tensor of the
/// current context with dst's dtype and shape.
void functional_write(const Tensor& dst, const Tensor& value);
/// clone()/contiguous() of `t` while a context records: for an unrealized
/// tensor of the current context, a same-dtype Cast (a copy, a value of its
/// own) when `always` (clone) or when t's layout (as eagerly: replayed from
/// its root's known strides) is not contiguous (contiguous), else t itself;
/// an undefined Tensor for anything else (the caller realizes t and copies
/// eagerly). When the layout is not known (a view of an argument traced for
/// a non-contiguous stride class), contiguous() records a copy marked
/// ambiguous: an in-place write into it, or into a view of it, throws
/// RealizationError (eagerly it would be the view or a copy depending on the
/// argument's runtime strides). Reshape is treated alike by the contexts.
Tensor recorded_copy(const Tensor& t, bool always);
/// The layout eager code would see for an unrealized tensor of a graph
/// context (stage, compile, jit), as far as the trace knows it: a view's
/// strides are replayed from its base's, an op or subgraph-call result is
/// contiguous, a captured tensor has its own strides, an argument those of
/// its stride class (known only for a contiguous one). `strides` is empty
/// when not known, and `why` then says why; `cls` is the class known
/// (StrideClass::general when nothing is known).
struct TracedLayout {
  StrideClass cls = StrideClass::contiguous;
  std::optional<Strides> strides;
  std::string why;
  /// False when not even the class is known (a view of an argument whose
  /// strides are not known: eagerly its class depends on them); `cls` is
  /// then StrideClass::general, the class that covers every layout.
  bool cls_known = true;
};
/// The strides every tensor of `shape` in stride class `cls` has, when the
/// class determines them: a contiguous one's, and a transposed 2-d one's
/// with both extents > 1 ({1, shape[0]}); nullopt otherwise.
std::optional<Strides> class_strides(const Shape& shape, StrideClass cls);
/// The TracedLayout of `t`; nullopt when `t` is realized or not a value of a
/// graph context (a lazy tensor).
std::optional<TracedLayout> traced_layout(const Tensor& t);
/// Records the layout of value `value` of the current graph context (its
/// arguments: from their stride class). No-op outside a graph context.
void set_traced_value_layout(int32_t value, const TracedLayout& l);
/// The stride class of a tensor of `shape` with element strides `strides`
/// (what Tensor::stride_class reports for a realized one).
StrideClass stride_class_of(const Shape& shape, const Strides& strides);
/// Tensor::stride_class for internal callers (cache keys, specs): the same
/// class, except that a traced tensor whose class is not known while
/// tracing (TracedLayout::cls_known false) gives StrideClass::general, the
/// class whose traced code covers every layout, instead of throwing.
StrideClass covering_stride_class(const Tensor& t);
/// A view op's result shape and strides from its input's (the eager rule);
/// false (and contiguous strides) when a reshape cannot be a view (a copy).
bool view_strides(OpId op, const Shape& shape, const Strides& strides, const Attrs& attrs, Shape& out_shape,
                  Strides& out_strides);
/// Called before an eager write into `b`: lazy scopes that recorded a source
/// in `b` keep a copy of its old contents.
void before_memory_write(const Buffer& b);
/// Makes the built-in eager context current for the guard's lifetime (an
/// eager write computes its value eagerly also inside a lazy scope).
class EagerGuard {
 public:
  EagerGuard();
  ~EagerGuard();
  EagerGuard(const EagerGuard&) = delete;
  EagerGuard& operator=(const EagerGuard&) = delete;
};
}  // namespace detail
}  // namespace kiln
