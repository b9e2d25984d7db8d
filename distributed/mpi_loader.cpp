// mpi::world() in libkiln: the MPI communicator lives in a plugin,
// libkiln_mpi.so (distributed/mpi/), loaded on first use. libkiln itself
// links no MPI, so a program that never runs under mpiexec loads neither
// MPICH nor its transports (UCX installs signal handlers at load time).
#include <dlfcn.h>

#include <mutex>
#include <string>

#include "mpi.h"

namespace kiln::distributed::mpi {

bool is_built() {
#if KILN_HAVE_MPI
  return true;
#else
  return false;
#endif
}

std::shared_ptr<Communicator> world() {
  if (!is_built())
    throw NotBuiltError(
        "distributed::mpi::world: this kiln was built without MPI (configure with -DKILN_WITH_MPI=ON; Debian: "
        "apt-get install libmpich-dev mpich)");
  static std::mutex mu;
  static std::shared_ptr<Communicator> w;
  std::lock_guard<std::mutex> lk(mu);
  if (w) return w;
  // The plugin sits next to libkiln (build tree and install prefix alike).
  std::string dir;
  Dl_info info{};
  if (dladdr(reinterpret_cast<void*>(&is_built), &info) && info.dli_fname) {
    dir = info.dli_fname;
    const auto slash = dir.rfind('/');
    dir = slash == std::string::npos ? "" : dir.substr(0, slash + 1);
  }
  void* h = dlopen((dir + "libkiln_mpi.so").c_str(), RTLD_NOW | RTLD_GLOBAL);
  if (!h) h = dlopen("libkiln_mpi.so", RTLD_NOW | RTLD_GLOBAL);
  if (!h)
    throw NotBuiltError(std::string("distributed::mpi::world: cannot load the MPI plugin libkiln_mpi.so (looked in '") +
                        dir + "' and the library path): " + dlerror());
  using Entry = void (*)(std::shared_ptr<Communicator>*);
  auto entry = reinterpret_cast<Entry>(dlsym(h, "kiln_mpi_world"));
  if (!entry) throw NotBuiltError("distributed::mpi::world: libkiln_mpi.so has no kiln_mpi_world entry point");
  entry(&w);  // throws CollectiveError when MPI_Init fails
  return w;
}

}  // namespace kiln::distributed::mpi
