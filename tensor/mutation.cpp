// In-place writes: copy_, fill_, the `_` variant of every elementwise row,
// compound assignment, `out=` overloads and index_put_ (rules in
// tensor/mutation.h). Every write computes its value out of place (through
// the current context, so it is recorded when tracing) and then either copies
// it into the destination's memory (eager) or rebinds the destination to it
// (functional, see trace/realization_context.cpp). Computing first is what
// makes overlapping operands safe and an in-place op equal, bit for bit, to
// its out-of-place row.
#include "mutation.h"

#include <string>

#include "creation.h"
#include "index_error.h"
#include "kernel_registry.h"
#include "op_table.h"
#include "realize_hook.h"

namespace kiln {

namespace {

int kind_rank(DType d) { return d == DType::bool_ ? 0 : is_floating(d) ? 2 : 1; }

void check_cast(DType from, DType to, Casting c, const std::string& who) {
  if (c == Casting::unsafe || from == to || kind_rank(from) <= kind_rank(to)) return;
  throw DTypeError(who + ": cannot write a " + std::string(name(from)) + " value into a " + std::string(name(to)) +
                   " tensor with same_kind casting (an in-place write never changes the destination's dtype); cast "
                   "the value first, or pass Casting::unsafe");
}

void check_fits(const Shape& from, const Shape& to, const std::string& who) {
  if (from == to) return;
  bool ok = from.size() <= to.size();
  for (size_t i = 0; ok && i < from.size(); ++i) {
    const int64_t f = from[from.size() - 1 - i], t = to[to.size() - 1 - i];
    ok = f == t || f == 1;
  }
  if (!ok)
    throw ShapeError(who + ": a value of shape " + shape_str(from) + " does not broadcast to the destination's shape " +
                     shape_str(to) + " (an in-place write never changes the destination's shape)");
}

// A destination whose elements share memory (stride 0 on an axis of extent
// > 1, a broadcast view) has no well-defined result.
void check_writable(const Tensor& dst, const std::string& who) {
  const Shape& s = dst.shape();
  const Strides& st = dst.strides();
  for (size_t i = 0; i < s.size(); ++i)
    if (s[i] > 1 && st[i] == 0)
      throw ValueError(who + ": the destination (shape " + shape_str(s) + ") is a broadcast view whose elements share "
                       "memory (stride 0 on axis " + std::to_string(i) + "); write into a tensor of its own, e.g. "
                       "x.clone()");
}

// Byte range [lo, hi) that a realized, non-empty tensor's elements span in its buffer.
std::pair<int64_t, int64_t> byte_span(const Tensor& t) {
  int64_t lo = t.offset(), hi = t.offset();
  const Shape& s = t.shape();
  const Strides& st = t.strides();
  for (size_t i = 0; i < s.size(); ++i) {
    const int64_t d = st[i] * (s[i] - 1);
    (d < 0 ? lo : hi) += d;
  }
  const int64_t w = static_cast<int64_t>(t.itemsize());
  return {lo * w, (hi + 1) * w};
}

// A realized view of t broadcast to `shape` (stride 0 on new/size-1 axes), sharing t's memory.
Tensor broadcast_view(const Tensor& t, const Shape& shape) {
  if (t.shape() == shape) return t;
  Strides st(shape.size(), 0);
  const size_t lead = shape.size() - t.shape().size();
  for (size_t i = 0; i < t.shape().size(); ++i)
    if (t.shape()[i] != 1) st[lead + i] = t.strides()[i];
  return Tensor(t.buffer(), t.dtype(), shape, std::move(st), t.offset());
}

// Copies value (realized, fits dst) into dst's memory and counts the write.
void eager_store(const Tensor& dst, Tensor value, const std::string& who) {
  check_writable(dst, who);
  value.realize();
  if (dst.numel() == 0) return;
  // A value sharing memory with dst (e.g. x.copy_(flip(x)), a view) is read
  // whole before any element is written.
  if (may_share_memory(value, dst) && !(value.buffer() == dst.buffer() && value.offset() == dst.offset() &&
                                        value.shape() == dst.shape() && value.strides() == dst.strides()))
    value = value.clone();
  detail::before_memory_write(dst.buffer());
  detail::copy_into(broadcast_view(value, dst.shape()), dst);
  dst.buffer().bump_version();
}

// Writes `value` into dst in `mode` (checks shared by every writer).
void store(const Tensor& dst, const Tensor& value, Casting casting, detail::WriteMode mode, const std::string& who) {
  check_fits(value.shape(), dst.shape(), who);
  check_cast(value.dtype(), dst.dtype(), casting, who);
  if (mode == detail::WriteMode::eager) return eager_store(dst, value, who);
  Tensor v = value.shape() == dst.shape() ? value : broadcast_to(value, dst.shape());
  if (v.dtype() != dst.dtype()) v = cast(v, dst.dtype());
  detail::functional_write(dst, v);
}

// The mode of a write and, for an eager write inside a lazy scope, the eager
// context its value is computed in.
class WriteScope {
 public:
  WriteScope(const Tensor& dst, const std::string& who) {
    if (!dst.defined()) throw ValueError(who + ": the destination is an undefined tensor");
    // Fast path: a realized tensor in the built-in eager context.
    if (dst.is_realized() && detail::active_context() == nullptr) return;
    mode = detail::begin_write(dst, who.c_str());
    if (mode == detail::WriteMode::eager && detail::active_context() != nullptr) guard_.emplace();
  }
  detail::WriteMode mode = detail::WriteMode::eager;

 private:
  std::optional<detail::EagerGuard> guard_;
};

// dst = compute() with the write rules; returns dst.
template <class F>
const Tensor& inplace(const Tensor& dst, const std::string& who, Casting casting, F&& compute) {
  WriteScope ws(dst, who);
  Tensor v = compute();
  store(dst, v, casting, ws.mode, who);
  return dst;
}

// t op s with s weak, exactly as the out-of-place scalar overloads compute it.
Tensor with_scalar(OpId op, const Tensor& t, Scalar s) {
  Tensor st = scalar_tensor(s, t.dtype());
  return apply(op, st.dtype() == t.dtype() ? t : cast(t, st.dtype()), st);
}

// `out=`: computes straight into out when that is safe and the kernels can
// (a contiguous out of the result's layout overlapping no operand), else
// into a temporary that is then stored. Not even an operand that is exactly
// out's own view is allowed: some eager kernels (exp, gelu, silu) make more
// than one pass and would read what they wrote (the op-table walk shows it).
template <class F>
Tensor compute_out(const Out& out, std::initializer_list<const Tensor*> operands, const std::string& who, F&& compute) {
  const Tensor& dst = out.tensor;
  WriteScope ws(dst, who);
  // An unrealized operand (a lazy result, in or after its kiln::lazy() scope)
  // is realized before out's memory is offered to the kernels: realized
  // inside ScopedOutput, its own graph's result would be computed into out's
  // memory (the operand then aliasing out, and reading back out's new
  // value), and the overlap test below needs its memory.
  if (ws.mode == detail::WriteMode::eager)
    for (const Tensor* t : operands)
      if (t->defined() && t->impl().state) [[unlikely]]
        t->realize();
  bool direct = ws.mode == detail::WriteMode::eager && dst.is_contiguous();
  for (const Tensor* t : operands) direct = direct && !may_share_memory(*t, dst);
  Tensor v;
  if (direct) {
    check_writable(dst, who);
    detail::before_memory_write(dst.buffer());
    detail::ScopedOutput so(dst);
    v = compute();
  } else {
    v = compute();
  }
  if (direct && v.is_realized() && v.buffer() == dst.buffer() && v.offset() == dst.offset() &&
      v.shape() == dst.shape() && v.dtype() == dst.dtype()) {
    dst.buffer().bump_version();
    return dst;
  }
  store(dst, v, out.casting, ws.mode, who);
  return dst;
}

}  // namespace

bool may_share_memory(const Tensor& a, const Tensor& b) {
  if (!a.defined() || !b.defined() || !a.is_realized() || !b.is_realized()) return false;
  if (!(a.buffer() == b.buffer()) || a.numel() == 0 || b.numel() == 0) return false;
  const auto [alo, ahi] = byte_span(a);
  const auto [blo, bhi] = byte_span(b);
  return alo < bhi && blo < ahi;
}

// ---- Tensor members -------------------------------------------------------------------

const Tensor& Tensor::copy_(const Tensor& src, Casting casting) const {
  if (!src.defined()) throw ValueError("copy_: the source is an undefined tensor");
  return inplace(*this, "copy_", casting, [&] { return src; });
}

// Assignment to a temporary (`x.slice(0, 1, 3) = v`) writes, as LibTorch's.
Tensor& Tensor::operator=(const Tensor& v) && {
  copy_(v);
  return *this;
}
Tensor& Tensor::operator=(Tensor&& v) && {
  copy_(v);
  return *this;
}
Tensor& Tensor::operator=(Scalar v) && {
  fill_(v);
  return *this;
}

const Tensor& Tensor::fill_(Scalar v) const {
  return inplace(*this, "fill_", Casting::same_kind, [&] { return scalar_tensor(v, dtype()); });
}

const Tensor& Tensor::zero_() const {
  return inplace(*this, "zero_", Casting::same_kind, [&] { return zeros({}, dtype(), device()); });
}

const Tensor& Tensor::clamp_(std::optional<Scalar> lo, std::optional<Scalar> hi) const {
  return inplace(*this, "clamp_", Casting::same_kind, [&] { return clamp(*this, lo, hi); });
}

const Tensor& Tensor::clamp_(const Tensor& lo, const Tensor& hi) const {
  return inplace(*this, "clamp_", Casting::same_kind, [&] { return clamp(*this, lo, hi); });
}

const Tensor& Tensor::masked_fill_(const Tensor& mask, Scalar value) const {
  return inplace(*this, "masked_fill_", Casting::same_kind, [&] { return masked_fill(*this, mask, value); });
}

const Tensor& Tensor::index_put_(const Tensor& indices, const Tensor& values, int64_t axis) const {
  const std::string who = "index_put_";
  WriteScope ws(*this, who);
  if (ws.mode != detail::WriteMode::eager)
    throw RealizationError("index_put_: writes into a traced tensor are not supported (it runs eagerly only); "
                           "express the update with where/one_hot, or write into a realized tensor");
  if (!values.defined() || !indices.defined()) throw ValueError("index_put_: undefined indices or values");
  const int64_t ax = normalize_axis(axis, ndim(), "index_put_");
  if (indices.ndim() != 1 || !(indices.dtype() == DType::int32 || indices.dtype() == DType::int64))
    throw DTypeError("index_put_: indices must be a 1-d int32 or int64 tensor, got " +
                     std::string(name(indices.dtype())) + " of shape " + shape_str(indices.shape()));
  Shape target = shape();
  target[ax] = indices.size(0);
  check_fits(values.shape(), target, who);
  check_cast(values.dtype(), dtype(), Casting::same_kind, who);
  check_writable(*this, who);
  const int64_t n = size(ax);
  std::vector<int64_t> idx = indices.to_vector<int64_t>();
  for (int64_t& k : idx) {
    if (k < -n || k >= n) detail::throw_index_out_of_range("index_put_", k, ax, n);
    if (k < 0) k += n;
  }
  Tensor v = values.realize();
  if (may_share_memory(v, *this)) v = v.clone();
  v = broadcast_view(v, target);
  detail::before_memory_write(buffer());
  for (size_t i = 0; i < idx.size(); ++i)  // in order: with a repeated index the last write wins
    detail::copy_into(kiln::select(v, ax, static_cast<int64_t>(i)), kiln::select(*this, ax, idx[i]));
  buffer().bump_version();
  return *this;
}

#define KILN_INPLACE_UNARY(id, name) \
  const Tensor& Tensor::name##_() const { \
    return inplace(*this, #name "_", Casting::same_kind, [&] { return apply(OpId::id, *this); }); \
  }
#define KILN_INPLACE_BINARY(id, name)                                                                         \
  const Tensor& Tensor::name##_(const Tensor& other) const {                                                  \
    return inplace(*this, #name "_", Casting::same_kind, [&] { return apply(OpId::id, *this, other); });      \
  }                                                                                                           \
  const Tensor& Tensor::name##_(Scalar other) const {                                                         \
    return inplace(*this, #name "_", Casting::same_kind, [&] { return with_scalar(OpId::id, *this, other); }); \
  }
#define KILN_OP(id, name, arity, cat, rule) \
  KILN_FOR_ELEMENTWISE_ROW(KILN_INPLACE_UNARY, KILN_INPLACE_BINARY, id, name, cat, rule)
#include "ops.def"
#undef KILN_OP
#undef KILN_INPLACE_UNARY
#undef KILN_INPLACE_BINARY

// ---- compound assignment ---------------------------------------------------------------
const Tensor& operator+=(const Tensor& a, const Tensor& b) { return a.add_(b); }
const Tensor& operator-=(const Tensor& a, const Tensor& b) { return a.sub_(b); }
const Tensor& operator*=(const Tensor& a, const Tensor& b) { return a.mul_(b); }
const Tensor& operator/=(const Tensor& a, const Tensor& b) { return a.div_(b); }
const Tensor& operator+=(const Tensor& a, Scalar b) { return a.add_(b); }
const Tensor& operator-=(const Tensor& a, Scalar b) { return a.sub_(b); }
const Tensor& operator*=(const Tensor& a, Scalar b) { return a.mul_(b); }
const Tensor& operator/=(const Tensor& a, Scalar b) { return a.div_(b); }

// ---- out= ---------------------------------------------------------------------------------
#define KILN_OUT_UNARY(id, name)                                                                  \
  Tensor name(const Tensor& x, const Out& out) {                                                  \
    return compute_out(out, {&x}, #name, [&] { return apply(OpId::id, x); });                      \
  }
#define KILN_OUT_BINARY(id, name)                                                                 \
  Tensor name(const Tensor& a, const Tensor& b, const Out& out) {                                 \
    return compute_out(out, {&a, &b}, #name, [&] { return apply(OpId::id, a, b); });               \
  }                                                                                               \
  Tensor name(const Tensor& a, Scalar b, const Out& out) {                                        \
    return compute_out(out, {&a}, #name, [&] { return with_scalar(OpId::id, a, b); });             \
  }
#define KILN_OP(id, name, arity, cat, rule) KILN_FOR_ELEMENTWISE_ROW(KILN_OUT_UNARY, KILN_OUT_BINARY, id, name, cat, rule)
#include "ops.def"
#undef KILN_OP
#undef KILN_OUT_UNARY
#undef KILN_OUT_BINARY

Tensor where(const Tensor& cond, const Tensor& a, const Tensor& b, const Out& out) {
  return compute_out(out, {&cond, &a, &b}, "where", [&] { return where(cond, a, b); });
}
Tensor clamp(const Tensor& x, const Tensor& lo, const Tensor& hi, const Out& out) {
  return compute_out(out, {&x, &lo, &hi}, "clamp", [&] { return clamp(x, lo, hi); });
}
Tensor matmul(const Tensor& a, const Tensor& b, const Out& out) {
  return compute_out(out, {&a, &b}, "matmul", [&] { return matmul(a, b); });
}

}  // namespace kiln
