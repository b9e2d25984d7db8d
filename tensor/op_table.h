// kiln: the op table (rows in ops.def) as data: ids, names, arity, category,
// dtype rule, attributes, and the one entry point every op goes through.
#pragma once
#include <cstdint>
#include <span>
#include <string_view>
#include <vector>

#include "tensor.h"

namespace kiln {

enum class OpId : uint16_t {
#define KILN_OP(id, name, arity, cat, rule) id,
#include "ops.def"
#undef KILN_OP
};
inline constexpr int kNumOps = 0
#define KILN_OP(id, name, arity, cat, rule) +1
#include "ops.def"
#undef KILN_OP
    ;

enum class OpCategory : uint8_t { Unary, Binary, Ternary, Reduce, Scan, RowNorm, Matmul, View, Data, Linalg };
enum class DTypeRule : uint8_t { Same, Float, ToBool, Promote, TrueDiv, Compare, Attr, Index, Keep, Accum };

/// One row of the op table.
struct OpInfo {
  OpId id;
  std::string_view name;
  int arity;  ///< number of tensor inputs, -1 = variadic
  OpCategory category;
  DTypeRule dtype_rule;
};

const OpInfo& op_info(OpId op);
inline std::string_view op_name(OpId op) { return op_info(op).name; }
/// Looks an op up by its table name; throws ValueError for an unknown name.
OpId op_from_name(std::string_view name);

/// An op's non-tensor arguments. Which fields an op reads is documented on
/// its row in ops.def. Plain data, so nodes can be compared and hashed.
struct Attrs {
  std::vector<int64_t> ints;  ///< axes / shape / permutation / slice bounds / pads / reps
  int64_t axis = 0;
  double scalar = 0.0;        ///< eps / correction / fill value
  bool flag = false;          ///< keepdim
  DType dtype = DType::float32;
  friend bool operator==(const Attrs&, const Attrs&) = default;
};

/// Result dtype of `op` for input dtypes `in` (the row's DTypeRule).
/// Throws DTypeError naming the op when an input dtype is not accepted.
DType result_dtype(OpId op, std::span<const DType> in, const Attrs& attrs);

/// Result layout of `op` (dtype and shape; contiguous), checking arity,
/// shapes, axes and attributes. Throws ShapeError/IndexError/DTypeError/
/// ValueError with a message naming the op.
TensorLayout infer_layout(OpId op, std::span<const TensorLayout> in, const Attrs& attrs);

/// Runs `op` through the current realization context (eager by default).
Tensor apply(OpId op, std::span<const Tensor> inputs, const Attrs& attrs = {});
Tensor apply(OpId op, const Tensor& a, const Attrs& attrs = {});
Tensor apply(OpId op, const Tensor& a, const Tensor& b, const Attrs& attrs = {});

namespace detail {
/// Runs `op` on realized CPU tensors now (the eager kernels).
Tensor eager_execute(OpId op, std::span<const Tensor> inputs, const Attrs& attrs);

// Per-category shape rules and eager kernels; each pair lives in one file
// (tensor/ops_<category>.cpp). infer_* may assume arity was checked.
#define KILN_CATEGORY(cat)                                                                \
  TensorLayout infer_##cat(OpId op, std::span<const TensorLayout> in, const Attrs& attrs); \
  Tensor eager_##cat(OpId op, std::span<const Tensor> in, const Attrs& attrs);
KILN_CATEGORY(unary)
KILN_CATEGORY(binary)
KILN_CATEGORY(ternary)
KILN_CATEGORY(reduce)
KILN_CATEGORY(scan)
KILN_CATEGORY(rownorm)
KILN_CATEGORY(matmul)
KILN_CATEGORY(view)
KILN_CATEGORY(data)
KILN_CATEGORY(linalg)
#undef KILN_CATEGORY

/// The result tensor of an eager kernel: each category allocates its result
/// here. A compiled plan that placed the result in its arena (jit/plan.cpp)
/// sets a destination first (ScopedOutput); the first request on this thread
/// whose layout matches takes it, any other allocates. Correctness never
/// depends on the destination being taken: the caller uses the tensor the
/// kernel returns.
Tensor output_tensor(const Shape& shape, DType dtype, Device device = Device::cpu());

/// Sets this thread's destination for the next output_tensor() of a
/// matching layout, for the scope's lifetime (not nestable).
class ScopedOutput {
 public:
  explicit ScopedOutput(const Tensor& dst);
  ~ScopedOutput();
  ScopedOutput(const ScopedOutput&) = delete;
  ScopedOutput& operator=(const ScopedOutput&) = delete;
};

/// "op: " prefix helper for messages.
std::string op_prefix(OpId op);
}  // namespace detail

}  // namespace kiln
