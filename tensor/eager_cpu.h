// kiln (internal): checks shared by the eager front ends of the CPU kernels.
#pragma once
#include <span>
#include <string>

#include "op_table.h"

namespace kiln::detail {

/// Throws DeviceError naming `op` unless every input lives on the CPU (the
/// only device these eager kernels run on).
inline void require_cpu(OpId op, std::span<const Tensor> in) {
  for (size_t i = 0; i < in.size(); ++i)
    if (!in[i].device().is_cpu())
      throw DeviceError(op_prefix(op) + "input " + std::to_string(i) + " is on " + in[i].device().str() +
                        "; the eager kernels run on cpu");
}

}  // namespace kiln::detail
