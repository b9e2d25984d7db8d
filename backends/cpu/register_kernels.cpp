// Registers the CPU kernels into tensor/'s kernel registry, one entry per
// op-table row, when libkiln is loaded. Each adapter unpacks KernelArgs for
// the kernel family of its category; the front end (tensor/ops_*.cpp) has
// done every check and conversion already.
#include <bit>
#include <vector>

#include "../../tensor/kernel_registry.h"
#include "../../tensor/shape.h"
#include "copy.h"
#include "data_kernels.h"
#include "elementwise_kernels.h"
#include "linalg_kernels.h"
#include "matmul.h"
#include "reduce_kernels.h"
#include "rownorm_kernels.h"
#include "select_kernels.h"

namespace kiln::cpu {
namespace {

void unary(const KernelArgs& k) {
  if (k.op == OpId::Cast) copy_into(k.in[0], k.out);
  else unary_kernel(k.op, k.in[0], k.out);
}

void binary(const KernelArgs& k) { binary_kernel(k.op, k.in[0], k.in[1], k.out); }

void ternary(const KernelArgs& k) { ternary_kernel(k.op, k.in[0], k.in[1], k.in[2], k.out); }

// attrs.ints = axes (validated by the front end; empty = all).
void reduction(const KernelArgs& k) {
  const int64_t nd = k.in[0].ndim();
  std::vector<bool> reduced(static_cast<size_t>(nd), k.attrs.ints.empty());
  for (int64_t ax : k.attrs.ints) reduced[static_cast<size_t>(ax < 0 ? ax + nd : ax)] = true;
  reduce(k.op, k.in[0], reduced, k.attrs.scalar, k.out);
}

void scan(const KernelArgs& k) {
  const int64_t axis = normalize_axis(k.attrs.axis, k.in[0].ndim(), "scan");
  switch (k.op) {
    case OpId::CumProd: cumprod(k.in[0], axis, k.out); break;
    case OpId::Sort:
    case OpId::ArgSort: sort(k.in[0], axis, k.attrs.flag, k.op == OpId::ArgSort, k.out); break;
    default: cumsum(k.in[0], axis, k.out); break;
  }
}

// Softmax rows along attrs.axis; norms over the last axis with
// attrs.ints = {has_weight, has_bias} selecting the optional inputs.
void rownorm(const KernelArgs& k) {
  const Tensor& x = k.in[0];
  if (k.op == OpId::Softmax || k.op == OpId::LogSoftmax) {
    softmax(x, normalize_axis(k.attrs.axis, x.ndim(), "softmax"), k.op == OpId::LogSoftmax, k.out);
    return;
  }
  const Tensor w = k.attrs.ints[0] ? k.in[1] : Tensor();
  const Tensor b = k.attrs.ints[1] ? k.in[1 + k.attrs.ints[0]] : Tensor();
  layer_norm(x, w, b, k.attrs.scalar, k.op == OpId::RmsNorm, k.out);
}

// The front end passes both operands and out as batched 3-d-or-more views
// with broadcast batch strides.
void gemm_row(const KernelArgs& k) { matmul(k.in[0], k.in[1], k.out); }

void data(const KernelArgs& k) {
  const Tensor& x = k.in[0];
  switch (k.op) {
    case OpId::Concat: concat_into(k.out, k.in, normalize_axis(k.attrs.axis, x.ndim(), "concat")); break;
    case OpId::Pad: pad_into(k.out, x, k.attrs.ints, k.attrs.scalar); break;
    case OpId::Tile: {
      // reps padded with leading 1s to the result's rank
      std::vector<int64_t> reps(k.out.ndim() - k.attrs.ints.size(), 1);
      reps.insert(reps.end(), k.attrs.ints.begin(), k.attrs.ints.end());
      tile_into(k.out, x, reps);
      break;
    }
    // index_select's indices arrive shaped as a gather index (stride 0
    // off the axis).
    case OpId::Gather:
    case OpId::IndexSelect: gather_into(k.out, x, normalize_axis(k.attrs.axis, x.ndim(), "gather"), k.in[1]); break;
    case OpId::OneHot: one_hot_into(k.out, x, k.attrs.axis); break;
    // index_add's index arrives shaped as a scatter index (stride 0 off the axis).
    case OpId::Scatter:
    case OpId::ScatterAdd:
    case OpId::IndexAdd:
      scatter_into(k.out, x, normalize_axis(k.attrs.axis, x.ndim(), "scatter"), k.in[1], k.in[2],
                   k.op != OpId::Scatter);
      break;
    case OpId::Conv2d: conv2d_into(k.out, x, k.in[1], k.attrs.ints, k.attrs.axis); break;
    case OpId::TopK:
      topk_into(k.out, x, k.attrs.ints[0], normalize_axis(k.attrs.axis, x.ndim(), "topk"), k.attrs.flag);
      break;
    case OpId::SearchSorted: searchsorted_into(k.out, x, k.in[1], k.attrs.flag); break;
    case OpId::MaxPool2d: max_pool2d_into(k.out, x, k.attrs.ints); break;
    case OpId::AvgPool2d: avg_pool2d_into(k.out, x, k.attrs.ints, k.attrs.flag); break;
    case OpId::Tril:
    case OpId::Triu: triangle_into(k.out, x, k.attrs.axis, k.op == OpId::Tril); break;
    case OpId::Diag: diag_into(k.out, x, k.attrs.axis); break;
    case OpId::NanToNum:
      nan_to_num_into(k.out, x, k.attrs.scalar, std::bit_cast<double>(k.attrs.ints[0]),
                      std::bit_cast<double>(k.attrs.ints[1]));
      break;
    case OpId::Cross: cross_into(k.out, x, k.in[1], normalize_axis(k.attrs.axis, k.out.ndim(), "cross")); break;
    default: break;
  }
}

Kernel kernel_of(OpCategory c) {
  switch (c) {
    case OpCategory::Unary: return unary;
    case OpCategory::Binary: return binary;
    case OpCategory::Ternary: return ternary;
    case OpCategory::Reduce: return reduction;
    case OpCategory::Scan: return scan;
    case OpCategory::RowNorm: return rownorm;
    case OpCategory::Matmul: return gemm_row;
    case OpCategory::Data: return data;
    case OpCategory::Linalg: return linalg;
    case OpCategory::View: return nullptr;  // views are metadata; a copying reshape is a Cast
  }
  return nullptr;
}

[[maybe_unused]] const bool registered = [] {
  for (int i = 0; i < kNumOps; ++i) {
    const OpId op = static_cast<OpId>(i);
    if (Kernel k = kernel_of(op_info(op).category)) detail::register_kernel(op, DeviceType::cpu, k);
  }
  DeviceUtilities u;
  u.any_zero = [](const Tensor& t) { return any_element(t, ElementTest::zero); };
  u.any_negative = [](const Tensor& t) { return any_element(t, ElementTest::negative); };
  u.first_index_outside = first_index_outside;
  u.blas_name = gemm_backend;
  detail::register_device_utilities(DeviceType::cpu, u);
  return true;
}();

}  // namespace
}  // namespace kiln::cpu
