// The CUDA matmul row through cuBLASLt: float32/float64/float16/bfloat16
// (16-bit floats accumulate in float32), 2-d, batched with one stride per
// operand (broadcast batches have stride 0; batch axes that do not merge
// into one stride loop on the host), transposed operands without a copy
// (a column-major view is passed with the transpose flag). TF32 is off: the
// compute type is CUBLAS_COMPUTE_32F, float32 products round as IEEE.
#include <cublasLt.h>

#include <array>
#include <memory>
#include <mutex>
#include <string>

#include "../../tensor/kernel_registry.h"
#include "offset_calc.h"
#include "runtime.h"

namespace kiln::cuda {
namespace {

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
    case DType::float32: return {CUDA_R_32F, CUBLAS_COMPUTE_32F, CUDA_R_32F};
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

void matmul_kernel(const KernelArgs& k) {
  const Tensor& out = k.out;  // contiguous [batch..., M, N]
  const int dev = out.device().index;
  use_device(dev);
  const DType d = out.dtype();
  const Types t = types_of(d);
  // Operands in out's dtype, each a view cuBLASLt can read.
  Tensor a = k.in[0], b = k.in[1];
  const int64_t nd = out.ndim(), M = out.shape()[nd - 2], N = out.shape()[nd - 1], K = a.shape()[nd - 1];
  auto usable = [&](Tensor& x, int64_t rows, int64_t cols, Operand& o) {
    if (x.dtype() != d || !as_operand(rows, cols, x.strides()[nd - 2], x.strides()[nd - 1], o)) {
      Tensor c = Tensor::empty(x.shape(), d, x.device());
      detail::copy_into(x, c);
      x = c;
      as_operand(rows, cols, x.strides()[nd - 2], x.strides()[nd - 1], o);
    }
  };
  Operand oa, ob;
  usable(a, M, K, oa);
  usable(b, K, N, ob);
  if (K == 0) {  // an empty sum: zeros
    check(cudaMemsetAsync(out.data_ptr(), 0, size_t(out.numel()) * out.itemsize(), stream(dev)), dev, "cudaMemsetAsync");
    return;
  }

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
}

[[maybe_unused]] const bool registered = [] {
  detail::register_kernel(OpId::Matmul, DeviceType::cuda, matmul_kernel,
                          dtype_bit(DType::float32) | dtype_bit(DType::float64) | dtype_bit(DType::float16) |
                              dtype_bit(DType::bfloat16));
  return true;
}();

}  // namespace
}  // namespace kiln::cuda
