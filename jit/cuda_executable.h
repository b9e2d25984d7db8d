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

class CudaExecutable {
 public:
  /// Plans and compiles `g` (flat, optimised, inputs on cuda:`device`).
  /// opt.dump prints the plan and the generated CUDA source. Throws
  /// NotBuiltError without the CUDA build, ValueError if NVRTC rejects the
  /// generated source (a kiln bug: the message carries NVRTC's log).
  CudaExecutable(std::shared_ptr<const Graph> g, const KernelOptions& opt, int device);

  const Graph& graph() const { return *graph_; }
  const FusionPlan& fusion() const { return fusion_; }
  const CudaPlan& plan() const { return plan_; }
  /// The compiled module (null when the plan generated no kernel).
  const std::shared_ptr<const cuda::CompiledModule>& module() const { return module_; }
  int device() const { return plan_.device; }

  /// Runs the plan on the device: inputs (graph input order) and weights
  /// (weight slot order) on cuda:device(); returns the graph outputs there.
  /// Throws DeviceError when the device is absent (no GPU, no driver) or a
  /// launch fails.
  std::vector<Tensor> run(const std::vector<Tensor>& inputs, const std::vector<Tensor>& weights) const;

 private:
  std::shared_ptr<const Graph> graph_;
  FusionPlan fusion_;
  CudaPlan plan_;
  std::shared_ptr<const cuda::CompiledModule> module_;
};

}  // namespace kiln::codegen
