// kiln benchmarks: thread control shared by kiln and its peers.
#pragma once

namespace kb {
/// Sets the threads kiln, OpenMP, OpenBLAS and Eigen use.
void set_threads(int n);
/// Sets LibTorch's intra-op threads (no-op when LibTorch is absent).
void set_torch_threads(int n);
}  // namespace kb
