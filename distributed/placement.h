// kiln: how one mesh axis places a tensor: Replicated, Sharded(axis) or
// Partial(op), as MAX's max.experimental.sharding and PyTorch's DTensor.
#pragma once
#include <cstdint>
#include <string>

namespace kiln::distributed {

/// The reduction of a Partial placement and of all_reduce / reduce_scatter.
/// On bool data, sum and max are logical or, min is logical and. Integer sums
/// wrap (two's complement, as numpy); max/min of floats propagate NaN.
enum class ReduceOp : uint8_t { sum, max, min };
/// "sum", "max" or "min".
const char* name(ReduceOp op);

/// One mesh axis's placement of a tensor:
/// - Replicated: every device along the axis holds the whole (local) tensor;
/// - Sharded(axis): the tensor axis `axis` is split across the devices along
///   the mesh axis, by numpy's array_split rule (see device_mapping.h); a
///   negative axis counts from the end of the tensor's rank;
/// - Partial(op): every device holds a partial value, the tensor is the
///   reduction `op` of them (the result of a row-parallel matmul).
struct Placement {
  enum class Kind : uint8_t { replicated, sharded, partial };
  Kind kind = Kind::replicated;
  int64_t axis = 0;              ///< the tensor axis (Sharded only)
  ReduceOp op = ReduceOp::sum;   ///< the reduction (Partial only)

  bool is_replicated() const { return kind == Kind::replicated; }
  bool is_sharded() const { return kind == Kind::sharded; }
  bool is_partial() const { return kind == Kind::partial; }
  /// "Replicated", "Sharded(1)", "Partial(sum)".
  std::string str() const;
  friend bool operator==(const Placement& a, const Placement& b) {
    if (a.kind != b.kind) return false;
    if (a.kind == Kind::sharded) return a.axis == b.axis;
    if (a.kind == Kind::partial) return a.op == b.op;
    return true;
  }
};

inline Placement Replicated() { return {Placement::Kind::replicated, 0, ReduceOp::sum}; }
inline Placement Sharded(int64_t tensor_axis) { return {Placement::Kind::sharded, tensor_axis, ReduceOp::sum}; }
inline Placement Partial(ReduceOp op = ReduceOp::sum) { return {Placement::Kind::partial, 0, op}; }

}  // namespace kiln::distributed
