#include "init.h"

#include <cstdlib>
#include <mutex>

#include "../tensor/cpu_devices.h"
#include "in_process.h"
#include "mpi.h"

namespace kiln::distributed {

namespace mpi {
bool launched() {
  return std::getenv("PMI_RANK") || std::getenv("PMI_SIZE") || std::getenv("OMPI_COMM_WORLD_SIZE") ||
         std::getenv("PMIX_RANK");
}
}  // namespace mpi

std::shared_ptr<Communicator> init() {
  static std::once_flag once;
  static std::shared_ptr<Communicator> w;
  std::call_once(once, [] {
    if (mpi::launched()) {
      if (!mpi::is_built())
        throw NotBuiltError(
            "distributed::init: this process was started by an MPI launcher (PMI_RANK/PMI_SIZE are set) but kiln "
            "was built without MPI (configure with -DKILN_WITH_MPI=ON)");
      w = mpi::world();
      kiln::detail::ensure_cpu_devices(w->size());  // mesh device k (Device::cpu(k)) is process k's
    } else {
      w = make_in_process_group(1)[0];
    }
  });
  return w;
}

std::shared_ptr<Communicator> world() { return init(); }

bool is_multi_process() { return world()->size() > 1; }

}  // namespace kiln::distributed
