#include "realize_hook.h"

#include "tensor.h"

namespace kiln::detail {

// Replaced by trace/ once realization contexts exist (strong definition).
__attribute__((weak)) void realize_tensor(const Tensor&) {
  throw RealizationError("realize: this tensor is unrealized and no realization context can run it");
}

}  // namespace kiln::detail
