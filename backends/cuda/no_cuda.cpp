// Built when the CUDA backend is off: the CUDA entry points throw NotBuiltError.
#include "cuda_backend.h"

#include "../../tensor/error.h"

namespace kiln::cuda {
bool is_built() { return false; }
int device_count() { return 0; }
std::string device_name(int) {
  throw NotBuiltError("cuda: kiln was built without the CUDA backend (configure with -DKILN_WITH_CUDA=ON on a machine with the CUDA toolkit)");
}
}  // namespace kiln::cuda
