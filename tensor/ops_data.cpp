// kiln: the Data category (concat, pad, tile, gather, index_select, one_hot,
// scatter, scatter_add, index_add, conv2d; the selection rows' shapes are
// ops_select.cpp's):
// shape/dtype rules and the eager entry point. The rules here check every
// attribute and input; the CPU kernels (backends/cpu/data_kernels.cpp) only
// move data.
#include <string>
#include <utility>
#include <vector>

#include "kernel_registry.h"
#include "index_error.h"
#include "op_table.h"
#include "ops_select.h"

namespace kiln::detail {
namespace {

std::string str(int64_t v) { return std::to_string(v); }

// One input as the rules see it (a TensorLayout or a Tensor).
struct InDesc {
  DType dtype;
  const Shape* shape;
};

// Result dtype and shape of a data op.
struct DataOut {
  DType dtype;
  Shape shape;
};

void require_index_dtype(OpId op, DType d, const char* what) {
  if (d != DType::int32 && d != DType::int64)
    throw DTypeError(op_prefix(op) + what + " must be int32 or int64, got " + std::string(name(d)));
}

// a + b for extents; ShapeError naming `op` on overflow.
int64_t add_extent(OpId op, int64_t a, int64_t b) {
  int64_t r;
  if (__builtin_add_overflow(a, b, &r)) throw ShapeError(op_prefix(op) + "result extent overflows int64");
  return r;
}

Shape concat_shape(std::span<const InDesc> in, const Attrs& a) {
  const Shape& s0 = *in[0].shape;
  const int64_t nd = static_cast<int64_t>(s0.size());
  if (nd == 0) throw ShapeError("concat: input 0 is 0-d; zero-dimensional tensors cannot be concatenated");
  const int64_t ax = normalize_axis(a.axis, nd, "concat");
  Shape r = s0;
  for (size_t i = 1; i < in.size(); ++i) {
    const Shape& s = *in[i].shape;
    if (static_cast<int64_t>(s.size()) != nd)
      throw ShapeError("concat: input " + str(i) + " has shape " + shape_str(s) + " but input 0 has shape " +
                       shape_str(s0) + " (the number of dimensions must match)");
    for (int64_t d = 0; d < nd; ++d)
      if (d != ax && s[d] != s0[d])
        throw ShapeError("concat: input " + str(i) + " has shape " + shape_str(s) + " but input 0 has shape " +
                         shape_str(s0) + " (all extents except axis " + str(ax) + " must match)");
    r[ax] = add_extent(OpId::Concat, r[ax], s[ax]);
  }
  return r;
}

Shape pad_shape(const Shape& s, const Attrs& a) {
  const std::vector<int64_t>& p = a.ints;
  if (p.size() != 2 * s.size())
    throw ValueError("pad: expected 2 pads per axis (" + str(2 * s.size()) + " for shape " + shape_str(s) + "), got " +
                     shape_str(p));
  for (int64_t v : p)
    if (v < 0) throw ValueError("pad: pads must be non-negative, got " + shape_str(p));
  Shape r = s;
  for (size_t i = 0; i < s.size(); ++i) r[i] = add_extent(OpId::Pad, add_extent(OpId::Pad, s[i], p[2 * i]), p[2 * i + 1]);
  return r;
}

// numpy.tile: the shorter of shape and reps is padded with leading 1s.
Shape tile_shape(const Shape& s, const std::vector<int64_t>& reps) {
  for (int64_t v : reps)
    if (v < 0) throw ValueError("tile: repetitions must be non-negative, got " + shape_str(reps));
  const size_t nd = std::max(s.size(), reps.size());
  Shape r(nd);
  for (size_t k = 0; k < nd; ++k) {
    const int64_t e = k < nd - s.size() ? 1 : s[k - (nd - s.size())];
    const int64_t n = k < nd - reps.size() ? 1 : reps[k - (nd - reps.size())];
    if (__builtin_mul_overflow(e, n, &r[k]))
      throw ShapeError("tile: tiling shape " + shape_str(s) + " by " + shape_str(reps) + " overflows int64");
  }
  return r;
}

Shape gather_shape(const InDesc& x, const InDesc& idx, const Attrs& a) {
  require_index_dtype(OpId::Gather, idx.dtype, "index");
  const Shape &xs = *x.shape, &is = *idx.shape;
  if (xs.size() != is.size())
    throw ShapeError("gather: index has shape " + shape_str(is) + " but x has shape " + shape_str(xs) +
                     " (the number of dimensions must match)");
  const int64_t ax = normalize_axis(a.axis, static_cast<int64_t>(xs.size()), "gather");
  Shape r(xs.size());
  for (size_t d = 0; d < xs.size(); ++d) {
    if (static_cast<int64_t>(d) == ax || xs[d] == is[d] || xs[d] == 1) r[d] = is[d];
    else if (is[d] == 1) r[d] = xs[d];
    else
      throw ShapeError("gather: index shape " + shape_str(is) + " does not broadcast against x shape " +
                       shape_str(xs) + " outside axis " + str(ax));
  }
  return r;
}

Shape index_select_shape(const InDesc& x, const InDesc& idx, const Attrs& a) {
  require_index_dtype(OpId::IndexSelect, idx.dtype, "indices");
  if (idx.shape->size() != 1)
    throw ShapeError("index_select: indices must be 1-d, got shape " + shape_str(*idx.shape));
  const int64_t ax = normalize_axis(a.axis, static_cast<int64_t>(x.shape->size()), "index_select");
  Shape r = *x.shape;
  r[ax] = (*idx.shape)[0];
  return r;
}

Shape one_hot_shape(const InDesc& idx, const Attrs& a) {
  require_index_dtype(OpId::OneHot, idx.dtype, "indices");
  if (a.axis <= 0) throw ValueError("one_hot: num_classes must be positive, got " + str(a.axis));
  Shape r = *idx.shape;
  r.push_back(a.axis);
  // The result's size, checked here to name num_classes (the allocation would say "empty").
  int64_t n = 0;
  const int64_t rows = checked_numel(*idx.shape, "one_hot");
  if (__builtin_mul_overflow(rows, a.axis, &n) || static_cast<uint64_t>(n) > SIZE_MAX / size_of(a.dtype))
    throw ShapeError("one_hot: num_classes " + str(a.axis) + " makes a result of shape " + shape_str(r) + " of " +
                     std::string(name(a.dtype)) + ", more bytes than fit in size_t");
  return r;
}

// scatter/scatter_add (x, index, src): PyTorch's rule; the result is x's shape.
Shape scatter_shape(OpId op, const InDesc& x, const InDesc& idx, const InDesc& src, const Attrs& a) {
  require_index_dtype(op, idx.dtype, "index");
  if (src.dtype != x.dtype)
    throw DTypeError(op_prefix(op) + "src has dtype " + std::string(name(src.dtype)) + " but x has dtype " +
                     std::string(name(x.dtype)) + " (they must match)");
  const Shape &xs = *x.shape, &is = *idx.shape, &ss = *src.shape;
  if (is.size() != xs.size() || ss.size() != xs.size())
    throw ShapeError(op_prefix(op) + "x " + shape_str(xs) + ", index " + shape_str(is) + " and src " + shape_str(ss) +
                     " must have the same number of dimensions");
  const int64_t ax = normalize_axis(a.axis, static_cast<int64_t>(xs.size()), op_name(op));
  for (size_t d = 0; d < xs.size(); ++d) {
    if (is[d] > ss[d])
      throw ShapeError(op_prefix(op) + "index shape " + shape_str(is) + " exceeds src shape " + shape_str(ss) +
                       " in dimension " + str(d));
    if (static_cast<int64_t>(d) != ax && is[d] > xs[d])
      throw ShapeError(op_prefix(op) + "index shape " + shape_str(is) + " exceeds x shape " + shape_str(xs) +
                       " in dimension " + str(d) + " (only dim " + str(ax) + " may be larger)");
  }
  return xs;
}

// index_add (x, 1-d index, src): src is x's shape with index.size(0) along the axis.
Shape index_add_shape(const InDesc& x, const InDesc& idx, const InDesc& src, const Attrs& a) {
  const OpId op = OpId::IndexAdd;
  require_index_dtype(op, idx.dtype, "index");
  if (src.dtype != x.dtype)
    throw DTypeError("index_add: src has dtype " + std::string(name(src.dtype)) + " but x has dtype " +
                     std::string(name(x.dtype)) + " (they must match)");
  if (idx.shape->size() != 1) throw ShapeError("index_add: index must be 1-d, got shape " + shape_str(*idx.shape));
  const Shape &xs = *x.shape, &ss = *src.shape;
  const int64_t ax = normalize_axis(a.axis, static_cast<int64_t>(xs.size()), "index_add");
  Shape want = xs;
  want[ax] = (*idx.shape)[0];
  if (ss != want)
    throw ShapeError("index_add: src has shape " + shape_str(ss) + ", expected " + shape_str(want) +
                     " (x's shape with index's length along dim " + str(ax) + ")");
  return xs;
}

// conv2d (x [N, C, H, W], weight [O, C / groups, KH, KW]); attrs.ints =
// {stride h, w, padding h, w, dilation h, w}, attrs.axis = groups.
Shape conv2d_shape(const InDesc& x, const InDesc& w, const Attrs& a) {
  const Shape &xs = *x.shape, &ws = *w.shape;
  if (xs.size() != 4) throw ShapeError("conv2d: x must be 4-d [N, C, H, W], got shape " + shape_str(xs));
  if (ws.size() != 4)
    throw ShapeError("conv2d: weight must be 4-d [C_out, C_in / groups, KH, KW], got shape " + shape_str(ws));
  if (a.ints.size() != 6)
    throw ValueError("conv2d: attrs.ints must be {stride h, w, padding h, w, dilation h, w}, got " +
                     std::to_string(a.ints.size()) + " entries");
  const int64_t groups = a.axis, c = xs[1], oc = ws[0];
  if (groups <= 0) throw ValueError("conv2d: groups must be positive, got " + str(groups));
  const std::vector<int64_t> k{ws[2], ws[3]}, st{a.ints[0], a.ints[1]}, p{a.ints[2], a.ints[3]},
      d{a.ints[4], a.ints[5]};
  for (int i = 0; i < 2; ++i) {
    if (st[i] <= 0 || d[i] <= 0)
      throw ValueError("conv2d: stride and dilation must be positive, got stride " + shape_str(st) + ", dilation " +
                       shape_str(d));
    if (p[i] < 0) throw ValueError("conv2d: padding must not be negative, got " + shape_str(p));
  }
  if (c % groups != 0 || oc % groups != 0)
    throw ShapeError("conv2d: groups " + str(groups) + " must divide the input channels " + str(c) +
                     " and the output channels " + str(oc));
  if (ws[1] != c / groups)
    throw ShapeError("conv2d: weight shape " + shape_str(ws) + " expects " + str(ws[1] * groups) +
                     " input channels (groups " + str(groups) + "), x has " + str(c) + " (shape " + shape_str(xs) + ")");
  // Overflow-checked: padding and dilation are user-given and may be huge
  // (a wrapped sum would pass the check and give a nonsense output shape).
  auto pair = [](const std::vector<int64_t>& v) { return "[" + str(v[0]) + ", " + str(v[1]) + "]"; };
  int64_t padded[2], span[2];
  for (int i = 0; i < 2; ++i) {
    if (k[i] <= 0)
      throw ShapeError("conv2d: the kernel must have positive extents, got weight shape " + shape_str(ws));
    const char* axis = i ? "width" : "height";
    int64_t twice = 0;
    if (__builtin_mul_overflow(p[i], int64_t{2}, &twice) || __builtin_add_overflow(xs[2 + i], twice, &padded[i]))
      throw ShapeError("conv2d: the padded input's " + std::string(axis) + " (" + str(xs[2 + i]) + " + 2 x " +
                       str(p[i]) + ") exceeds 2^63 - 1");
    if (__builtin_mul_overflow(d[i], k[i] - 1, &span[i]) || __builtin_add_overflow(span[i], int64_t{1}, &span[i]))
      throw ShapeError("conv2d: the kernel's " + std::string(axis) + " span (dilation " + str(d[i]) +
                       " x (kernel " + str(k[i]) + " - 1) + 1) exceeds 2^63 - 1 (x shape " + shape_str(xs) +
                       ", weight shape " + shape_str(ws) + ")");
  }
  Shape r{xs[0], oc, 0, 0};
  for (int i = 0; i < 2; ++i) {
    if (span[i] > padded[i])
      throw ShapeError("conv2d: the kernel spans " + str(span[0]) + "x" + str(span[1]) + " but the padded input is " +
                       str(padded[0]) + "x" + str(padded[1]) + " (x shape " + shape_str(xs) + ", weight shape " +
                       shape_str(ws) + ", padding " + pair(p) + ", dilation " + pair(d) + ")");
    r[2 + i] = (padded[i] - span[i]) / st[i] + 1;
  }
  return r;
}

DataOut data_out(OpId op, std::span<const InDesc> in, const Attrs& a) {
  if (in.empty()) throw ValueError(op_prefix(op) + "expected at least one tensor input, got none");
  std::vector<DType> dts(in.size());
  for (size_t i = 0; i < in.size(); ++i) dts[i] = in[i].dtype;
  DataOut o{result_dtype(op, dts, a), {}};
  switch (op) {
    case OpId::Concat: o.shape = concat_shape(in, a); break;
    case OpId::Pad: o.shape = pad_shape(*in[0].shape, a); break;
    case OpId::Tile: o.shape = tile_shape(*in[0].shape, a.ints); break;
    case OpId::Gather: o.shape = gather_shape(in[0], in[1], a); break;
    case OpId::IndexSelect: o.shape = index_select_shape(in[0], in[1], a); break;
    case OpId::OneHot: o.shape = one_hot_shape(in[0], a); break;
    case OpId::Scatter:
    case OpId::ScatterAdd: o.shape = scatter_shape(op, in[0], in[1], in[2], a); break;
    case OpId::IndexAdd: o.shape = index_add_shape(in[0], in[1], in[2], a); break;
    case OpId::Conv2d: o.shape = conv2d_shape(in[0], in[1], a); break;
    default: {
      if (!is_select_row(op)) throw ValueError(op_prefix(op) + "is not a data op");
      std::vector<const Shape*> shapes(in.size());
      for (size_t i = 0; i < in.size(); ++i) shapes[i] = in[i].shape;
      o.shape = select_row_shape(op, dts, shapes, a);  // topk, searchsorted, pools, tril/triu/diag, nan_to_num, cross
      break;
    }
  }
  checked_numel(o.shape, op_name(op));
  return o;
}

// Throws IndexError for the first index outside [-n, n), naming `op`, or
// `who` when given.
void check_axis_indices(OpId op, const Tensor& index, int64_t ax, int64_t n, const char* who = nullptr) {
  if (auto bad = device_utilities(index.device(), op_name(op).data()).first_index_outside(index, -n, n))
    detail::throw_index_out_of_range(who ? std::string_view(who) : op_name(op), *bad, ax, n);
}

// Throws IndexError naming the first index outside [-n, n) and its position
// (row-major multi-index into `index`).
void check_scatter_indices(OpId op, const Tensor& index, int64_t ax, int64_t n) {
  if (!device_utilities(index.device(), op_name(op).data()).first_index_outside(index, -n, n)) return;
  const std::vector<int64_t> v = index.to_vector<int64_t>();
  for (size_t i = 0; i < v.size(); ++i) {
    if (v[i] >= -n && v[i] < n) continue;
    Shape pos(index.shape().size());
    int64_t r = static_cast<int64_t>(i);
    for (size_t d = pos.size(); d-- > 0;) {
      pos[d] = r % index.shape()[d];
      r /= index.shape()[d];
    }
    throw IndexError(op_prefix(op) + "index " + str(v[i]) + " at position " + shape_str(pos) +
                     " is out of range for dim " + str(ax) + " with size " + str(n) + " (expected " + str(-n) +
                     " <= index < " + str(n) + ")");
  }
}

}  // namespace

TensorLayout infer_data(OpId op, std::span<const TensorLayout> in, const Attrs& attrs) {
  std::vector<InDesc> d(in.size());
  for (size_t i = 0; i < in.size(); ++i) d[i] = {in[i].dtype, &in[i].shape};
  DataOut o = data_out(op, d, attrs);
  return TensorLayout(o.dtype, std::move(o.shape), in[0].device);
}

Tensor eager_data(OpId op, std::span<const Tensor> in, const Attrs& attrs) {
  check_same_device(op, in);
  std::vector<InDesc> d(in.size());
  for (size_t i = 0; i < in.size(); ++i) {
    in[i].realize();
    d[i] = {in[i].dtype(), &in[i].shape()};
  }
  DataOut o = data_out(op, d, attrs);
  Tensor out = detail::output_tensor(o.shape, o.dtype, in[0].device());
  const Tensor& x = in[0];
  switch (op) {
    case OpId::Gather: {
      const int64_t ax = normalize_axis(attrs.axis, x.ndim(), "gather");
      check_axis_indices(op, in[1], ax, x.shape()[ax]);
      break;
    }
    case OpId::IndexSelect: {
      const int64_t ax = normalize_axis(attrs.axis, x.ndim(), "index_select");
      const Tensor& idx = in[1];
      // attrs.flag: the lookup that checks a traced index_put_'s indices
      // (tensor/indexing.cpp), whose errors name index_put_; attrs.scalar 1:
      // the one of a traced read x.index(...), whose errors name index.
      // attrs.scalar 2: embedding's lookup: ids in [0, n) only (PyTorch's
      // rule: a negative id is an error, not a row from the end).
      if (attrs.scalar == 2.0) {
        const int64_t n = x.shape()[ax];
        if (auto bad = device_utilities(idx.device(), "embedding").first_index_outside(idx, 0, n))
          throw IndexError("embedding: id " + str(*bad) + " is out of range for a weight of " + str(n) +
                           " embeddings (expected 0 <= id < " + str(n) + (*bad < 0 ? "; negative ids are refused" : "") +
                           ")");
      } else {
        check_axis_indices(op, idx, ax, x.shape()[ax],
                           attrs.flag ? "index_put_" : attrs.scalar == 1.0 ? "index" : nullptr);
      }
      // The 1-d indices as a tensor of out's rank (stride 0 elsewhere), so
      // index_select is a gather.
      Shape is(out.ndim(), 1);
      Strides ist(out.ndim(), 0);
      is[ax] = idx.shape()[0];
      ist[ax] = idx.strides()[0];
      const Tensor args[2] = {x, Tensor(idx.buffer(), idx.dtype(), std::move(is), std::move(ist), idx.offset())};
      run_kernel(op, x.dtype(), args, out, attrs);
      return out;
    }
    case OpId::Scatter:
    case OpId::ScatterAdd: {
      const int64_t ax = normalize_axis(attrs.axis, x.ndim(), op_name(op));
      check_scatter_indices(op, in[1], ax, x.shape()[ax]);
      break;
    }
    case OpId::IndexAdd: {
      const int64_t ax = normalize_axis(attrs.axis, x.ndim(), "index_add");
      const Tensor& idx = in[1];
      check_scatter_indices(op, idx, ax, x.shape()[ax]);
      // The 1-d index as a scatter index of src's shape (stride 0 off the
      // axis), so index_add is a scatter_add.
      Shape is = in[2].shape();
      Strides ist(is.size(), 0);
      ist[ax] = idx.strides()[0];
      const Tensor args[3] = {x, Tensor(idx.buffer(), idx.dtype(), std::move(is), std::move(ist), idx.offset()), in[2]};
      run_kernel(op, x.dtype(), args, out, attrs);
      return out;
    }
    case OpId::OneHot:
      if (auto bad = device_utilities(x.device(), "one_hot").first_index_outside(x, 0, attrs.axis))
        throw IndexError("one_hot: index " + str(*bad) + " is out of range for " + str(attrs.axis) +
                         " classes (expected 0 <= index < " + str(attrs.axis) + ")");
      break;
    default: break;
  }
  // Concat's inputs may differ in dtype: its kernel converts each one into
  // the result dtype as it copies.
  run_kernel(op, o.dtype, in, out, attrs);
  return out;
}

}  // namespace kiln::detail
