// kiln: the NCCL Communicator (GPUs). Built when CMake finds libnccl with
// the CUDA backend (KILN_HAVE_NCCL); otherwise every function here throws
// NotBuiltError (is_built() says which).
//
// Differences from communicator.h's host-memory contract: every buffer is
// device memory of the communicator's GPU (cuda::device_of()), counts as
// there; a call enqueues the NCCL operation on the communicator's own
// stream and returns when it has finished, or throws CollectiveError
// (after aborting the communicator) when it has not within
// collective_timeout(). NCCL's float sums follow NCCL's ring/tree order,
// not rank order: bitwise equality across ranks holds, equality with the
// in-process order does not. Supported dtypes: bool (sum and max are
// logical or, min logical and, as uint8 max/min), int8, uint8, int32,
// uint32, int64, uint64, float16, bfloat16, float32, float64; int16 and
// uint16 throw DTypeError. send/recv ignore `tag` (NCCL keeps the order of
// messages between a pair).
#pragma once
#include <memory>
#include <vector>

#include "communicator.h"

namespace kiln::distributed::nccl {

/// True when kiln was built with NCCL.
bool is_built();
/// Single controller: one communicator per GPU in `cuda_devices` (rank i on
/// cuda_devices[i]), made by ncclCommInitAll. Each must be used by its own
/// thread (for_each_local). ValueError for an empty or repeated list;
/// DeviceError when a device is absent; NotBuiltError without NCCL.
std::vector<std::shared_ptr<Communicator>> make_group(const std::vector<int>& cuda_devices);
/// Multi-controller: this process's rank of an NCCL group over the ranks of
/// `bootstrap` (e.g. the MPI world), on GPU `cuda_device`; the NCCL unique
/// id travels by bootstrap.broadcast. Collective over bootstrap.
std::shared_ptr<Communicator> make_from(Communicator& bootstrap, int cuda_device);

}  // namespace kiln::distributed::nccl
