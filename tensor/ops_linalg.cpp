// kiln: the Linalg category (numpy.linalg): shape and dtype rules, the eager
// call into backends/cpu/linalg_kernels.cpp. The public functions are in
// tensor/linalg.cpp.
#include <string>

#include "kernel_registry.h"
#include "op_table.h"
#include "ops.h"

namespace kiln {
namespace detail {
namespace {

// The geometry of one call: batch extents (broadcast for two inputs), a's
// matrix extents m x n, b's column count k, and the result shape.
struct LinalgGeom {
  Shape batch;
  int64_t m = 0, n = 0, k = 0;
  bool b_vector = false;  // b was 1-d (numpy 2: only a 1-d b is a vector)
  Shape out;
  DType dtype = DType::float32;
};

bool square_only(OpId op) { return op != OpId::LinalgQr && op != OpId::LinalgSvd && op != OpId::LinalgLstsq; }

int outputs_of(OpId op) {
  switch (op) {
    case OpId::LinalgSlogdet:
    case OpId::LinalgQr:
    case OpId::LinalgEigh: return 2;
    case OpId::LinalgSvd: return 3;
    default: return 1;
  }
}

LinalgGeom linalg_geometry(OpId op, std::span<const Shape* const> shapes, std::span<const DType> dtypes,
                           const Attrs& attrs) {
  const std::string who = op_prefix(op);
  for (size_t i = 0; i < dtypes.size(); ++i)
    if (dtypes[i] != DType::float32 && dtypes[i] != DType::float64)
      throw DTypeError(who + "input " + std::to_string(i) + " has dtype " + std::string(name(dtypes[i])) +
                       "; linalg computes in float32 or float64 only (cast with .to(...) first)");
  const Shape& sa = *shapes[0];
  if (sa.size() < 2)
    throw ShapeError(who + "expected a matrix or a batch of matrices [..., m, n], got shape " + shape_str(sa));
  LinalgGeom g;
  g.m = sa[sa.size() - 2];
  g.n = sa[sa.size() - 1];
  if (square_only(op) && g.m != g.n)
    throw ShapeError(who + "expected square matrices, got shape " + shape_str(sa) + " (" + std::to_string(g.m) +
                     " x " + std::to_string(g.n) + ")");
  const int outs = outputs_of(op);
  if (attrs.axis < 0 || attrs.axis >= outs)
    throw ValueError(who + "output index (attrs.axis) must be in [0, " + std::to_string(outs) + "), got " +
                     std::to_string(attrs.axis));
  g.batch.assign(sa.begin(), sa.end() - 2);
  if (shapes.size() == 2) {
    const Shape& sb = *shapes[1];
    if (sb.empty()) throw ShapeError(who + "b must have at least one axis, got a 0-d tensor");
    g.b_vector = sb.size() == 1;
    const int64_t rows = g.b_vector ? sb[0] : sb[sb.size() - 2];
    if (rows != g.m)
      throw ShapeError(who + "a has shape " + shape_str(sa) + " (" + std::to_string(g.m) + " rows) but b has shape " +
                       shape_str(sb) + " (" + std::to_string(rows) + " rows)");
    g.k = g.b_vector ? 1 : sb[sb.size() - 1];
    if (!g.b_vector) {
      const Shape bb(sb.begin(), sb.end() - 2);
      try {
        g.batch = broadcast_shapes(g.batch, bb, op_name(op));
      } catch (const ShapeError&) {
        throw ShapeError(who + "batch extents " + shape_str(g.batch) + " of a and " + shape_str(bb) +
                         " of b do not broadcast");
      }
    }
  }
  const int64_t kk = std::min(g.m, g.n);
  g.out = g.batch;
  auto push = [&](std::initializer_list<int64_t> e) { g.out.insert(g.out.end(), e); };
  switch (op) {
    case OpId::LinalgSolve:
    case OpId::LinalgLstsq:
      if (g.b_vector) push({g.n});
      else push({g.n, g.k});
      break;
    case OpId::LinalgInv:
    case OpId::LinalgCholesky: push({g.n, g.n}); break;
    case OpId::LinalgDet:
    case OpId::LinalgSlogdet: break;
    case OpId::LinalgQr:
      if (attrs.axis == 0) push({g.m, attrs.flag ? g.m : kk});
      else push({attrs.flag ? g.m : kk, g.n});
      break;
    case OpId::LinalgSvd:
      if (attrs.axis == 0) push({g.m, attrs.flag ? g.m : kk});
      else if (attrs.axis == 1) push({kk});
      else push({attrs.flag ? g.n : kk, g.n});
      break;
    case OpId::LinalgEigh:
      if (attrs.axis == 0) push({g.n});
      else push({g.n, g.n});
      break;
    default: break;
  }
  checked_numel(g.out, op_name(op));
  g.dtype = result_dtype(op, dtypes, attrs);
  return g;
}

// t as [batch..., rows, cols] sharing t's storage: broadcast batch axes get
// stride 0, a 1-d t becomes one column.
Tensor batched_view(const Tensor& t, const Shape& batch, bool vector) {
  const Shape& s = t.shape();
  const Strides& st = t.strides();
  const int64_t nd = t.ndim(), nb = static_cast<int64_t>(batch.size());
  const int64_t tb = vector ? 0 : nd - 2;  // t's own batch axes
  Shape shape = batch;
  Strides strides(static_cast<size_t>(nb), 0);
  for (int64_t i = 0; i < tb; ++i)
    if (s[i] != 1) strides[nb - tb + i] = st[i];
  if (vector) {
    shape.insert(shape.end(), {s[0], 1});
    strides.insert(strides.end(), {st[0], 0});
  } else {
    shape.insert(shape.end(), {s[nd - 2], s[nd - 1]});
    strides.insert(strides.end(), {st[nd - 2], st[nd - 1]});
  }
  return Tensor(t.buffer(), t.dtype(), std::move(shape), std::move(strides), t.offset());
}

}  // namespace

TensorLayout infer_linalg(OpId op, std::span<const TensorLayout> in, const Attrs& attrs) {
  const Shape* shapes[2] = {&in[0].shape, in.size() > 1 ? &in[1].shape : nullptr};
  DType dtypes[2] = {in[0].dtype, in.size() > 1 ? in[1].dtype : in[0].dtype};
  LinalgGeom g = linalg_geometry(op, std::span<const Shape* const>(shapes, in.size()),
                                 std::span<const DType>(dtypes, in.size()), attrs);
  return TensorLayout(g.dtype, std::move(g.out), in[0].device);
}

Tensor eager_linalg(OpId op, std::span<const Tensor> in, const Attrs& attrs) {
  check_same_device(op, in);
  for (const Tensor& t : in) t.realize();
  const Shape* shapes[2] = {&in[0].shape(), in.size() > 1 ? &in[1].shape() : nullptr};
  DType dtypes[2] = {in[0].dtype(), in.size() > 1 ? in[1].dtype() : in[0].dtype()};
  const LinalgGeom g = linalg_geometry(op, std::span<const Shape* const>(shapes, in.size()),
                                       std::span<const DType>(dtypes, in.size()), attrs);
  Tensor out = output_tensor(g.out, g.dtype, in[0].device());
  if (out.numel() == 0) return out;
  // The kernel sees every input as [batch..., rows, cols] (b as a column when
  // 1-d) and the result likewise; it converts float32/float64 as it loads.
  Tensor operands[2];
  operands[0] = batched_view(in[0], g.batch, false);
  if (in.size() > 1) operands[1] = batched_view(in[1], g.batch, g.b_vector);
  Shape full = g.out;
  if (g.b_vector) full.push_back(1);
  run_kernel(op, g.dtype, std::span<const Tensor>(operands, in.size()),
             Tensor(out.buffer(), g.dtype, full, contiguous_strides(full), out.offset()), attrs);
  return out;
}

}  // namespace detail
}  // namespace kiln
