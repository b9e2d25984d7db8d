// kiln: numpy indexing (tensor/indexing.h). Basic indices are views built
// from the View rows (select, slice, unsqueeze); advanced indices are one
// index_select of the indexed axes flattened, and writes through them one
// scatter, so indexing runs eagerly, traced and compiled like those rows.
#include "indexing.h"

#include <string>
#include <string_view>

#include "creation.h"
#include "index_error.h"
#include "kernel_registry.h"
#include "mutation.h"
#include "op_table.h"
#include "ops.h"
#include "sorting.h"
#include "sorting_detail.h"

namespace kiln {
namespace {

std::string str(int64_t v) { return std::to_string(v); }

// An advanced index: an integer tensor for axis `dim` of the basic view
// (`axis`: the axis of x it came from, for messages).
struct Advanced {
  int64_t dim;
  int64_t axis;
  Tensor index;
};

// The indices applied: the basic view, then the advanced indices into it.
struct Plan {
  Tensor view;
  std::vector<Advanced> adv;
};

int64_t checked_int(int64_t i, int64_t n, int64_t axis) {
  if (i < -n || i >= n) detail::throw_index_out_of_range("index", i, axis, n);
  return i < 0 ? i + n : i;
}

Plan basic(const Tensor& x, const std::vector<TensorIndex>& indices) {
  using K = TensorIndex::Kind;
  bool any_tensor = false;
  int64_t consumed = 0, ellipses = 0;
  for (const TensorIndex& i : indices) {
    switch (i.kind()) {
      case K::integer:
      case K::slice: ++consumed; break;
      case K::tensor: {
        const Tensor& t = i.tensor();
        if (!t.defined()) throw ValueError("index: an index tensor is undefined");
        any_tensor = true;
        consumed += t.dtype() == DType::bool_ ? t.ndim() : 1;
        break;
      }
      case K::ellipsis: ++ellipses; break;
      case K::none: break;
    }
  }
  if (ellipses > 1) throw IndexError("index: an index can only have a single ellipsis (Ellipsis), got " + str(ellipses));
  if (consumed > x.ndim())
    throw IndexError("index: too many indices for a tensor of dimension " + str(x.ndim()) + " (got " + str(consumed) +
                     ")");
  Plan p{x, {}};
  int64_t dim = 0, axis = 0;  // position in the view, axis of x
  for (const TensorIndex& i : indices) {
    switch (i.kind()) {
      case K::integer: {
        const int64_t k = checked_int(i.integer(), p.view.shape()[dim], axis);
        if (any_tensor) {  // numpy: an integer among index tensors is a 0-d index tensor
          p.adv.push_back({dim++, axis, full({}, k, DType::int64)});
        } else {
          p.view = select(p.view, dim, k);
        }
        ++axis;
        break;
      }
      case K::slice: {
        const Slice& s = i.slice();
        if (s.step == 0) throw ValueError("index: slice step cannot be zero (axis " + str(axis) + ")");
        p.view = slice(p.view, dim++, s.start, s.stop, s.step);
        ++axis;
        break;
      }
      case K::none: p.view = unsqueeze(p.view, dim++); break;
      case K::ellipsis: {
        const int64_t k = x.ndim() - consumed;
        dim += k;
        axis += k;
        break;
      }
      case K::tensor: {
        const Tensor& t = i.tensor();
        if (t.dtype() == DType::bool_) {
          if (t.ndim() == 0) throw IndexError("index: a 0-d bool index is not supported (use where or masked_fill)");
          for (int64_t j = 0; j < t.ndim(); ++j)
            if (t.shape()[j] != p.view.shape()[dim + j])
              throw IndexError("index: boolean index did not match the indexed tensor along axis " + str(axis + j) +
                               "; size of axis is " + str(p.view.shape()[dim + j]) +
                               " but size of corresponding boolean axis is " + str(t.shape()[j]));
          const std::vector<Tensor> nz = detail::bool_index_positions(t);
          for (int64_t j = 0; j < t.ndim(); ++j) p.adv.push_back({dim++, axis++, nz[j]});
        } else {
          if (t.dtype() != DType::int32 && t.dtype() != DType::int64)
            throw IndexError("index: tensors used as indices must be int32, int64 or bool, got " +
                             std::string(name(t.dtype())) + " (axis " + str(axis) + ")");
          p.adv.push_back({dim++, axis++, t});
        }
        break;
      }
    }
  }
  return p;
}

// a's index normalised to [0, n) as int64; errors name `who` ("index" for a
// read, "index_put_" for a write). A realized index is checked here; a
// traced one (its values known only when the compiled function runs) is
// looked up in arange(n) laid along axis a.axis of a dummy, so that the
// index_select that checks it names the axis of x that it indexes (and,
// with attrs.flag set, index_put_, with attrs.scalar 1, index, rather than
// index_select: ops_data.cpp).
Tensor normalised(const Advanced& a, int64_t n, const char* who) {
  if (!a.index.is_realized()) {
    Shape s(static_cast<size_t>(a.axis), 1);
    s.push_back(n);
    const Tensor lut = reshape(arange(n, DType::int64), s);
    Attrs at;
    at.axis = a.axis;
    at.flag = std::string_view(who) == "index_put_";
    at.scalar = std::string_view(who) == "index" ? 1.0 : 0.0;  // the lookup of a read: its errors name index
    const Tensor r = apply(OpId::IndexSelect, lut, reshape(a.index, {a.index.numel()}), at);
    return reshape(r, a.index.shape());
  }
  if (auto bad = detail::device_utilities(a.index.device(), "index").first_index_outside(a.index, -n, n))
    detail::throw_index_out_of_range(who, *bad, a.axis, n);  // as the compiled check (ops_data.cpp) words it
  const Tensor t = a.index.dtype() == DType::int64 ? a.index : cast(a.index, DType::int64);
  return where(t < 0, t + n, t);
}

// view[adv...]: the advanced indices applied to the basic view (a copy).
Tensor advanced(const Tensor& view, const std::vector<Advanced>& adv, const char* who = "index") {
  const int64_t nd = view.ndim(), k = static_cast<int64_t>(adv.size());
  Shape b;  // the broadcast shape of the index tensors
  std::vector<bool> is_adv(nd, false);
  bool adjacent = true;
  for (int64_t j = 0; j < k; ++j) {
    const Advanced& a = adv[j];
    b = j == 0 ? a.index.shape() : broadcast_shapes(b, a.index.shape(), "index");
    is_adv[a.dim] = true;
    adjacent = adjacent && a.dim == adv[0].dim + j;
  }
  Tensor flat;  // row-major position among the indexed axes, shape b
  Shape rest;
  std::vector<int64_t> perm;
  for (int64_t j = 0; j < k; ++j) {
    const Advanced& a = adv[j];
    const int64_t n = view.shape()[a.dim];
    perm.push_back(a.dim);
    flat = j == 0 ? normalised(a, n, who) : flat * n + normalised(a, n, who);
  }
  int64_t extent = 1;  // of the indexed axes together
  for (int64_t j = 0; j < k; ++j) extent *= view.shape()[adv[j].dim];
  Shape zs{extent};
  for (int64_t d = 0; d < nd; ++d)
    if (!is_adv[d]) {
      perm.push_back(d);
      rest.push_back(view.shape()[d]);
      zs.push_back(view.shape()[d]);
    }
  const Tensor z = reshape(permute(view, perm), zs);
  Tensor r = index_select(z, 0, reshape(broadcast_to(flat, b), {checked_numel(b, "index")}));
  Shape rs = b;
  rs.insert(rs.end(), rest.begin(), rest.end());
  r = reshape(r, rs);
  const int64_t at = adv[0].dim, nb = static_cast<int64_t>(b.size());
  if (adjacent && at > 0) {  // b's axes go where the indexed axes were
    std::vector<int64_t> back;
    for (int64_t d = 0; d < at; ++d) back.push_back(nb + d);
    for (int64_t d = 0; d < nb; ++d) back.push_back(d);
    for (int64_t d = at; d < static_cast<int64_t>(rest.size()); ++d) back.push_back(nb + d);
    r = permute(r, back);
  }
  return r;
}

int kind_rank(DType d) { return d == DType::bool_ ? 0 : is_floating(d) ? 2 : 1; }

}  // namespace

Tensor index(const Tensor& x, const std::vector<TensorIndex>& indices) {
  if (!x.defined()) throw ValueError("index: the indexed tensor is undefined");
  Plan p = basic(x, indices);
  return p.adv.empty() ? p.view : advanced(p.view, p.adv);
}

const Tensor& index_put_(const Tensor& x, const std::vector<TensorIndex>& indices, const Tensor& values) {
  if (!values.defined()) throw ValueError("index_put_: the value is an undefined tensor");
  Plan p = basic(x, indices);
  // Eagerly, basic indices write through the view. A traced x is written as
  // a whole (one scatter, recorded), since a write through a view of a traced
  // tensor cannot be (tensor/mutation.h).
  const bool whole = !x.is_realized();
  if (p.adv.empty() && !whole) {
    p.view.copy_(values);
    return x;
  }
  const Tensor& dst = whole ? x : p.view;
  // The position (row-major, in dst) of every element of the indexed result:
  // the same indices applied to 0, 1, 2, ...; then one scatter.
  const Tensor iota = reshape(arange(dst.numel(), DType::int64), dst.shape());
  Tensor pos;
  if (!whole) {
    pos = advanced(iota, p.adv, "index_put_");
  } else {
    Plan q = basic(iota, indices);
    pos = q.adv.empty() ? q.view : advanced(q.view, q.adv, "index_put_");
  }
  if (kind_rank(values.dtype()) > kind_rank(x.dtype()))
    throw DTypeError("index_put_: cannot write " + std::string(name(values.dtype())) + " values into a " +
                     std::string(name(x.dtype())) + " tensor with same_kind casting");
  Shape fits;
  try {
    fits = broadcast_shapes(values.shape(), pos.shape(), "index_put_");
  } catch (const ShapeError&) {
    fits.clear();
  }
  if (fits != pos.shape())
    throw ShapeError("index_put_: a value of shape " + shape_str(values.shape()) +
                     " cannot be broadcast to the indexed shape " + shape_str(pos.shape()));
  const int64_t m = pos.numel();
  const Tensor v = values.dtype() == x.dtype() ? values : cast(values, x.dtype());
  const Tensor written = scatter(reshape(dst, {dst.numel()}), 0, reshape(pos, {m}),
                                 reshape(broadcast_to(v, pos.shape()), {m}));
  Tensor nv = reshape(written, dst.shape());
  // Traced, a reshape is a view: x would then stand for a view value and the
  // next write into it would be refused. A same-dtype Cast is a copy.
  if (whole) {
    Attrs a;
    a.dtype = dst.dtype();
    nv = apply(OpId::Cast, nv, a);
  }
  dst.copy_(nv);
  return x;
}

IndexedTensor Tensor::operator[](int64_t i) const {
  if (!defined()) throw ValueError("index: the indexed tensor is undefined");
  if (ndim() == 0) throw IndexError("index: a 0-d tensor cannot be indexed (it has no axis 0)");
  return IndexedTensor(kiln::select(*this, 0, checked_int(i, shape()[0], 0)), *this, {TensorIndex(i)});
}

IndexedTensor Tensor::index(std::initializer_list<TensorIndex> indices) const {
  return index(std::vector<TensorIndex>(indices));
}
IndexedTensor Tensor::index(const std::vector<TensorIndex>& indices) const {
  return IndexedTensor(kiln::index(*this, indices), *this, indices);
}
const Tensor& Tensor::index_put_(std::initializer_list<TensorIndex> indices, const Tensor& values) const {
  return kiln::index_put_(*this, std::vector<TensorIndex>(indices), values);
}
const Tensor& Tensor::index_put_(std::initializer_list<TensorIndex> indices, Scalar value) const {
  return kiln::index_put_(*this, std::vector<TensorIndex>(indices), scalar_tensor(value, dtype()));
}

const Tensor& IndexedTensor::assign(const Tensor& v) const { return kiln::index_put_(base_, indices_, v); }
const Tensor& IndexedTensor::assign(Scalar v) const { return assign(scalar_tensor(v, base_.dtype())); }

// x[...] op= v: the value computed from this (x[...] as it is) written back
// through the indices.
const Tensor& operator+=(IndexedTensor&& a, const Tensor& b) { return a.assign(add(a, b)); }
const Tensor& operator-=(IndexedTensor&& a, const Tensor& b) { return a.assign(sub(a, b)); }
const Tensor& operator*=(IndexedTensor&& a, const Tensor& b) { return a.assign(mul(a, b)); }
const Tensor& operator/=(IndexedTensor&& a, const Tensor& b) { return a.assign(div(a, b)); }
const Tensor& operator+=(IndexedTensor&& a, Scalar b) { return a.assign(add(a, b)); }
const Tensor& operator-=(IndexedTensor&& a, Scalar b) { return a.assign(sub(a, b)); }
const Tensor& operator*=(IndexedTensor&& a, Scalar b) { return a.assign(mul(a, b)); }
const Tensor& operator/=(IndexedTensor&& a, Scalar b) { return a.assign(div(a, b)); }

}  // namespace kiln
