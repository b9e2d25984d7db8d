// kiln benchmarks: thread control shared by kiln and its peers (bench_peers.h).
#include "bench_peers.h"

#include <omp.h>

#include <Eigen/Core>
#include <kiln/kiln.h>

namespace kb {
// Replaced by bench_*_torch.cpp when LibTorch is built in.
__attribute__((weak)) void set_torch_threads(int) {}

void set_threads(int n) {
  kiln::set_num_threads(n);  // also OpenBLAS's pool
  omp_set_num_threads(n);
  Eigen::setNbThreads(n);
  set_torch_threads(n);
}
}  // namespace kb
