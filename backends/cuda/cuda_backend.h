// kiln: the CUDA backend's entry points (a stub throws NotBuiltError when
// kiln is built without CUDA).
#pragma once
#include <string>

namespace kiln::cuda {
/// True when this build of kiln includes the CUDA backend.
bool is_built();
/// Number of CUDA devices visible (0 when none or not built; never throws).
int device_count();
/// The device's name; throws DeviceError for a bad index, NotBuiltError when not built.
std::string device_name(int index);
}  // namespace kiln::cuda
