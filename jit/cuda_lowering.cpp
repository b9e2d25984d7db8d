// The CUDA lowering of a fusion plan: see cuda_lowering.h.
#include "cuda_lowering.h"

#include <algorithm>
#include <cstdio>
#include <cstring>
#include <sstream>
#include <unordered_map>

#include "../tensor/error.h"

namespace kiln::codegen {

namespace {
// Mirrors of the eager CUDA launch rules (backends/cuda/launch_plan.h, which
// jit/ does not include: it is a CUDA backend header). The fused reduction
// must pick the block size eager picks so the combination order matches.
constexpr int64_t kReduceChunk = 16384;
constexpr uint32_t kElementwiseBlock = 256;
constexpr int64_t kMaxGrid = 65535;

uint32_t reduce_threads(int64_t nred) {
  uint32_t t = 32;
  while (t < 256 && t < nred) t *= 2;
  return t;
}
uint32_t row_threads(int64_t len) {
  uint32_t t = 32;
  while (t < 1024 && t < len) t *= 2;
  return t;
}
uint32_t grid_for(int64_t n, int64_t per_block) {
  int64_t b = (n + per_block - 1) / per_block;
  return static_cast<uint32_t>(b < 1 ? 1 : b > kMaxGrid ? kMaxGrid : b);
}

bool is_row_op(OpId op) {
  return op == OpId::Softmax || op == OpId::LogSoftmax || op == OpId::LayerNorm || op == OpId::RmsNorm;
}
bool fused_reduce_op(OpId op) { return op == OpId::Sum || op == OpId::Max || op == OpId::Min; }

bool is16(DType d) { return d == DType::float16 || d == DType::bfloat16; }
// The type a value is held in inside a generated kernel (float for the
// 16-bit floats, as eager computes them), nullptr when not generated.
const char* reg_type(DType d) { return is16(d) ? "float" : cuda_c_type(d); }
// The type a value is stored as in memory.
const char* storage_type(DType d) { return is16(d) ? "unsigned short" : cuda_c_type(d); }
std::string load_expr(DType d, const std::string& e) {
  if (d == DType::float16) return "kiln_rt::ld_f16(" + e + ")";
  if (d == DType::bfloat16) return "kiln_rt::ld_bf16(" + e + ")";
  return e;
}
std::string store_expr(DType d, const std::string& e) {
  if (d == DType::float16) return "kiln_rt::st_f16(" + e + ")";
  if (d == DType::bfloat16) return "kiln_rt::st_bf16(" + e + ")";
  return e;
}
// A float result rounded to the 16-bit format `d` (and back to float), as
// eager stores each op's result; other dtypes unchanged.
std::string round16(DType d, const std::string& e) {
  if (d == DType::float16) return "kiln_rt::rn_f16(" + e + ")";
  if (d == DType::bfloat16) return "kiln_rt::rn_bf16(" + e + ")";
  return e;
}

// The literal of a one-element constant, bit-exact (a 16-bit float as the
// float it widens to exactly).
std::string literal_of(const Tensor& data, DType d) {
  char buf[64];
  uint64_t bits = 0;
  std::memcpy(&bits, data.data_ptr(), size_of(d));
  switch (d) {
    case DType::float16:
    case DType::bfloat16: {
      const float f = d == DType::float16 ? float(*static_cast<const float16_t*>(data.data_ptr()))
                                          : float(*static_cast<const bfloat16_t*>(data.data_ptr()));
      uint32_t fb = 0;
      std::memcpy(&fb, &f, 4);
      std::snprintf(buf, sizeof buf, "__int_as_float(0x%08xu)", unsigned(fb));
      break;
    }
    case DType::float32: std::snprintf(buf, sizeof buf, "__int_as_float(0x%08xu)", unsigned(bits)); break;
    case DType::float64: std::snprintf(buf, sizeof buf, "__longlong_as_double(0x%016llxull)", (unsigned long long)bits); break;
    case DType::bool_: return (bits & 0xff) ? "true" : "false";
    case DType::uint8: std::snprintf(buf, sizeof buf, "uint8_t(%u)", unsigned(bits & 0xff)); break;
    case DType::int8: std::snprintf(buf, sizeof buf, "int8_t(%d)", int(int8_t(bits & 0xff))); break;
    case DType::int32: std::snprintf(buf, sizeof buf, "int32_t(%d)", int(int32_t(uint32_t(bits)))); break;
    case DType::int64: std::snprintf(buf, sizeof buf, "int64_t(%lldll)", (long long)int64_t(bits)); break;
    default: return {};
  }
  return buf;
}

// The compute type of node n: the promoted input dtype for comparisons and
// logical rows (their result is bool), else the result dtype.
DType compute_dtype(const Graph& g, const Node& n) {
  const DTypeRule rule = op_info(n.op).dtype_rule;
  if (rule == DTypeRule::Compare || rule == DTypeRule::ToBool) {
    DType d = g.type(n.inputs[0]).dtype;
    for (size_t k = 1; k < n.inputs.size(); ++k) d = promote_types(d, g.type(n.inputs[k]).dtype);
    return d;
  }
  return g.type(n.outputs[0]).dtype;
}

// The offset expression of an operand of shape `s` broadcast to `shape` at
// linear index `i` (contiguous storage).
std::string index_expr(const Shape& s, const Shape& shape) {
  int64_t n = 1, total = 1;
  for (int64_t e : s) n *= e;
  for (int64_t e : shape) total *= e;
  if (n == total) return "i";
  if (n == 1) return "0";
  std::string e = "(";
  const size_t lead = shape.size() - s.size();
  int64_t below = 1, stride = 1;  // elements of the group's trailing axes; operand's stride
  bool first = true;
  for (size_t d = shape.size(); d-- > 0;) {
    const int64_t ext = shape[d];
    const bool present = d >= lead && s[d - lead] != 1;
    if (present && ext != 1) {
      if (!first) e += " + ";
      e += "((i / " + std::to_string(below) + "ll) % " + std::to_string(ext) + "ll) * " + std::to_string(stride) + "ll";
      first = false;
      stride *= ext;
    }
    below *= ext;
  }
  return first ? "0" : e + ")";
}

// One generated kernel for group `grp`, or false (the caller runs the nodes
// one by one). With `fuse_reduce`, the group's reduction runs inside.
bool group_kernel(const Graph& g, const FusionGroup& grp, bool fuse_reduce, CudaStep& step) {
  std::vector<int32_t> outs;
  const int32_t red_in = fuse_reduce ? g.node(grp.reduce_node).inputs[0] : -1;
  for (int32_t v : grp.outputs)
    if (v != red_in) outs.push_back(v);
  if (fuse_reduce) outs.push_back(g.node(grp.reduce_node).outputs[0]);
  std::vector<int32_t> ins;
  std::unordered_map<int32_t, std::string> reg;  // value -> register name
  std::string body;
  auto dt = [&](int32_t v) { return g.type(v).dtype; };
  auto ctype = [&](int32_t v) { return storage_type(dt(v)); };
  for (int32_t v : outs)
    if (!ctype(v)) return false;
  auto use = [&](int32_t v) -> std::string {
    auto it = reg.find(v);
    if (it != reg.end()) return it->second;
    const TensorType& t = g.type(v);
    if (!reg_type(t.dtype)) return {};
    const Node& prod = g.node(g.producer(v));
    std::string r = "v" + std::to_string(v);
    if (prod.kind == NodeKind::constant && t.shape.empty()) {
      const std::string lit = literal_of(prod.data, t.dtype);
      if (lit.empty()) return {};
      body += "    const " + std::string(reg_type(t.dtype)) + " " + r + " = " + lit + ";\n";
    } else {
      const size_t k = outs.size() + ins.size();
      ins.push_back(v);
      body += "    const " + std::string(reg_type(t.dtype)) + " " + r + " = " +
              load_expr(t.dtype, "p" + std::to_string(k) + "[" + index_expr(t.shape, grp.shape) + "]") + ";\n";
    }
    return reg[v] = r;
  };
  for (int32_t ni : grp.nodes) {
    const Node& n = g.node(ni);
    const int32_t ov = n.outputs[0];
    const DType od = dt(ov);
    const char* ot = reg_type(od);
    const char* ct = reg_type(compute_dtype(g, n));
    if (!ot || !ct) return false;
    std::string expr;
    if (n.op == OpId::Cast) {
      // Eager's cast kernel: hd::cast_to from the source's compute type, then
      // the store's rounding; float64 to a 16-bit float rounds once, directly.
      const DType id = dt(n.inputs[0]);
      const std::string a = use(n.inputs[0]);
      if (a.empty()) return false;
      if (id == DType::float64 && od == DType::bfloat16) return false;  // no one-rounding cvt before sm_90: eager
      if (id == DType::float64 && od == DType::float16) expr = "kiln_rt::ld_f16(kiln_rt::st_f16_rn64(" + a + "))";
      else expr = round16(od, "kiln::hd::cast_to<" + std::string(ot) + ">(" + a + ")");
    } else {
      std::string args;
      for (size_t k = 0; k < n.inputs.size(); ++k) {
        const std::string a = use(n.inputs[k]);
        if (a.empty()) return false;
        const char* at = (n.op == OpId::Where && k == 0) ? "bool" : ct;
        args += (k ? ", " : "") + std::string(at) + "(" + a + ")";
      }
      expr = round16(od, std::string(ot) + "(" + cuda_functor_name(n.op) + "{}(" + args + "))");
    }
    const std::string r = "v" + std::to_string(ov);
    body += "    const " + std::string(ot) + " " + r + " = " + expr + ";\n";
    reg[ov] = r;
  }
  const size_t nops = outs.size() + ins.size();
  if (nops > static_cast<size_t>(kCudaMaxOperands)) return false;
  int64_t numel = 1;
  for (int64_t e : grp.shape) numel *= e;

  std::string params;
  for (size_t k = 0; k < nops; ++k) {
    const int32_t v = k < outs.size() ? outs[k] : ins[k - outs.size()];
    params += std::string(k < outs.size() ? "" : "const ") + ctype(v) + "* __restrict__ p" + std::to_string(k) + ", ";
  }
  std::string s = "(" + params + "long long n) {\n";
  const size_t nstore = fuse_reduce ? outs.size() - 1 : outs.size();
  std::string stores;
  for (size_t k = 0; k < nstore; ++k)
    stores += "    p" + std::to_string(k) + "[i] = " + store_expr(dt(outs[k]), reg.at(outs[k])) + ";\n";
  if (!fuse_reduce) {
    s += "  for (long long i = (long long)blockIdx.x * blockDim.x + threadIdx.x; i < n; i += (long long)gridDim.x * "
         "blockDim.x) {\n" + body + stores + "  }\n}\n";
    step.kernel.launch = {grid_for(numel, kElementwiseBlock), kElementwiseBlock, 0};
  } else {
    // One block per output row o; thread t accumulates elements t, t +
    // blockDim.x, ... of the row, then the block combines in the fixed
    // order of block_reduce.cuh, as the eager reduction's pass 1 (one chunk).
    const Node& rn = g.node(grp.reduce_node);
    const char* acc = ctype(rn.outputs[0]);
    const std::string init = rn.op == OpId::Sum ? std::string(acc) + "(0)"
                             : rn.op == OpId::Max ? "-kiln::hd::m::inf<" + std::string(acc) + ">()"
                                                  : "kiln::hd::m::inf<" + std::string(acc) + ">()";
    const std::string win = rn.op == OpId::Max ? "(x > a || x != x)" : "(x < a || x != x)";
    const std::string comb = rn.op == OpId::Sum ? "a + x" : win + " ? x : a";
    const std::string red_out = "p" + std::to_string(outs.size() - 1);
    s += "  " + std::string(acc) + "* smem = reinterpret_cast<" + acc + "*>(kiln_smem);\n";
    s += "  const long long nred = " + std::to_string(grp.reduce_nred) + "ll, nout = " + std::to_string(grp.reduce_nout) +
         "ll;\n  (void)n;\n";
    s += "  for (long long o = blockIdx.x; o < nout; o += gridDim.x) {\n    " + std::string(acc) + " a = " + init +
         ";\n    for (long long j = threadIdx.x; j < nred; j += blockDim.x) {\n      const long long i = o * nred + j;\n";
    s += body + stores + "      const " + acc + " x = " + reg.at(red_in) + ";\n      a = " + comb + ";\n    }\n";
    s += "    smem[threadIdx.x] = a;\n    __syncthreads();\n"
         "    for (unsigned w = blockDim.x / 2; w >= 1; w /= 2) {\n"
         "      if (threadIdx.x < w) { const " + std::string(acc) + " a = smem[threadIdx.x], x = smem[threadIdx.x + w]; "
         "smem[threadIdx.x] = " + comb + "; }\n      __syncthreads();\n    }\n";
    // Eager's second pass starts from init and combines the one partial
    // (0 + p for a sum: -0 becomes +0 there too).
    const std::string fin = rn.op == OpId::Sum ? std::string(acc) + "(0) + smem[0]" : "smem[0]";
    s += "    if (threadIdx.x == 0) " + red_out + "[o] = " + fin + ";\n    __syncthreads();\n  }\n}\n";
    const uint32_t t = reduce_threads(grp.reduce_nred);
    step.kernel.launch = {grid_for(grp.reduce_nout, 1), t, static_cast<uint32_t>(t * size_of(g.type(rn.outputs[0]).dtype))};
  }
  // The name is the text's hash: equal groups (in one plan or across plans)
  // are one kernel, and a module's kernels never clash.
  uint64_t h = 1469598103934665603ull;
  for (unsigned char c : s) h = (h ^ c) * 1099511628211ull;
  char name[32];
  std::snprintf(name, sizeof name, "kiln_%016llx", static_cast<unsigned long long>(h));
  step.kind = CudaStep::Kind::kernel;
  step.kernel.name = name;
  step.kernel.source = "extern \"C\" __global__ void " + std::string(name) + s;
  step.kernel.numel = numel;
  step.launch = step.kernel.launch;
  step.operands = outs;
  step.operands.insert(step.operands.end(), ins.begin(), ins.end());
  step.num_outputs = static_cast<int>(outs.size());
  step.group_nodes = grp.nodes;
  if (fuse_reduce) step.group_nodes.push_back(grp.reduce_node);
  return true;
}

CudaStep op_step(const Graph& g, int32_t node) {
  CudaStep s;
  s.kind = CudaStep::Kind::op;
  s.node = node;
  (void)g;
  return s;
}

StepValues step_values(const Graph& g, const CudaStep& s) {
  StepValues io;
  switch (s.kind) {
    case CudaStep::Kind::kernel:
      io.writes.assign(s.operands.begin(), s.operands.begin() + s.num_outputs);
      io.reads.assign(s.operands.begin() + s.num_outputs, s.operands.end());
      break;
    case CudaStep::Kind::gemm:
      io.reads = {s.gemm_operands.base[0], s.gemm_operands.base[1]};
      if (s.gemm_bias >= 0) io.reads.push_back(s.gemm_bias);
      io.writes = {s.gemm_output};
      break;
    case CudaStep::Kind::row:
    case CudaStep::Kind::op: {
      const Node& n = g.node(s.node);
      io.reads = n.inputs;
      io.writes = n.outputs;
      io.view = op_info(n.op).category == OpCategory::View;
      break;
    }
  }
  return io;
}
}  // namespace

std::string cuda_functor_name(OpId op) {
  static const std::unordered_map<int, std::string> names = [] {
    std::unordered_map<int, std::string> m;
#define KILN_OP(id, name, arity, cat, rule)                                                                  \
  if (OpCategory::cat == OpCategory::Unary || OpCategory::cat == OpCategory::Binary ||                       \
      OpCategory::cat == OpCategory::Ternary)                                                                \
    m[static_cast<int>(OpId::id)] = "kiln::hd::" #id;
#include "../tensor/ops.def"
#undef KILN_OP
    return m;
  }();
  auto it = names.find(static_cast<int>(op));
  if (it == names.end())
    throw ValueError("cuda_functor_name: op '" + std::string(op_info(op).name) +
                     "' is not an elementwise (Unary/Binary/Ternary) row of the op table");
  return it->second;
}

const char* cuda_c_type(DType d) {
  switch (d) {
    case DType::bool_: return "bool";
    case DType::uint8: return "uint8_t";
    case DType::int8: return "int8_t";
    case DType::int32: return "int32_t";
    case DType::int64: return "int64_t";
    case DType::float32: return "float";
    case DType::float64: return "double";
    default: return nullptr;
  }
}

FusionRules cuda_fusion_rules(const KernelOptions& opt) {
  FusionRules r;
  r.max_operands = kCudaMaxOperands;
  r.reduce_in_group = [](OpId op) { return fused_reduce_op(op); };
  // Strict: a matmul runs as eager runs it (its own node, its operands as
  // given): cuBLASLt's heuristic may pick another algorithm, with another
  // summation order, for a bias epilogue or folded transposes.
  const bool strict = opt.strict;
  r.gemm = [strict](const Graph& g, const Node& n, const GemmOperands&) {
    const DType d = g.type(n.outputs[0]).dtype;
    return !strict && (d == DType::float32 || d == DType::float64);
  };
  r.row = [](const Graph& g, const Node& n) {
    if (!is_row_op(n.op)) return false;
    const TensorType& x = g.type(n.inputs[0]);
    const int64_t nd = static_cast<int64_t>(x.shape.size());
    const bool norm = n.op == OpId::LayerNorm || n.op == OpId::RmsNorm;
    return nd > 0 && (norm || (n.attrs.axis < 0 ? n.attrs.axis + nd : n.attrs.axis) == nd - 1);
  };
  r.column_sum = [](const Graph&, const Node&) { return false; };
  return r;
}

CudaPlan lower_cuda(const Graph& g, const FusionPlan& fusion, const KernelOptions& opt, int device) {
  CudaPlan plan;
  plan.device = device;
  plan.strict = opt.strict;
  for (const FusionItem& it : fusion.items) {
    switch (it.kind) {
      case FusionItem::Kind::group: {
        const FusionGroup& grp = fusion.groups[static_cast<size_t>(it.group)];
        if (grp.nodes.empty()) break;
        CudaStep s;
        bool fuse_reduce = false;
        if (grp.reduce_node >= 0) {
          const Node& rn = g.node(grp.reduce_node);
          const DType in = g.type(rn.inputs[0]).dtype, out = g.type(rn.outputs[0]).dtype;
          fuse_reduce = fused_reduce_op(rn.op) && in == out && (in == DType::float32 || in == DType::float64) &&
                        grp.reduce_nred > 0 && grp.reduce_nred <= kReduceChunk && grp.reduce_nout > 0;
        }
        if (group_kernel(g, grp, fuse_reduce, s)) {
          plan.steps.push_back(std::move(s));
          if (grp.reduce_node >= 0 && !fuse_reduce) plan.steps.push_back(op_step(g, grp.reduce_node));
        } else {  // the eager kernels, node by node
          for (int32_t ni : grp.nodes) plan.steps.push_back(op_step(g, ni));
          if (grp.reduce_node >= 0) plan.steps.push_back(op_step(g, grp.reduce_node));
        }
        break;
      }
      case FusionItem::Kind::gemm: {
        CudaStep s = op_step(g, it.node);
        s.kind = CudaStep::Kind::gemm;
        s.gemm_operands = it.gemm_operands;
        s.gemm_bias = it.gemm_bias;
        s.gemm_output = it.gemm_output;
        plan.steps.push_back(std::move(s));
        break;
      }
      case FusionItem::Kind::row: {
        CudaStep s = op_step(g, it.node);
        s.kind = CudaStep::Kind::row;
        const TensorType& x = g.type(g.node(it.node).inputs[0]);
        const int64_t len = x.shape.back();
        int64_t rows = 1;
        for (size_t d = 0; d + 1 < x.shape.size(); ++d) rows *= x.shape[d];
        s.launch = {grid_for(rows, 1), row_threads(len), 0};
        plan.steps.push_back(std::move(s));
        break;
      }
      case FusionItem::Kind::op:
      case FusionItem::Kind::column_sum: plan.steps.push_back(op_step(g, it.node)); break;
    }
  }
  std::vector<StepValues> io;
  io.reserve(plan.steps.size());
  for (const CudaStep& s : plan.steps) io.push_back(step_values(g, s));
  plan.memory = plan_memory(g, io, fusion.is_output);
  std::vector<CudaKernelSource> kernels;
  for (const CudaStep& s : plan.steps)
    if (s.kind == CudaStep::Kind::kernel) kernels.push_back(s.kernel);
  plan.module_source = cuda_module_source(kernels);
  return plan;
}

namespace {
// The 16-bit float conversions of the generated kernels, as the eager
// kernels' cuda_fp16/cuda_bf16 intrinsics do them on sm_80 and later
// (__half2float, __float2half_rn, __double2half, __bfloat162float,
// __float2bfloat16_rn): the same PTX cvt instructions (NVRTC has no
// cuda_fp16.h of its own here). rn_*: a float rounded to the format.
const char* const kCuda16BitHelpers = R"(namespace kiln_rt {
__device__ __forceinline__ float ld_f16(unsigned short h) { float f; asm("cvt.f32.f16 %0, %1;" : "=f"(f) : "h"(h)); return f; }
__device__ __forceinline__ unsigned short st_f16(float f) { unsigned short h; asm("cvt.rn.f16.f32 %0, %1;" : "=h"(h) : "f"(f)); return h; }
__device__ __forceinline__ unsigned short st_f16_rn64(double d) { unsigned short h; asm("cvt.rn.f16.f64 %0, %1;" : "=h"(h) : "d"(d)); return h; }
__device__ __forceinline__ float ld_bf16(unsigned short h) { return __uint_as_float((unsigned)h << 16); }
__device__ __forceinline__ unsigned short st_bf16(float f) { unsigned short h; asm("cvt.rn.bf16.f32 %0, %1;" : "=h"(h) : "f"(f)); return h; }
__device__ __forceinline__ float rn_f16(float f) { return ld_f16(st_f16(f)); }
__device__ __forceinline__ float rn_bf16(float f) { return ld_bf16(st_bf16(f)); }
}  // namespace kiln_rt
)";
}  // namespace

std::string cuda_module_source(const std::vector<CudaKernelSource>& kernels) {
  std::string m = "#include \"kernel_templates.h\"\nextern __shared__ __align__(16) unsigned char kiln_smem[];\n";
  m += kCuda16BitHelpers;
  std::vector<std::string> seen;
  for (const CudaKernelSource& k : kernels)
    if (std::find(seen.begin(), seen.end(), k.name) == seen.end()) {
      seen.push_back(k.name);
      m += k.source;
    }
  return m;
}

std::string CudaPlan::describe() const {
  std::ostringstream o;
  static const char* kinds[] = {"kernel", "gemm", "row", "op"};
  for (size_t k = 0; k < steps.size(); ++k) {
    const CudaStep& s = steps[k];
    o << k << ": " << kinds[static_cast<int>(s.kind)];
    if (s.kind == CudaStep::Kind::kernel) o << " " << s.kernel.name << " nodes=" << s.group_nodes.size();
    else o << " node " << s.node;
    if (s.kind == CudaStep::Kind::kernel || s.kind == CudaStep::Kind::row)
      o << " <<<" << s.launch.grid << ", " << s.launch.block << ", " << s.launch.shared_bytes << ">>>";
    o << "\n";
  }
  o << "arena " << memory.arena_bytes << " bytes on cuda:" << device << (strict ? ", strict (-fmad=false)" : "") << "\n";
  return o.str();
}

}  // namespace kiln::codegen
