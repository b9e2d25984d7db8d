// kiln: process-wide runtime settings (threads of OpenMP and the BLAS).
#include "runtime.h"

#include <omp.h>

#include <string>

#include "error.h"
#include "kernel_registry.h"

#ifdef KILN_HAVE_OPENBLAS
#include <cblas.h>
#endif

namespace kiln {

namespace {
constexpr int kMaxThreads = 1024;
}

void set_num_threads(int n) {
  if (n < 1) throw ValueError("set_num_threads: expected n >= 1, got " + std::to_string(n));
  // OpenMP and OpenBLAS create a thread per slot: an absurd count exhausts
  // the process's stacks instead of failing cleanly.
  if (n > kMaxThreads)
    throw ValueError("set_num_threads: expected n <= " + std::to_string(kMaxThreads) + ", got " + std::to_string(n));
  omp_set_num_threads(n);
#ifdef KILN_HAVE_OPENBLAS
  openblas_set_num_threads(n);
#endif
}

int get_num_threads() { return omp_get_max_threads(); }

const char* blas_backend() { return detail::device_utilities(Device::cpu(), "blas_backend").blas_name(); }

}  // namespace kiln
