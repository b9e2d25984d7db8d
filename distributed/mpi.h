// kiln: the MPI Communicator (processes started by `mpiexec -n N`, on one
// host or many; built with Debian's MPICH when KILN_WITH_MPI is ON). No MPI
// header is included here.
#pragma once
#include <memory>

#include "communicator.h"

namespace kiln::distributed::mpi {

/// True when this kiln was built with MPI.
bool is_built();
/// True when the environment says a launcher started this process under
/// MPI (PMI_RANK/PMI_SIZE from MPICH's hydra, OMPI_COMM_WORLD_SIZE,
/// PMIX_RANK), whether or not MPI is built.
bool launched();
/// A communicator over MPI_COMM_WORLD, initialising MPI on first use (MPI is
/// finalised at exit). The implementation is the plugin libkiln_mpi.so next
/// to libkiln, loaded here, so libkiln links no MPI. Throws NotBuiltError
/// when MPI is not built or the plugin cannot be loaded.
///
/// Every collective is non-blocking MPI (MPI_Iallreduce, ...) polled until
/// it completes or collective_timeout() passes; then CollectiveError, and
/// the process calls MPI_Abort at exit instead of MPI_Finalize (a peer may
/// never join, and finalising would wait for it).
std::shared_ptr<Communicator> world();

}  // namespace kiln::distributed::mpi
