// kiln tests: which op-table rows have a CPU kernel but no CUDA kernel, per
// compute dtype the front end can dispatch (walked from the table and the
// kernel registry; no device needed).
// The listing is printed, and pinned: a new row without a CUDA kernel fails
// here until it gets one or joins the list in docs/cuda_numerics.md.
#include <map>
#include <set>
#include <sstream>

#include "../backends/cuda/cuda_backend.h"
#include "../tensor/kernel_registry.h"
#include "test_util.h"

namespace {
using namespace kiln;
/// Whether the eager front end can call a kernel of `op` with compute dtype
/// `d`: the row's dtype rule takes d (result_dtype raises DTypeError for,
/// e.g., neg of bool), and elementwise/row Float and TrueDiv rows see
/// floats only (integer inputs are converted to float32 first; reductions
/// get the integer input itself).
bool dispatchable(OpId op, DType d) {
  const OpInfo& info = op_info(op);
  const bool converts = info.category != OpCategory::Reduce && info.category != OpCategory::Scan &&
                        (info.dtype_rule == DTypeRule::Float || info.dtype_rule == DTypeRule::TrueDiv);
  if (converts && !is_floating(d)) return false;
  std::vector<DType> in(size_t(info.arity < 1 ? 1 : info.arity), d);
  if (op == OpId::Where) in[0] = DType::bool_;
  try {
    Attrs a;
    a.dtype = d;
    result_dtype(op, in, a);
  } catch (const DTypeError&) {
    return false;
  }
  return true;
}
}  // namespace

TEST_SUITE("cuda coverage") {
  TEST_CASE("rows with a CPU kernel and no CUDA kernel (the short list of docs/cuda_numerics.md)") {
    using namespace kiln;
    if (!cuda::is_built()) {
      MESSAGE("skipped: kiln was built without CUDA");
      return;
    }
    std::map<std::string, std::set<std::string>> missing;  // op -> dtypes
    int rows = 0;
    for (int i = 0; i < kNumOps; ++i) {
      const OpId op = static_cast<OpId>(i);
      bool cpu_row = false;
      for (DType d : kt::all_dtypes()) {
        if (!detail::has_kernel(op, DeviceType::cpu, d) || !dispatchable(op, d)) continue;
        // int16/uint16/uint32/uint64 have no CUDA kernels at all (backends/cuda/dtypes.h).
        if (d == DType::int16 || d == DType::uint16 || d == DType::uint32 || d == DType::uint64) continue;
        cpu_row = true;
        if (!detail::has_kernel(op, DeviceType::cuda, d)) missing[std::string(op_name(op))].insert(std::string(name(d)));
      }
      rows += cpu_row;
    }
    std::ostringstream os;
    for (const auto& [op, dts] : missing) {
      os << op << ":";
      for (const auto& d : dts) os << " " << d;
      os << "\n";
    }
    MESSAGE("rows with a CPU kernel: " << rows << "; without a CUDA kernel (per dtype):\n" << os.str());
    CHECK(rows > 60);
    // Sort/argsort, scatter/scatter_add/index_add, conv2d (a CUDA tensor's
    // conv2d composes slices and a matmul) and the linalg rows have no CUDA
    // kernel yet; integer/bool matmul has none in cuBLASLt.
    std::set<std::string> ops;
    for (const auto& [op, dts] : missing) ops.insert(op);
    // The selection, window and matrix-structure rows (topk ... cross) have
    // CUDA kernels (backends/cuda/select.cu) for every CUDA dtype.
    CHECK(ops == std::set<std::string>{"argsort",         "conv2d",         "index_add",   "linalg_cholesky",
                                       "linalg_det",      "linalg_eigh",    "linalg_inv",  "linalg_lstsq",
                                       "linalg_qr",       "linalg_slogdet", "linalg_solve", "linalg_svd",
                                       "matmul",          "scatter",        "scatter_add", "sort"});
    for (const char* op : {"topk", "searchsorted", "max_pool2d", "avg_pool2d", "tril", "triu", "diag", "nan_to_num",
                           "cross"})
      CHECK_MESSAGE(missing.count(op) == 0, op << " must have a CUDA kernel for every CUDA dtype");
    if (missing.count("matmul"))
      for (const auto& d : missing["matmul"]) CHECK_MESSAGE(d != "float32", "matmul float32 must have a CUDA kernel");
  }
}
