// The MPI stub of a build without MPI (KILN_WITH_MPI=OFF).
#include "../mpi.h"

namespace kiln::distributed::mpi {

bool is_built() { return false; }

std::shared_ptr<Communicator> world() {
  throw NotBuiltError(
      "distributed::mpi::world: this kiln was built without MPI (configure with -DKILN_WITH_MPI=ON; Debian: "
      "apt-get install libmpich-dev mpich)");
}

}  // namespace kiln::distributed::mpi
