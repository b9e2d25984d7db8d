// The CUDA matmul row through cuBLASLt: float32/float64/float16/bfloat16
// (16-bit floats accumulate in float32), 2-d, batched with one stride per
// operand (broadcast batches have stride 0; batch axes that do not merge
// into one stride loop on the host), transposed operands without a copy
// (a column-major view is passed with the transpose flag). TF32 is off by
// default: the compute type is CUBLAS_COMPUTE_32F, float32 products round
// as IEEE; set_allow_tf32(true) switches float32 to
// CUBLAS_COMPUTE_32F_FAST_TF32. matmul_epilogue adds cuBLASLt's bias and
// GELU epilogues (applied to the result in the same call).
#include <cublasLt.h>

#include <array>
#include <atomic>
#include <memory>
#include <mutex>
#include <string>

#include "../../tensor/kernel_registry.h"
#include "../../tensor/ops.h"
#include "cuda_backend.h"
#include "offset_calc.h"
#include "runtime.h"

namespace kiln::cuda {
namespace {

std::atomic<bool> g_allow_tf32{false};

void lt_check(cublasStatus_t s, int dev, const char* what) {
  if (s != CUBLAS_STATUS_SUCCESS)
    throw DeviceError("cuda:" + std::to_string(dev) + ": " + what + ": " + cublasGetStatusString(s));
}

constexpr size_t kWorkspace = size_t(32) << 20;

struct LtDevice {
  cublasLtHandle_t handle = nullptr;
  void* workspace = nullptr;
};

LtDevice& lt(int dev) {
  static std::mutex mu;
  static std::array<std::unique_ptr<LtDevice>, 64> devices;  // never destroyed in use: see runtime.cpp
  std::lock_guard<std::mutex> lk(mu);
  auto& d = devices.at(size_t(dev));
  if (!d) {
    auto n = std::make_unique<LtDevice>();
    lt_check(cublasLtCreate(&n->handle), dev, "cublasLtCreate");
    check(cudaMalloc(&n->workspace, kWorkspace), dev, "cudaMalloc (cuBLASLt workspace)");
    d = std::move(n);
  }
  return *d;
}

struct Types {
  cudaDataType_t data;
  cublasComputeType_t compute;
  cudaDataType_t scale;
};
Types types_of(DType d) {
  switch (d) {
    case DType::float32:
      return {CUDA_R_32F, g_allow_tf32.load(std::memory_order_relaxed) ? CUBLAS_COMPUTE_32F_FAST_TF32 : CUBLAS_COMPUTE_32F,
              CUDA_R_32F};
    case DType::float64: return {CUDA_R_64F, CUBLAS_COMPUTE_64F, CUDA_R_64F};
    case DType::float16: return {CUDA_R_16F, CUBLAS_COMPUTE_32F, CUDA_R_32F};
    case DType::bfloat16: return {CUDA_R_16BF, CUBLAS_COMPUTE_32F, CUDA_R_32F};
    default: throw DTypeError("matmul: no CUDA kernel for dtype " + std::string(name(d)));
  }
}

/// How cuBLASLt (column-major) sees a row-major [rows, cols] matrix view:
/// row-contiguous is its transpose with no flag, column-contiguous is
/// itself with the transpose flag. Empty when neither (copied first).
struct Operand {
  bool transpose;
  int64_t ld;
};
bool as_operand(int64_t rows, int64_t cols, int64_t rs, int64_t cs, Operand& o) {
  if (cs == 1 || cols == 1) {
    o = {false, rows == 1 ? std::max<int64_t>(cols, 1) : rs};
    if (o.ld >= cols) return true;
  }
  if (rs == 1 || rows == 1) {
    o = {true, cols == 1 ? std::max<int64_t>(rows, 1) : cs};
    if (o.ld >= rows) return true;
  }
  return false;
}

struct Layout {
  cublasLtMatrixLayout_t l = nullptr;
  ~Layout() {
    if (l) cublasLtMatrixLayoutDestroy(l);
  }
};

cublasLtEpilogue_t lt_epilogue(Epilogue e) {
  switch (e) {
    case Epilogue::bias: return CUBLASLT_EPILOGUE_BIAS;
    case Epilogue::gelu: return CUBLASLT_EPILOGUE_GELU;
    case Epilogue::bias_gelu: return CUBLASLT_EPILOGUE_GELU_BIAS;
    default: return CUBLASLT_EPILOGUE_DEFAULT;
  }
}

/// out [batch..., M, N] (contiguous) = a [batch..., M, K] @ b [batch..., K, N]
/// (same rank as out; batch strides may be 0), then epilogue `e` with
/// `bias` ([N], out's dtype, contiguous; for bias/bias_gelu). Returns false
/// when cuBLASLt offers no algorithm with that epilogue (nothing was run).
bool lt_matmul(const Tensor& a_in, const Tensor& b_in, const Tensor& out, const Tensor* bias, Epilogue e) {
  const int dev = out.device().index;
  use_device(dev);
  const DType d = out.dtype();
  const Types t = types_of(d);
  // Operands in out's dtype, each a view cuBLASLt can read.
  Tensor a = a_in, b = b_in;
  const int64_t nd = out.ndim(), M = out.shape()[nd - 2], N = out.shape()[nd - 1], K = a.shape()[nd - 1];
  auto usable = [&](Tensor& x, int64_t rows, int64_t cols, Operand& o) {
    if (x.dtype() != d || !as_operand(rows, cols, x.strides()[nd - 2], x.strides()[nd - 1], o)) {
      Tensor c = Tensor::empty(x.shape(), d, x.device());
      detail::copy_into(x, c);
      x = c;
      as_operand(rows, cols, x.strides()[nd - 2], x.strides()[nd - 1], o);
    }
  };
  Operand oa{}, ob{};
  usable(a, M, K, oa);
  usable(b, K, N, ob);
  if (K == 0 && e == Epilogue::none) {  // an empty sum: zeros
    check(cudaMemsetAsync(out.data_ptr(), 0, size_t(out.numel()) * out.itemsize(), stream(dev)), dev, "cudaMemsetAsync");
    return true;
  }
  if (K == 0) return false;  // (the epilogue runs on the zeros through the fallback)

  // Batch axes: merged where out, a and b all allow; the innermost merged
  // axis goes to cuBLASLt, the others loop here.
  std::vector<int64_t> bshape(out.shape().begin(), out.shape().end() - 2);
  std::vector<std::vector<int64_t>> bstr(3);
  for (int64_t i = 0; i < nd - 2; ++i) {
    bstr[0].push_back(out.strides()[i]);
    bstr[1].push_back(a.strides()[i]);
    bstr[2].push_back(b.strides()[i]);
  }
  const Coalesced c = coalesce(bshape, bstr);
  const int64_t count = c.sizes.empty() ? 1 : c.sizes[0];
  const int64_t so = c.sizes.empty() ? 0 : c.strides[0][0], sa = c.sizes.empty() ? 0 : c.strides[0][1],
                sb = c.sizes.empty() ? 0 : c.strides[0][2];

  LtDevice& L = lt(dev);
  cublasLtMatmulDesc_t desc = nullptr;
  lt_check(cublasLtMatmulDescCreate(&desc, t.compute, t.scale), dev, "cublasLtMatmulDescCreate");
  std::unique_ptr<std::remove_pointer_t<cublasLtMatmulDesc_t>, decltype(&cublasLtMatmulDescDestroy)> desc_guard(
      desc, cublasLtMatmulDescDestroy);
  // D^T [N, M] = op(B^T) [N, K] * op(A^T) [K, M] in cuBLASLt's column-major terms.
  const cublasOperation_t opb = ob.transpose ? CUBLAS_OP_T : CUBLAS_OP_N, opa = oa.transpose ? CUBLAS_OP_T : CUBLAS_OP_N;
  lt_check(cublasLtMatmulDescSetAttribute(desc, CUBLASLT_MATMUL_DESC_TRANSA, &opb, sizeof(opb)), dev, "TRANSA");
  lt_check(cublasLtMatmulDescSetAttribute(desc, CUBLASLT_MATMUL_DESC_TRANSB, &opa, sizeof(opa)), dev, "TRANSB");
  if (e != Epilogue::none) {
    const cublasLtEpilogue_t ep = lt_epilogue(e);
    lt_check(cublasLtMatmulDescSetAttribute(desc, CUBLASLT_MATMUL_DESC_EPILOGUE, &ep, sizeof(ep)), dev, "EPILOGUE");
    if (bias) {
      const void* bp = bias->data_ptr();
      lt_check(cublasLtMatmulDescSetAttribute(desc, CUBLASLT_MATMUL_DESC_BIAS_POINTER, &bp, sizeof(bp)), dev,
               "BIAS_POINTER");
    }
  }
  Layout lb, la, lc;
  lt_check(cublasLtMatrixLayoutCreate(&lb.l, t.data, ob.transpose ? K : N, ob.transpose ? N : K, ob.ld), dev, "layout B");
  lt_check(cublasLtMatrixLayoutCreate(&la.l, t.data, oa.transpose ? M : K, oa.transpose ? K : M, oa.ld), dev, "layout A");
  lt_check(cublasLtMatrixLayoutCreate(&lc.l, t.data, N, M, N), dev, "layout C");
  const int32_t cnt = int32_t(count);
  for (auto [l, s] : {std::pair{lb.l, sb}, std::pair{la.l, sa}, std::pair{lc.l, so}}) {
    lt_check(cublasLtMatrixLayoutSetAttribute(l, CUBLASLT_MATRIX_LAYOUT_BATCH_COUNT, &cnt, sizeof(cnt)), dev, "batch");
    lt_check(cublasLtMatrixLayoutSetAttribute(l, CUBLASLT_MATRIX_LAYOUT_STRIDED_BATCH_OFFSET, &s, sizeof(s)), dev,
             "batch stride");
  }
  cublasLtMatmulPreference_t pref = nullptr;
  lt_check(cublasLtMatmulPreferenceCreate(&pref), dev, "cublasLtMatmulPreferenceCreate");
  const size_t ws = kWorkspace;
  cublasLtMatmulPreferenceSetAttribute(pref, CUBLASLT_MATMUL_PREF_MAX_WORKSPACE_BYTES, &ws, sizeof(ws));
  cublasLtMatmulHeuristicResult_t h{};
  int found = 0;
  const cublasStatus_t hs = cublasLtMatmulAlgoGetHeuristic(L.handle, desc, lb.l, la.l, lc.l, lc.l, pref, 1, &h, &found);
  cublasLtMatmulPreferenceDestroy(pref);
  if (e != Epilogue::none && (hs == CUBLAS_STATUS_NOT_SUPPORTED || (hs == CUBLAS_STATUS_SUCCESS && found == 0)))
    return false;
  lt_check(hs, dev, "cublasLtMatmulAlgoGetHeuristic");
  if (found == 0) throw DeviceError("cuda:" + std::to_string(dev) + ": matmul: cuBLASLt found no algorithm");

  const float one_f = 1.f, zero_f = 0.f;
  const double one_d = 1.0, zero_d = 0.0;
  const void* alpha = d == DType::float64 ? static_cast<const void*>(&one_d) : &one_f;
  const void* beta = d == DType::float64 ? static_cast<const void*>(&zero_d) : &zero_f;
  // The outer batch axes (those that did not merge) loop here.
  int64_t outer = 1;
  for (size_t i = 1; i < c.sizes.size(); ++i) outer *= c.sizes[i];
  const size_t isz = out.itemsize();
  for (int64_t o = 0; o < outer; ++o) {
    int64_t rem = o, offo = 0, offa = 0, offb = 0;
    for (size_t i = 1; i < c.sizes.size(); ++i) {
      const int64_t idx = rem % c.sizes[i];
      rem /= c.sizes[i];
      offo += idx * c.strides[i][0];
      offa += idx * c.strides[i][1];
      offb += idx * c.strides[i][2];
    }
    char* po = static_cast<char*>(out.data_ptr()) + offo * int64_t(isz);
    const char* pa = static_cast<const char*>(a.data_ptr()) + offa * int64_t(isz);
    const char* pb = static_cast<const char*>(b.data_ptr()) + offb * int64_t(isz);
    lt_check(cublasLtMatmul(L.handle, desc, alpha, pb, lb.l, pa, la.l, beta, po, lc.l, po, lc.l, &h.algo, L.workspace,
                            kWorkspace, stream(dev)),
             dev, "cublasLtMatmul");
  }
  return true;
}

void matmul_kernel(const KernelArgs& k) { lt_matmul(k.in[0], k.in[1], k.out, nullptr, Epilogue::none); }

[[maybe_unused]] const bool registered = [] {
  detail::register_kernel(OpId::Matmul, DeviceType::cuda, matmul_kernel,
                          dtype_bit(DType::float32) | dtype_bit(DType::float64) | dtype_bit(DType::float16) |
                              dtype_bit(DType::bfloat16));
  return true;
}();

}  // namespace

void set_allow_tf32(bool on) { g_allow_tf32.store(on, std::memory_order_relaxed); }
bool allow_tf32() { return g_allow_tf32.load(std::memory_order_relaxed); }

Tensor matmul_epilogue(const Tensor& a, const Tensor& b, const Tensor& bias, Epilogue e) {
  const bool has_bias = e == Epilogue::bias || e == Epilogue::bias_gelu;
  a.realize();
  b.realize();
  if (a.device().type != DeviceType::cuda || b.device() != a.device())
    throw DeviceError("matmul_epilogue: a and b must live on one CUDA device, got " + a.device().str() + " and " +
                      b.device().str());
  if (a.dtype() != b.dtype() || !is_floating(a.dtype()))
    throw DTypeError("matmul_epilogue: a and b must share a floating dtype, got " + std::string(name(a.dtype())) +
                     " and " + std::string(name(b.dtype())));
  if (a.ndim() < 2 || b.ndim() < 2)
    throw ShapeError("matmul_epilogue: a and b must have at least 2 dimensions, got shapes " + shape_str(a.shape()) +
                     " and " + shape_str(b.shape()));
  const int64_t nd = a.ndim(), K = a.shape()[size_t(nd - 1)], N = b.shape()[size_t(b.ndim() - 1)];
  const Shape batch(a.shape().begin(), a.shape().end() - 2);
  const bool b_batched = b.ndim() > 2;
  if (b.shape()[size_t(b.ndim() - 2)] != K || (b_batched && Shape(b.shape().begin(), b.shape().end() - 2) != batch))
    throw ShapeError("matmul_epilogue: b must have shape [" + std::to_string(K) + ", N] or a's batch extents " +
                     shape_str(batch) + " then [" + std::to_string(K) + ", N]; got a " + shape_str(a.shape()) +
                     " and b " + shape_str(b.shape()));
  if (has_bias != bias.defined())
    throw ValueError(std::string("matmul_epilogue: ") + (has_bias ? "this epilogue needs a bias" : "a bias was given but the epilogue takes none"));
  Tensor bias_c;
  if (has_bias) {
    bias.realize();
    if (bias.device() != a.device())
      throw DeviceError("matmul_epilogue: bias lives on " + bias.device().str() + ", a on " + a.device().str());
    if (bias.ndim() != 1 || bias.shape()[0] != N)
      throw ShapeError("matmul_epilogue: bias must have shape [" + std::to_string(N) + "], got " +
                       shape_str(bias.shape()));
    bias_c = bias.dtype() == a.dtype() && bias.is_contiguous() ? bias : bias.to(a.dtype()).contiguous();
  }
  Shape os = batch;
  os.push_back(a.shape()[size_t(nd - 2)]);
  os.push_back(N);
  Tensor out = Tensor::empty(os, a.dtype(), a.device());
  // b of out's rank: batch strides 0 for a 2-d weight.
  Tensor bv = b;
  if (!b_batched) {
    Shape bs = batch;
    Strides bst(batch.size(), 0);
    bs.push_back(K);
    bs.push_back(N);
    bst.push_back(b.strides()[0]);
    bst.push_back(b.strides()[1]);
    bv = Tensor(b.buffer(), b.dtype(), bs, bst, b.offset());
  }
  if (out.numel() == 0) return out;
  if (lt_matmul(a, bv, out, has_bias ? &bias_c : nullptr, e)) return out;
  // No cuBLASLt algorithm with this epilogue (e.g. float64 GELU): the plain
  // product, then kiln's eager add and gelu_tanh rows on the device.
  lt_matmul(a, bv, out, nullptr, Epilogue::none);
  Tensor r = out;
  if (has_bias) r = add(r, bias_c);
  if (e == Epilogue::gelu || e == Epilogue::bias_gelu) r = gelu(r, /*approximate_tanh=*/true);
  return r;
}

}  // namespace kiln::cuda
