// kiln: the bodies of Tensor's method forms of the op table's rows (declared
// from tensor/ops.def in tensor/tensor.h; families in tensor/method_rows.h).
// Each calls the free function (or, for the unary and binary rows, runs the
// row exactly as the free function does), so defaults, results and errors
// are the free function's.
#include "op_table.h"
#include "ops.h"
#include "sorting.h"

namespace kiln {

#define KILN_M_UNARY(id, name) \
  Tensor Tensor::name() const { return apply(OpId::id, *this); }
#define KILN_M_BINARY(id, name)                                                               \
  Tensor Tensor::name(const Tensor& other) const { return apply(OpId::id, *this, other); } \
  Tensor Tensor::name(Scalar other) const { return kiln::name(*this, other); }
#define KILN_M_TENSOR(id, name) \
  Tensor Tensor::name(const Tensor& other) const { return kiln::name(*this, other); }
#define KILN_M_CAST(id, name) \
  Tensor Tensor::name(DType dtype) const { return kiln::name(*this, dtype); }
#define KILN_M_REDUCE(id, name) \
  Tensor Tensor::name(const std::vector<int64_t>& axes, bool keepdim) const { return kiln::name(*this, axes, keepdim); }
#define KILN_M_ARGREDUCE(id, name)                                         \
  Tensor Tensor::name(std::optional<int64_t> axis, bool keepdim) const { \
    return kiln::name(*this, axis, keepdim);                               \
  }
#define KILN_M_MOMENT(id, name)                                                                   \
  Tensor Tensor::name(const std::vector<int64_t>& axes, double correction, bool keepdim) const { \
    return kiln::name(*this, axes, correction, keepdim);                                          \
  }
#define KILN_M_SCAN(id, name) \
  Tensor Tensor::name(int64_t axis) const { return kiln::name(*this, axis); }
#define KILN_M_SORT(id, name) \
  Tensor Tensor::name(int64_t axis, bool descending) const { return kiln::name(*this, axis, descending); }
#define KILN_M_SOFTMAX(id, name) \
  Tensor Tensor::name(int64_t axis) const { return kiln::name(*this, axis); }
#define KILN_M_LAYER_NORM(id, name)                                                          \
  Tensor Tensor::name(const Tensor& weight, const Tensor& bias, double eps) const { \
    return kiln::name(*this, weight, bias, eps);                                             \
  }
#define KILN_M_RMS_NORM(id, name) \
  Tensor Tensor::name(const Tensor& weight, double eps) const { return kiln::name(*this, weight, eps); }
#define KILN_M_SHAPE(id, name) \
  Tensor Tensor::name(const Shape& shape) const { return kiln::name(*this, shape); }
#define KILN_M_SLICE(id, name)                                                                                     \
  Tensor Tensor::name(int64_t axis, std::optional<int64_t> start, std::optional<int64_t> stop, int64_t step) const { \
    return kiln::name(*this, axis, start, stop, step);                                                             \
  }
#define KILN_M_SELECT(id, name) \
  Tensor Tensor::name(int64_t axis, int64_t index) const { return kiln::name(*this, axis, index); }
#define KILN_M_AXES(id, name) \
  Tensor Tensor::name(const std::vector<int64_t>& axes) const { return kiln::name(*this, axes); }
#define KILN_M_AXIS(id, name) \
  Tensor Tensor::name(int64_t axis) const { return kiln::name(*this, axis); }
#define KILN_M_REPS(id, name) \
  Tensor Tensor::name(const std::vector<int64_t>& reps) const { return kiln::name(*this, reps); }
#define KILN_M_PAD(id, name)                                                                          \
  Tensor Tensor::name(const std::vector<std::pair<int64_t, int64_t>>& pads, Scalar value) const { \
    return kiln::name(*this, pads, value);                                                            \
  }
#define KILN_M_AXIS_INDEX(id, name) \
  Tensor Tensor::name(int64_t axis, const Tensor& index) const { return kiln::name(*this, axis, index); }
#define KILN_M_ONE_HOT(id, name) \
  Tensor Tensor::name(int64_t num_classes, DType dtype) const { return kiln::name(*this, num_classes, dtype); }
#define KILN_M_SCATTER(id, name)                                                        \
  Tensor Tensor::name(int64_t axis, const Tensor& index, const Tensor& src) const { \
    return kiln::name(*this, axis, index, src);                                         \
  }
#define KILN_M_INDEX_ADD(id, name)                                                                    \
  Tensor Tensor::name(int64_t axis, const Tensor& index, const Tensor& src, Scalar alpha) const { \
    return kiln::name(*this, axis, index, src, alpha);                                                \
  }
#define KILN_OP(id, name, arity, cat, rule) KILN_FOR_METHOD_ROW(id, name, cat, rule)
#include "ops.def"
#undef KILN_OP
#include "method_rows_undef.h"

}  // namespace kiln
