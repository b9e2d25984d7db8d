// kiln: the View category (reshape, permute, broadcast_to, slice, select,
// squeeze, unsqueeze, flip): shape rules and eager kernels. An eager result
// is a view sharing the input's storage; only reshape copies, and only when
// the input's strides cannot express the new shape (numpy's rule). Views are
// on the eager hot path: no element is touched, only shape/stride vectors
// are allocated.
#include <string>
#include <vector>

#include "kernel_registry.h"
#include "op_table.h"

namespace kiln::detail {
namespace {

// Shape, element strides and element offset of a view.
struct ViewGeom {
  Shape shape;
  Strides strides;
  int64_t offset = 0;
  bool needs_copy = false;  // reshape only: no strides express the new shape
};

std::string str(int64_t v) { return std::to_string(v); }

// Marks axes named in `axes` (normalised against `nd`); a repeat is a ValueError.
std::vector<bool> axis_mask(OpId op, const std::vector<int64_t>& axes, int64_t nd) {
  std::vector<bool> mask(static_cast<size_t>(nd), false);
  for (int64_t a : axes) {
    int64_t k = normalize_axis(a, nd, op_name(op));
    if (mask[k])
      throw ValueError(op_prefix(op) + "axis " + str(k) + " appears more than once in " + shape_str(axes));
    mask[k] = true;
  }
  return mask;
}

// ---- reshape -------------------------------------------------------------------

// The target shape with its -1 resolved; throws ShapeError when the element
// counts cannot match.
Shape resolve_reshape(const Shape& from, const std::vector<int64_t>& to) {
  const int64_t n = checked_numel(from, "reshape");
  auto mismatch = [&] {
    return ShapeError("reshape: cannot reshape " + shape_str(from) + " (" + str(n) + " elements) to " + shape_str(to));
  };
  int64_t infer_at = -1, known = 1;
  for (size_t i = 0; i < to.size(); ++i) {
    if (to[i] == -1) {
      if (infer_at >= 0) throw ShapeError("reshape: only one extent may be -1, got " + shape_str(to));
      infer_at = static_cast<int64_t>(i);
    } else if (to[i] < 0) {
      throw ShapeError("reshape: invalid extent " + str(to[i]) + " in " + shape_str(to) +
                       " (extents must be >= 0, or -1 to infer one)");
    } else if (__builtin_mul_overflow(known, to[i], &known)) {
      throw mismatch();
    }
  }
  Shape r = to;
  if (infer_at >= 0) {
    // numpy refuses -1 next to a zero extent: the inferred extent is ambiguous.
    if (known == 0 || n % known != 0) throw mismatch();
    r[infer_at] = n / known;
  } else if (known != n) {
    throw mismatch();
  }
  return r;
}

// numpy's _attempt_nocopy_reshape: walks groups of old and new axes with equal
// element counts; each old group must be contiguous in itself, and the new
// axes of the group get strides that step through it. Extent-1 axes are
// ignored. Returns false when a copy is needed. Requires numel > 0.
bool reshape_strides(const Shape& os, const Strides& ost, const Shape& ns, Strides& nst) {
  Shape od;
  Strides ostr;
  for (size_t i = 0; i < os.size(); ++i)
    if (os[i] != 1) { od.push_back(os[i]); ostr.push_back(ost[i]); }
  const size_t oldnd = od.size(), newnd = ns.size();
  nst.assign(newnd, 1);
  size_t oi = 0, oj = 1, ni = 0, nj = 1;
  while (ni < newnd && oi < oldnd) {
    int64_t np = ns[ni], op = od[oi];
    while (np != op) {
      if (np < op) np *= ns[nj++];
      else op *= od[oj++];
    }
    for (size_t ok = oi; ok + 1 < oj; ++ok)
      if (ostr[ok] != od[ok + 1] * ostr[ok + 1]) return false;
    nst[nj - 1] = ostr[oj - 1];
    for (size_t nk = nj - 1; nk > ni; --nk) nst[nk - 1] = nst[nk] * ns[nk];
    ni = nj++;
    oi = oj++;
  }
  // Trailing new axes are extent 1: their stride is irrelevant, keep it tidy.
  for (size_t nk = ni; nk < newnd; ++nk) nst[nk] = 1;
  return true;
}

void reshape_geom(const Shape& s, const Strides& st, const Attrs& a, ViewGeom& g) {
  g.shape = resolve_reshape(s, a.ints);
  int64_t n = 1;
  for (int64_t d : s) n *= d;
  if (n == 0 || is_contiguous(s, st)) {
    g.strides = contiguous_strides(g.shape);
  } else if (!reshape_strides(s, st, g.shape, g.strides)) {
    g.needs_copy = true;
    g.strides = contiguous_strides(g.shape);
    g.offset = 0;
  }
}

// ---- the other views ------------------------------------------------------------

void permute_geom(const Shape& s, const Strides& st, const Attrs& a, ViewGeom& g) {
  const int64_t nd = static_cast<int64_t>(s.size());
  if (static_cast<int64_t>(a.ints.size()) != nd)
    throw ValueError("permute: expected a permutation of " + str(nd) + " axes for shape " + shape_str(s) + ", got " +
                     shape_str(a.ints));
  axis_mask(OpId::Permute, a.ints, nd);  // range and repeats
  g.shape.resize(nd);
  g.strides.resize(nd);
  for (int64_t i = 0; i < nd; ++i) {
    int64_t k = a.ints[i] < 0 ? a.ints[i] + nd : a.ints[i];
    g.shape[i] = s[k];
    g.strides[i] = st[k];
  }
}

void broadcast_geom(const Shape& s, const Strides& st, const Attrs& a, ViewGeom& g) {
  const Shape& to = a.ints;
  auto fail = [&](const std::string& why) {
    return ShapeError("broadcast_to: cannot broadcast shape " + shape_str(s) + " to " + shape_str(to) + why);
  };
  if (to.size() < s.size()) throw fail(" (the target has fewer dimensions)");
  for (int64_t d : to)
    if (d < 0) throw fail(" (negative extent in the target)");
  checked_numel(to, "broadcast_to");
  const size_t lead = to.size() - s.size();
  g.shape = to;
  g.strides.assign(to.size(), 0);
  for (size_t i = 0; i < s.size(); ++i) {
    if (s[i] == to[lead + i]) g.strides[lead + i] = st[i];
    else if (s[i] != 1) throw fail("");
  }
}

void slice_geom(const Shape& s, const Strides& st, const Attrs& a, ViewGeom& g) {
  if (a.ints.size() != 3)
    throw ValueError("slice: expected attrs.ints = {start, stop, step}, got " + shape_str(a.ints));
  const int64_t ax = normalize_axis(a.axis, static_cast<int64_t>(s.size()), "slice");
  const int64_t start = a.ints[0], stop = a.ints[1], step = a.ints[2], n = s[ax];
  if (step == 0) throw ValueError("slice: step cannot be zero");
  // The front end normalises bounds like Python's slice.indices; anything
  // else would reach outside the axis.
  const int64_t lo = step > 0 ? 0 : -1, hi = step > 0 ? n : n - 1;
  if (start < lo || start > hi || stop < lo || stop > hi)
    throw IndexError("slice: bounds start=" + str(start) + ", stop=" + str(stop) + " with step " + str(step) +
                     " are not normalised for axis " + str(ax) + " with extent " + str(n) + " (expected " + str(lo) +
                     " <= start, stop <= " + str(hi) + ")");
  int64_t len;
  if (step > 0) len = stop > start ? 1 + (stop - start - 1) / step : 0;
  else len = start > stop ? 1 - (start - stop - 1) / step : 0;  // truncation: (d-1)/step = -floor((d-1)/|step|)
  g.shape = s;
  g.strides = st;
  g.shape[ax] = len;
  if (len > 0) g.offset += start * st[ax];
  if (len > 1) g.strides[ax] = st[ax] * step;  // |step| < n here, so this fits
}

void select_geom(const Shape& s, const Strides& st, const Attrs& a, ViewGeom& g) {
  if (a.ints.size() != 1) throw ValueError("select: expected attrs.ints = {index}, got " + shape_str(a.ints));
  const int64_t ax = normalize_axis(a.axis, static_cast<int64_t>(s.size()), "select");
  const int64_t n = s[ax];
  int64_t idx = a.ints[0];
  if (idx < -n || idx >= n)
    throw IndexError("select: index " + str(idx) + " is out of range for axis " + str(ax) + " with extent " + str(n));
  if (idx < 0) idx += n;
  g.offset += idx * st[ax];
  g.shape = s;
  g.strides = st;
  g.shape.erase(g.shape.begin() + ax);
  g.strides.erase(g.strides.begin() + ax);
}

void squeeze_geom(const Shape& s, const Strides& st, const Attrs& a, ViewGeom& g) {
  const int64_t nd = static_cast<int64_t>(s.size());
  std::vector<bool> drop;
  if (a.ints.empty()) {
    drop.resize(nd);
    for (int64_t i = 0; i < nd; ++i) drop[i] = s[i] == 1;
  } else {
    drop = axis_mask(OpId::Squeeze, a.ints, nd);
    for (int64_t i = 0; i < nd; ++i)
      if (drop[i] && s[i] != 1)
        throw ShapeError("squeeze: cannot squeeze axis " + str(i) + " with extent " + str(s[i]) + " (shape " +
                         shape_str(s) + ")");
  }
  for (int64_t i = 0; i < nd; ++i)
    if (!drop[i]) { g.shape.push_back(s[i]); g.strides.push_back(st[i]); }
}

void unsqueeze_geom(const Shape& s, const Strides& st, const Attrs& a, ViewGeom& g) {
  const int64_t nd = static_cast<int64_t>(s.size());
  if (a.axis < -nd - 1 || a.axis > nd)
    throw IndexError("unsqueeze: axis " + str(a.axis) + " is out of range for a " + str(nd) + "-d tensor (expected " +
                     str(-nd - 1) + " <= axis <= " + str(nd) + ")");
  const int64_t ax = a.axis < 0 ? a.axis + nd + 1 : a.axis;
  // The new axis has extent 1, so its stride is never used; pick the one a
  // contiguous tensor would have (as PyTorch does).
  int64_t stride = 1;
  if (ax < nd && __builtin_mul_overflow(st[ax], s[ax] > 0 ? s[ax] : 1, &stride)) stride = 1;
  g.shape = s;
  g.strides = st;
  g.shape.insert(g.shape.begin() + ax, 1);
  g.strides.insert(g.strides.begin() + ax, stride);
}

void flip_geom(const Shape& s, const Strides& st, const Attrs& a, ViewGeom& g) {
  const int64_t nd = static_cast<int64_t>(s.size());
  std::vector<bool> flip = a.ints.empty() ? std::vector<bool>(nd, true) : axis_mask(OpId::Flip, a.ints, nd);
  g.shape = s;
  g.strides = st;
  for (int64_t i = 0; i < nd; ++i) {
    if (!flip[i] || s[i] == 0) continue;
    g.offset += (s[i] - 1) * st[i];
    g.strides[i] = -st[i];
  }
}

// The view of a tensor with shape `s`, strides `st` and offset `off`.
ViewGeom view_geometry(OpId op, const Shape& s, const Strides& st, int64_t off, const Attrs& a) {
  ViewGeom g;
  g.offset = off;
  switch (op) {
    case OpId::Reshape: reshape_geom(s, st, a, g); break;
    case OpId::Permute: permute_geom(s, st, a, g); break;
    case OpId::BroadcastTo: broadcast_geom(s, st, a, g); break;
    case OpId::Slice: slice_geom(s, st, a, g); break;
    case OpId::Select: select_geom(s, st, a, g); break;
    case OpId::Squeeze: squeeze_geom(s, st, a, g); break;
    case OpId::Unsqueeze: unsqueeze_geom(s, st, a, g); break;
    case OpId::Flip: flip_geom(s, st, a, g); break;
    default: throw ValueError(op_prefix(op) + "is not a view op");
  }
  return g;
}

}  // namespace

bool view_strides(OpId op, const Shape& shape, const Strides& strides, const Attrs& attrs, Shape& out_shape,
                  Strides& out_strides) {
  ViewGeom g = view_geometry(op, shape, strides, 0, attrs);
  out_shape = std::move(g.shape);
  out_strides = g.needs_copy ? contiguous_strides(out_shape) : std::move(g.strides);
  return !g.needs_copy;
}

TensorLayout infer_view(OpId op, std::span<const TensorLayout> in, const Attrs& attrs) {
  const TensorLayout& x = in[0];
  ViewGeom g = view_geometry(op, x.shape, contiguous_strides(x.shape), 0, attrs);
  return TensorLayout(x.dtype, std::move(g.shape), x.device);
}

Tensor eager_view(OpId op, std::span<const Tensor> in, const Attrs& attrs) {
  const Tensor& x = in[0];
  x.realize();
  const TensorImpl& im = x.impl();
  ViewGeom g = view_geometry(op, im.shape, im.strides, im.offset, attrs);
  // An empty view reads nothing: keep the input's offset so that no pointer
  // outside the storage is ever formed (flip/select of an empty tensor).
  for (int64_t d : g.shape)
    if (d == 0) { g.offset = im.offset; break; }
  if (!g.needs_copy) return Tensor(im.storage, im.dtype, std::move(g.shape), std::move(g.strides), g.offset);
  // Reshape that no strides can express: copy in row-major order. The copy
  // is written through a view of the result with the input's shape (at the
  // result's offset: a compiled plan's destination may lie inside its arena).
  Tensor out = detail::output_tensor(g.shape, im.dtype, im.device);
  Tensor as_input(out.buffer(), im.dtype, im.shape, contiguous_strides(im.shape), out.offset());
  copy_into(x, as_input);
  return out;
}

}  // namespace kiln::detail
