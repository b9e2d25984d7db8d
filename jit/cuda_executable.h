// kiln (internal): a compiled plan for a CUDA device. Built at compile time
// from the optimised flat graph: the same fusion grouping as the CPU plan
// (plan_fusion with cuda_fusion_rules), lowered by lower_cuda, every
// generated kernel compiled by NVRTC into one module (a cubin for the
// device's architecture, sm_90 when there is no device) through the
// in-process and disk caches. Building needs no GPU; running does.
#pragma once
#include <memory>
#include <vector>

#include "../backends/cuda/nvrtc_compiler.h"
#include "cuda_lowering.h"
#include "inference_session.h"

namespace kiln::codegen {

/// The CUDA device a graph's inputs and weights name, or -1 when they are on
/// the CPU (or there are none). Throws DeviceError when they mix devices.
int cuda_device_of(const Graph& g);

/// A plan's compiled module as a MEF file stores it (section CUBN, jit/mef.h):
/// the image and what it was compiled under, for a reader to adopt instead
/// of running NVRTC.
struct StoredModule {
  std::string feature_key;  ///< cuda::module_feature_key(arch, strict) of the writer
  uint64_t source_hash = 0; ///< module_source_hash of the plan's module source
  std::string image_arch;   ///< "sm_90", or "compute_XY" for PTX
  bool is_cubin = true;
  std::vector<char> image;
  std::vector<cuda::KernelResources> kernels;
};

/// FNV-1a of a module's source text (StoredModule::source_hash).
uint64_t module_source_hash(const std::string& source);

class CudaExecutable {
 public:
  /// Plans and compiles `g` (flat, optimised, inputs on cuda:`device`).
  /// opt.dump prints the plan and the generated CUDA source; opt.strict
  /// compiles with -fmad=false. With `stored` (a MEF's CUBN section) whose
  /// feature key is this process's cuda::module_feature_key for the device
  /// and whose source hash is the plan's, its image is adopted and NVRTC
  /// does not run; otherwise (another architecture, NVRTC, kernel templates
  /// or options; another source) the module is compiled as usual and
  /// stored_note() says why. Throws NotBuiltError without the CUDA build,
  /// ValueError if NVRTC rejects the generated source (a kiln bug: the
  /// message carries NVRTC's log).
  CudaExecutable(std::shared_ptr<const Graph> g, const KernelOptions& opt, int device,
                 const StoredModule* stored = nullptr);

  const Graph& graph() const { return *graph_; }
  const FusionPlan& fusion() const { return fusion_; }
  const CudaPlan& plan() const { return plan_; }
  /// The compiled module (null when the plan generated no kernel).
  const std::shared_ptr<const cuda::CompiledModule>& module() const { return module_; }
  int device() const { return plan_.device; }
  /// Why a StoredModule given to the constructor was not adopted ("" when it
  /// was, or none was given).
  const std::string& stored_note() const { return stored_note_; }
  /// The module as a MEF stores it (empty image when there is no module).
  StoredModule stored_module() const;

  /// The graph's constants on the device, in node order (what run uploads
  /// on each call when not given them).
  std::vector<Tensor> upload_constants() const;

  /// Runs the plan on the device: inputs (graph input order) and weights
  /// (weight slot order) on cuda:device(); returns the graph outputs there.
  /// Throws DeviceError when the device is absent (no GPU, no driver) or a
  /// launch fails.
  /// `constants` (from upload_constants; may be null) are used instead of
  /// uploading the constants: a run inside a CUDA Graph capture makes no
  /// host-to-device copy.
  std::vector<Tensor> run(const std::vector<Tensor>& inputs, const std::vector<Tensor>& weights,
                          const std::vector<Tensor>* constants = nullptr) const;

 private:
  std::shared_ptr<const Graph> graph_;
  FusionPlan fusion_;
  CudaPlan plan_;
  std::shared_ptr<const cuda::CompiledModule> module_;
  std::string stored_note_;
};

}  // namespace kiln::codegen
