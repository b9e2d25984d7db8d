// kiln (internal): CUDA Graphs recorded from kiln's stream, for
// engine::Model::capture/replay of compiled CUDA callables. Host C++
// without CUDA headers; without the CUDA build record_graph throws
// NotBuiltError.
#pragma once
#include <cstddef>
#include <cstdint>
#include <functional>
#include <memory>

namespace kiln::cuda {

/// One instantiated CUDA Graph on one device, with the device memory it
/// recorded held by the caching allocator until it is destroyed.
class RecordedGraph {
 public:
  RecordedGraph(int dev, void* graph, void* exec, uint64_t hold);
  ~RecordedGraph();
  RecordedGraph(const RecordedGraph&) = delete;
  RecordedGraph& operator=(const RecordedGraph&) = delete;
  /// Launches the graph on the device's kiln stream (cudaGraphLaunch);
  /// returns without waiting. Throws DeviceError when the launch fails.
  void launch() const;
  int device() const { return dev_; }
  /// Nodes of the recorded graph (kernels, copies, memsets).
  size_t num_nodes() const;

 private:
  int dev_;
  void* graph_;  // cudaGraph_t
  void* exec_;   // cudaGraphExec_t
  uint64_t hold_;
};

/// Records what `body` enqueues on device `dev`'s kiln stream into one
/// CUDA Graph (cudaStreamBeginCapture in relaxed mode, so the allocator may
/// still take driver memory), instantiates it, and returns it without
/// running it. The stream is synchronised first. While `body` runs, the
/// caching allocator holds every block allocated (CachingAllocator::
/// begin_hold) so no later allocation can take memory the graph writes;
/// the hold ends when the RecordedGraph is destroyed. `body` must make no
/// call that cannot be captured (a synchronisation, a host copy): CUDA then
/// invalidates the capture and record_graph throws DeviceError naming
/// cudaStreamEndCapture. If `body` throws, the capture is ended and dropped
/// and the exception propagates.
std::shared_ptr<RecordedGraph> record_graph(int dev, const std::function<void()>& body);

}  // namespace kiln::cuda
