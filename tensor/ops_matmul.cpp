// kiln: the Matmul category (numpy.matmul): shape rule, eager call into
// backends/cpu/matmul.cpp, and the public function.
#include <limits>
#include <string>

#include "kernel_registry.h"
#include "op_table.h"
#include "ops.h"

namespace kiln {
namespace detail {
namespace {

// numpy.matmul's shape rule: a 1-d a is [1, K] and a 1-d b is [K, 1], the
// added axis removed from the result; leading (batch) axes broadcast.
struct MatmulGeom {
  Shape batch;
  int64_t m = 0, k = 0, n = 0;
  Shape out;
  DType dtype = DType::float32;
};

MatmulGeom matmul_geometry(const Shape& sa, const Shape& sb, DType da, DType db) {
  if (sa.empty() || sb.empty())
    throw ShapeError("matmul: operands must have at least one axis (use mul for scalars), got shapes " +
                     shape_str(sa) + " and " + shape_str(sb));
  MatmulGeom g;
  const size_t na = sa.size(), nb = sb.size();
  g.m = na == 1 ? 1 : sa[na - 2];
  g.k = sa[na - 1];
  const int64_t kb = nb == 1 ? sb[0] : sb[nb - 2];
  g.n = nb == 1 ? 1 : sb[nb - 1];
  if (g.k != kb)
    throw ShapeError("matmul: inner extents differ: a has shape " + shape_str(sa) + " (K = " + std::to_string(g.k) +
                     "), b has shape " + shape_str(sb) + " (K = " + std::to_string(kb) + ")");
  const Shape ba(sa.begin(), sa.end() - std::min<size_t>(na, 2)), bb(sb.begin(), sb.end() - std::min<size_t>(nb, 2));
  try {
    g.batch = broadcast_shapes(ba, bb, "matmul");
  } catch (const ShapeError&) {
    throw ShapeError("matmul: batch extents " + shape_str(ba) + " and " + shape_str(bb) + " of shapes " +
                     shape_str(sa) + " and " + shape_str(sb) + " do not broadcast");
  }
  g.out = g.batch;
  if (na > 1) g.out.push_back(g.m);
  if (nb > 1) g.out.push_back(g.n);
  const int64_t numel = checked_numel(g.out, "matmul");
  const DType dts[2] = {da, db};
  g.dtype = result_dtype(OpId::Matmul, dts, Attrs{});
  if (numel > static_cast<int64_t>(std::numeric_limits<int64_t>::max() / size_of(g.dtype)))
    throw ShapeError("matmul: the result " + shape_str(g.out) + " of shapes " + shape_str(sa) + " and " + shape_str(sb) +
                     " needs more bytes than memory can address");
  return g;
}

// t as [batch..., rows, cols] (1-d promoted, batch axes broadcast by stride 0),
// sharing t's storage.
Tensor as_batched(const Tensor& t, const MatmulGeom& g, bool is_a) {
  const Shape& s = t.shape();
  const Strides& st = t.strides();
  const int64_t nd = t.ndim(), nbatch = static_cast<int64_t>(g.batch.size());
  Shape shape = g.batch;
  Strides strides(static_cast<size_t>(nbatch), 0);
  for (int64_t i = 0; i < nbatch; ++i) {
    const int64_t src = i - (nbatch - std::max<int64_t>(nd - 2, 0));
    if (src >= 0 && s[src] != 1) strides[i] = st[src];
  }
  if (nd == 1) {
    shape.insert(shape.end(), {is_a ? 1 : s[0], is_a ? s[0] : 1});
    strides.insert(strides.end(), {is_a ? 0 : st[0], is_a ? st[0] : 0});
  } else {
    shape.insert(shape.end(), {s[nd - 2], s[nd - 1]});
    strides.insert(strides.end(), {st[nd - 2], st[nd - 1]});
  }
  return Tensor(t.buffer(), t.dtype(), std::move(shape), std::move(strides), t.offset());
}

}  // namespace

TensorLayout infer_matmul(OpId, std::span<const TensorLayout> in, const Attrs&) {
  MatmulGeom g = matmul_geometry(in[0].shape, in[1].shape, in[0].dtype, in[1].dtype);
  return TensorLayout(g.dtype, std::move(g.out), in[0].device);
}

Tensor eager_matmul(OpId op, std::span<const Tensor> in, const Attrs& attrs) {
  check_same_device(op, in);
  const Tensor& a = in[0].realize();
  const Tensor& b = in[1].realize();
  const MatmulGeom g = matmul_geometry(a.shape(), b.shape(), a.dtype(), b.dtype());
  Tensor out = detail::output_tensor(g.out, g.dtype, a.device());
  if (out.numel() == 0) return out;
  Shape full = g.batch;
  full.insert(full.end(), {g.m, g.n});
  const Tensor operands[2] = {as_batched(a, g, true), as_batched(b, g, false)};
  run_kernel(op, g.dtype, operands, Tensor(out.buffer(), g.dtype, full, contiguous_strides(full), out.offset()), attrs);
  return out;
}

}  // namespace detail

Tensor matmul(const Tensor& a, const Tensor& b) { return apply(OpId::Matmul, a, b); }

}  // namespace kiln
