// kiln: start-up of distributed programs. The same program runs alone, with
// several CPU devices of one process (single controller), or as N processes
// under `mpiexec -n N` (multi-controller): init() reads the launcher's
// environment and picks the world communicator.
#pragma once
#include <memory>

#include "communicator.h"

namespace kiln::distributed {

/// Initialises the process's world communicator once and returns it: MPI's
/// (rank = the process's rank under mpiexec) when the environment names an
/// MPI launcher (mpi::launched()), else a group of one rank (this process
/// alone). Idempotent. Throws NotBuiltError when launched under MPI but MPI
/// is not built, rather than running N copies that each think they are alone.
std::shared_ptr<Communicator> init();
/// init()'s communicator (calls init() when needed).
std::shared_ptr<Communicator> world();
/// world()->size() > 1: this process is one of several.
bool is_multi_process();

}  // namespace kiln::distributed
