// A compiled plan for a CUDA device: see cuda_executable.h.
#include "cuda_executable.h"

#include <iostream>

#include "../backends/cuda/cuda_backend.h"
#include "../tensor/error.h"
#include "../tensor/op_table.h"
#include "../tensor/ops.h"

namespace kiln::codegen {

CudaExecutable::CudaExecutable(std::shared_ptr<const Graph> g, const KernelOptions& opt, int device)
    : graph_(std::move(g)) {
  const Graph& gr = *graph_;
  for (const Node& n : gr.nodes())
    if (n.kind == NodeKind::call) throw ValueError("CudaExecutable: inline calls first (graph '" + gr.name() + "')");
  fusion_ = plan_fusion(gr, opt, cuda_fusion_rules(opt));
  plan_ = lower_cuda(gr, fusion_, opt, device);
  if (opt.dump) std::cerr << "[kiln jit] CUDA plan:\n" << plan_.describe();
  bool any = false;
  for (const CudaStep& s : plan_.steps) any = any || s.kind == CudaStep::Kind::kernel;
  if (any) module_ = cuda::compile_module(plan_.module_source, cuda::default_arch(device), opt.dump);
}

std::vector<Tensor> CudaExecutable::run(const std::vector<Tensor>& inputs, const std::vector<Tensor>& weights) const {
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
  size_t w = 0;
  for (const Node& n : g.nodes()) {
    if (n.kind == NodeKind::constant) vals[n.outputs[0]] = n.data.to(where);
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
