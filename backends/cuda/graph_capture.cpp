// CUDA Graph capture of kiln's stream: see graph_capture.h.
#include "graph_capture.h"

#include <cuda_runtime.h>

#include "../../tensor/error.h"
#include "caching_allocator.h"
#include "runtime.h"

namespace kiln::cuda {

RecordedGraph::RecordedGraph(int dev, void* graph, void* exec, uint64_t hold)
    : dev_(dev), graph_(graph), exec_(exec), hold_(hold) {}

RecordedGraph::~RecordedGraph() {
  cudaSetDevice(dev_);
  if (exec_) cudaGraphExecDestroy(static_cast<cudaGraphExec_t>(exec_));
  if (graph_) cudaGraphDestroy(static_cast<cudaGraph_t>(graph_));
  // Blocks go back as freed on kiln's stream: stream order keeps a replay
  // still in flight ahead of their next user.
  device_allocator(dev_).release_hold(hold_, stream(dev_));
}

void RecordedGraph::launch() const {
  use_device(dev_);
  check(cudaGraphLaunch(static_cast<cudaGraphExec_t>(exec_), stream(dev_)), dev_, "cudaGraphLaunch");
}

size_t RecordedGraph::num_nodes() const {
  size_t n = 0;
  cudaGraphGetNodes(static_cast<cudaGraph_t>(graph_), nullptr, &n);
  return n;
}

std::shared_ptr<RecordedGraph> record_graph(int dev, const std::function<void()>& body) {
  use_device(dev);
  cudaStream_t st = stream(dev);
  check(cudaStreamSynchronize(st), dev, "cudaStreamSynchronize (before capture)");
  CachingAllocator& alloc = device_allocator(dev);
  const uint64_t hold = alloc.begin_hold();
  auto drop = [&] {
    alloc.end_hold(hold);
    alloc.release_hold(hold, st);
  };
  cudaError_t e = cudaStreamBeginCapture(st, cudaStreamCaptureModeRelaxed);
  if (e != cudaSuccess) {
    drop();
    check(e, dev, "cudaStreamBeginCapture");
  }
  try {
    body();
  } catch (...) {
    cudaGraph_t g = nullptr;
    cudaStreamEndCapture(st, &g);
    cudaGetLastError();
    if (g) cudaGraphDestroy(g);
    drop();
    throw;
  }
  cudaGraph_t g = nullptr;
  e = cudaStreamEndCapture(st, &g);
  alloc.end_hold(hold);
  if (e != cudaSuccess) {
    if (g) cudaGraphDestroy(g);
    alloc.release_hold(hold, st);
    check(e, dev, "cudaStreamEndCapture (a step made a call that cannot be captured in a CUDA Graph)");
  }
  cudaGraphExec_t exec = nullptr;
  e = cudaGraphInstantiate(&exec, g, 0);
  if (e != cudaSuccess) {
    cudaGraphDestroy(g);
    alloc.release_hold(hold, st);
    check(e, dev, "cudaGraphInstantiate");
  }
  return std::make_shared<RecordedGraph>(dev, g, exec, hold);
}

}  // namespace kiln::cuda
