// Built when the CUDA backend is off: the CUDA entry points throw NotBuiltError.
#include "cuda_backend.h"
#include "graph_capture.h"
#include "nvrtc_compiler.h"

#include "../../tensor/error.h"
#include "../../tensor/tensor.h"

namespace kiln::cuda {
namespace {
[[noreturn]] void not_built(const char* what) {
  throw NotBuiltError(std::string("cuda: ") + what +
                      ": kiln was built without the CUDA backend (configure with -DKILN_WITH_CUDA=ON on a "
                      "machine with the CUDA toolkit)");
}
}  // namespace
bool is_built() { return false; }
int device_count() { return 0; }
std::string device_name(int) { not_built("device_name"); }
DeviceMemoryStats memory_stats(int) { not_built("memory_stats"); }
void reset_peak_memory(int) { not_built("reset_peak_memory"); }
void empty_cache(int) { not_built("empty_cache"); }
void set_memory_limit(int, size_t) { not_built("set_memory_limit"); }
void synchronize(int) { not_built("synchronize"); }
void set_allow_tf32(bool) { not_built("set_allow_tf32"); }
bool allow_tf32() { not_built("allow_tf32"); }
Tensor matmul_epilogue(const Tensor&, const Tensor&, const Tensor&, Epilogue) { not_built("matmul_epilogue"); }
const KernelResources* CompiledModule::resources(const std::string&) const { return nullptr; }
std::string default_arch(int) { return "sm_90"; }
std::string kernel_cache_dir() { not_built("kernel_cache_dir"); }
std::vector<std::string> module_options(const std::string&, bool) { not_built("module_options (NVRTC)"); }
std::string module_feature_key(const std::string&, bool) { return {}; }
std::shared_ptr<const CompiledModule> compile_module(const std::string&, const std::string&, bool, bool) {
  not_built("compile_module (NVRTC)");
}
std::shared_ptr<const CompiledModule> adopt_module(const std::string&, const std::string&, bool, const std::string&,
                                                   bool, std::vector<char>, std::vector<KernelResources>) {
  not_built("adopt_module");
}
int64_t nvrtc_compilations() { return 0; }
std::string compile_ptx(const std::string&, const std::string&, bool) { not_built("compile_ptx (NVRTC)"); }
RecordedGraph::RecordedGraph(int dev, void*, void*, uint64_t) : dev_(dev), graph_(nullptr), exec_(nullptr), hold_(0) {}
RecordedGraph::~RecordedGraph() = default;
void RecordedGraph::launch() const { not_built("RecordedGraph::launch"); }
size_t RecordedGraph::num_nodes() const { return 0; }
std::shared_ptr<RecordedGraph> record_graph(int, const std::function<void()>&) { not_built("record_graph (CUDA Graphs)"); }
void clear_module_memory_cache() {}
void launch_kernel(const std::shared_ptr<const CompiledModule>&, const std::string&, int, uint32_t, uint32_t, uint32_t,
                   void**) {
  not_built("launch_kernel");
}
}  // namespace kiln::cuda
