// A compiled plan for a CUDA device: see cuda_executable.h.
#include "cuda_executable.h"

#include <iostream>

#include "../backends/cuda/cuda_backend.h"
#include "../tensor/error.h"
#include "../tensor/op_table.h"
#include "../tensor/ops.h"

namespace kiln::codegen {

int cuda_device_of(const Graph& g) {
  int dev = -1;
  bool cpu = false;
  for (const Node& n : g.nodes()) {
    if (n.kind != NodeKind::input && n.kind != NodeKind::weight) continue;
    const Device d = g.type(n.outputs[0]).device;
    if (d.type == DeviceType::cuda) {
      if (dev >= 0 && dev != d.index)
        throw DeviceError("compile: graph '" + g.name() + "' mixes cuda:" + std::to_string(dev) + " and " + d.str());
      dev = d.index;
    } else {
      cpu = true;
    }
  }
  if (dev >= 0 && cpu)
    throw DeviceError("compile: graph '" + g.name() + "' mixes cpu and cuda:" + std::to_string(dev) + " inputs");
  return dev;
}

uint64_t module_source_hash(const std::string& source) {
  uint64_t h = 1469598103934665603ull;
  for (unsigned char c : source) h = (h ^ c) * 1099511628211ull;
  return h;
}

StoredModule CudaExecutable::stored_module() const {
  StoredModule s;
  if (!module_) return s;
  s.feature_key = cuda::module_feature_key(cuda::default_arch(plan_.device), plan_.strict);
  s.source_hash = module_source_hash(plan_.module_source);
  s.image_arch = module_->arch;
  s.is_cubin = module_->is_cubin;
  s.image = module_->image;
  s.kernels = module_->kernels;
  return s;
}

CudaExecutable::CudaExecutable(std::shared_ptr<const Graph> g, const KernelOptions& opt, int device,
                               const StoredModule* stored)
    : graph_(std::move(g)) {
  const Graph& gr = *graph_;
  for (const Node& n : gr.nodes())
    if (n.kind == NodeKind::call) throw ValueError("CudaExecutable: inline calls first (graph '" + gr.name() + "')");
  fusion_ = plan_fusion(gr, opt, cuda_fusion_rules(opt));
  plan_ = lower_cuda(gr, fusion_, opt, device);
  if (opt.dump) std::cerr << "[kiln jit] CUDA plan:\n" << plan_.describe();
  bool any = false;
  for (const CudaStep& s : plan_.steps) any = any || s.kind == CudaStep::Kind::kernel;
  if (!any) return;
  const std::string arch = cuda::default_arch(device);
  if (stored && !stored->image.empty()) {
    const std::string key = cuda::module_feature_key(arch, opt.strict);
    if (opt.dump) stored_note_ = "KILN_JIT_DUMP compiles the source again";
    else if (stored->feature_key != key)
      stored_note_ = "the file's module was compiled for '" + stored->feature_key + "', this process compiles for '" +
                     key + "'";
    else if (stored->source_hash != module_source_hash(plan_.module_source))
      stored_note_ = "the file's module was compiled from another source than this plan's";
    else
      module_ = cuda::adopt_module(plan_.module_source, arch, opt.strict, stored->image_arch, stored->is_cubin,
                                   stored->image, stored->kernels);
  }
  if (!module_) module_ = cuda::compile_module(plan_.module_source, arch, opt.dump, opt.strict);
}

std::vector<Tensor> CudaExecutable::upload_constants() const {
  std::vector<Tensor> c;
  const Device where = Device::cuda(plan_.device);
  for (const Node& n : graph_->nodes())
    if (n.kind == NodeKind::constant) c.push_back(n.data.to(where));
  return c;
}

std::vector<Tensor> CudaExecutable::run(const std::vector<Tensor>& inputs, const std::vector<Tensor>& weights,
                                        const std::vector<Tensor>* constants) const {
  const Graph& g = *graph_;
  const int dev = plan_.device;
  if (dev >= cuda::device_count()) {
    // The runtime's own words (no device, no driver): DeviceError.
    (void)cuda::device_name(dev);
    throw DeviceError("cuda:" + std::to_string(dev) + ": no such CUDA device to run the compiled plan");
  }
  const Device where = Device::cuda(dev);
  std::vector<Tensor> vals(g.num_values());
  const auto& in_ids = g.input_ids();
  if (inputs.size() != in_ids.size())
    throw ValueError("compiled CUDA plan: expected " + std::to_string(in_ids.size()) + " inputs, got " +
                     std::to_string(inputs.size()));
  for (size_t i = 0; i < in_ids.size(); ++i) vals[in_ids[i]] = inputs[i];
  size_t w = 0, ci = 0;
  for (const Node& n : g.nodes()) {
    if (n.kind == NodeKind::constant) {
      if (!constants) vals[n.outputs[0]] = n.data.to(where);
      else if (ci < constants->size()) vals[n.outputs[0]] = (*constants)[ci++];
      else throw ValueError("compiled CUDA plan: too few device constants given");
    }
    else if (n.kind == NodeKind::weight) {
      if (w >= weights.size()) throw ValueError("compiled CUDA plan: too few weights bound");
      vals[n.outputs[0]] = weights[w++];
    }
  }
  const MemoryPlan& mem = plan_.memory;
  const Tensor arena = mem.arena_bytes ? Tensor::empty({static_cast<int64_t>(mem.arena_bytes)}, DType::uint8, where)
                                       : Tensor();
  // Where value v is computed: its arena slice, or memory of its own.
  auto destination = [&](int32_t v) {
    const TensorType& t = g.type(v);
    if (mem.arena_offset[v] < 0) return Tensor::empty(t.shape, t.dtype, where);
    const int64_t off = mem.arena_offset[v] / static_cast<int64_t>(size_of(t.dtype));
    return Tensor(arena.buffer(), t.dtype, t.shape, contiguous_strides(t.shape), off);
  };
  std::vector<void*> ptrs;
  std::vector<void*> args;
  for (size_t k = 0; k < plan_.steps.size(); ++k) {
    const CudaStep& s = plan_.steps[k];
    switch (s.kind) {
      case CudaStep::Kind::kernel: {
        ptrs.clear();
        for (size_t j = 0; j < s.operands.size(); ++j) {
          const int32_t v = s.operands[j];
          if (static_cast<int>(j) < s.num_outputs) vals[v] = destination(v);
          else if (!vals[v].is_contiguous()) vals[v] = vals[v].contiguous();
          ptrs.push_back(vals[v].data_ptr());
        }
        long long numel = s.kernel.numel;
        args.clear();
        for (void*& p : ptrs) args.push_back(&p);
        args.push_back(&numel);
        if (numel > 0)
          cuda::launch_kernel(module_, s.kernel.name, dev, s.launch.grid, s.launch.block, s.launch.shared_bytes,
                              args.data());
        break;
      }
      case CudaStep::Kind::gemm: {
        Tensor a = vals[s.gemm_operands.base[0]], b = vals[s.gemm_operands.base[1]];
        if (s.gemm_operands.transposed[0]) a = transpose(a, 0, 1);
        if (s.gemm_operands.transposed[1]) b = transpose(b, 0, 1);
        Tensor bias;
        if (s.gemm_bias >= 0) bias = reshape(vals[s.gemm_bias], {-1});
        vals[s.gemm_output] =
            cuda::matmul_epilogue(a, b, bias, s.gemm_bias >= 0 ? cuda::Epilogue::bias : cuda::Epilogue::none);
        break;
      }
      case CudaStep::Kind::row:
      case CudaStep::Kind::op: {
        const Node& n = g.node(s.node);
        std::vector<Tensor> in;
        for (int32_t v : n.inputs) in.push_back(vals[v]);
        const int32_t out = n.outputs[0];
        if (mem.arena_offset[out] >= 0) {
          const Tensor dst = destination(out);
          detail::ScopedOutput into(dst);
          Tensor r = detail::eager_execute(n.op, in, n.attrs);
          vals[out] = r.buffer() == arena.buffer() && r.data_ptr() != dst.data_ptr() ? r.clone() : std::move(r);
        } else {
          vals[out] = detail::eager_execute(n.op, in, n.attrs);
        }
        break;
      }
    }
    for (int32_t v : mem.release_after[k]) vals[v] = Tensor();
  }
  std::vector<Tensor> outs;
  for (int32_t v : g.output_ids()) {
    const Node& prod = g.node(g.producer(v));
    outs.push_back(prod.kind == NodeKind::constant || prod.kind == NodeKind::input ? vals[v].clone() : vals[v]);
  }
  return outs;
}

}  // namespace kiln::codegen
