#include "op_table.h"

#include <array>
#include <string_view>
#include <string>

#include "realize_hook.h"

namespace kiln {

namespace {
constexpr std::array<OpInfo, kNumOps> kTable = {{
#define KILN_OP(id, name, arity, cat, rule) {OpId::id, #name, arity, OpCategory::cat, DTypeRule::rule},
#include "ops.def"
#undef KILN_OP
}};
}  // namespace

const OpInfo& op_info(OpId op) { return kTable[static_cast<size_t>(op)]; }

OpId op_from_name(std::string_view name) {
  for (const auto& r : kTable)
    if (r.name == name) return r.id;
  throw ValueError("op_from_name: unknown op '" + std::string(name) + "'");
}

std::string detail::op_prefix(OpId op) { return std::string(op_name(op)) + ": "; }

DType result_dtype(OpId op, std::span<const DType> in, const Attrs& attrs) {
  const OpInfo& r = op_info(op);
  auto refuse_bool = [&](DType d) {
    if (d == DType::bool_)
      throw DTypeError(detail::op_prefix(op) + "bool tensors are not supported (cast to an integer or float dtype first)");
  };
  // Where's condition is input 0 and does not take part in promotion.
  size_t first = r.category == OpCategory::Ternary && op == OpId::Where ? 1 : 0;
  DType p = in.size() > first ? in[first] : DType::float32;
  for (size_t i = first + 1; i < in.size(); ++i) p = promote_types(p, in[i]);
  switch (r.dtype_rule) {
    case DTypeRule::Same: refuse_bool(p); return p;
    case DTypeRule::Float: return is_floating(p) ? p : DType::float32;
    case DTypeRule::ToBool: return DType::bool_;
    case DTypeRule::Promote:
      if (p == DType::bool_ && op != OpId::Add && op != OpId::Mul && op != OpId::Maximum &&
          op != OpId::Minimum && op != OpId::Where && op != OpId::Concat && op != OpId::Matmul)
        refuse_bool(p);
      return p;
    case DTypeRule::TrueDiv: return is_floating(p) ? p : DType::float32;
    case DTypeRule::Compare: return DType::bool_;
    case DTypeRule::Attr: return attrs.dtype;
    case DTypeRule::Index: return DType::int64;
    case DTypeRule::Keep: return in.empty() ? DType::float32 : in[0];
    case DTypeRule::Accum:  // numpy: unsigned integers accumulate in uint64, signed and bool in int64
      return is_unsigned(p) ? DType::uint64 : is_integral(p) || p == DType::bool_ ? DType::int64 : p;
  }
  return p;
}

TensorLayout infer_layout(OpId op, std::span<const TensorLayout> in, const Attrs& attrs) {
  const OpInfo& r = op_info(op);
  if (r.arity >= 0 && static_cast<int>(in.size()) != r.arity)
    throw ValueError(detail::op_prefix(op) + "expected " + std::to_string(r.arity) + " tensor inputs, got " +
                     std::to_string(in.size()));
  if (in.empty()) throw ValueError(detail::op_prefix(op) + "expected at least one tensor input, got none");
  // As eager (kernel_registry.cpp): a 0-d CPU input (a scalar) may join
  // operands on another device, and counts as on that device.
  auto cpu_scalar = [](const TensorLayout& l) { return l.device.is_cpu() && l.shape.empty(); };
  size_t ref = 0;
  while (ref + 1 < in.size() && cpu_scalar(in[ref])) ++ref;
  std::vector<TensorLayout> moved;
  for (size_t i = 0; i < in.size(); ++i) {
    if (in[i].device == in[ref].device) continue;
    if (!cpu_scalar(in[i]))
      throw DeviceError(detail::op_prefix(op) + "input " + std::to_string(i) + " is on " + in[i].device.str() +
                        " but input " + std::to_string(ref) + " is on " + in[ref].device.str());
    if (moved.empty()) moved.assign(in.begin(), in.end());
    moved[i].device = in[ref].device;
  }
  if (!moved.empty()) return infer_layout(op, moved, attrs);
  switch (r.category) {
    case OpCategory::Unary: return detail::infer_unary(op, in, attrs);
    case OpCategory::Binary: return detail::infer_binary(op, in, attrs);
    case OpCategory::Ternary: return detail::infer_ternary(op, in, attrs);
    case OpCategory::Reduce: return detail::infer_reduce(op, in, attrs);
    case OpCategory::Scan: return detail::infer_scan(op, in, attrs);
    case OpCategory::RowNorm: return detail::infer_rownorm(op, in, attrs);
    case OpCategory::Matmul: return detail::infer_matmul(op, in, attrs);
    case OpCategory::View: return detail::infer_view(op, in, attrs);
    case OpCategory::Data: return detail::infer_data(op, in, attrs);
    case OpCategory::Linalg: return detail::infer_linalg(op, in, attrs);
  }
  return {};
}

namespace {
thread_local const Tensor* t_output_dst = nullptr;
}

Tensor detail::output_tensor(const Shape& shape, DType dtype, Device device) {
  if (const Tensor* d = t_output_dst) {
    if (d->dtype() == dtype && d->shape() == shape && d->device() == device) {
      t_output_dst = nullptr;
      return *d;
    }
  }
  return Tensor::empty(shape, dtype, device);
}

detail::ScopedOutput::ScopedOutput(const Tensor& dst) { t_output_dst = &dst; }
detail::ScopedOutput::~ScopedOutput() { t_output_dst = nullptr; }

namespace {
Tensor eager_dispatch(OpId op, std::span<const Tensor> in, const Attrs& attrs) {
  switch (op_info(op).category) {
    case OpCategory::Unary: return detail::eager_unary(op, in, attrs);
    case OpCategory::Binary: return detail::eager_binary(op, in, attrs);
    case OpCategory::Ternary: return detail::eager_ternary(op, in, attrs);
    case OpCategory::Reduce: return detail::eager_reduce(op, in, attrs);
    case OpCategory::Scan: return detail::eager_scan(op, in, attrs);
    case OpCategory::RowNorm: return detail::eager_rownorm(op, in, attrs);
    case OpCategory::Matmul: return detail::eager_matmul(op, in, attrs);
    case OpCategory::View: return detail::eager_view(op, in, attrs);
    case OpCategory::Data: return detail::eager_data(op, in, attrs);
    case OpCategory::Linalg: return detail::eager_linalg(op, in, attrs);
  }
  return {};
}
}  // namespace

Tensor detail::eager_execute(OpId op, std::span<const Tensor> in, const Attrs& attrs) {
  // An unrealized input (a tensor of an ended kiln::lazy() scope) is
  // realized before any kernel reads its layout: until then its strides are
  // placeholders, and a lazy view realizes with its own (a transpose, a
  // strided slice), which the kernels must see.
  for (const Tensor& t : in)
    if (t.defined() && t.impl().state) [[unlikely]] {
      // Its realization runs ops of its own: they must not take the
      // destination a ScopedOutput set for this op's result.
      const Tensor* dst = t_output_dst;
      t_output_dst = nullptr;
      try {
        t.realize();
      } catch (...) {
        t_output_dst = dst;
        throw;
      }
      t_output_dst = dst;
    }
  try {
    return eager_dispatch(op, in, attrs);
  } catch (const ValueError& e) {
    // An output too large for memory (diag with a huge k, say) is reported by
    // Buffer::allocate, which cannot know the op: name it here.
    static constexpr std::string_view kOom = "Buffer::allocate: out of memory";
    const std::string_view m = e.what();
    if (m.substr(0, kOom.size()) != kOom) throw;
    throw ValueError(detail::op_prefix(op) + "out of memory for its result" + std::string(m.substr(kOom.size())));
  } catch (const ShapeError& e) {
    // A result too large to address is reported by Tensor::empty ("empty:
    // shape ... needs more bytes than fit in size_t"): name the op.
    static constexpr std::string_view kEmpty = "empty: shape ";
    const std::string_view m = e.what();
    if (m.substr(0, kEmpty.size()) != kEmpty) throw;
    throw ShapeError(detail::op_prefix(op) + "its result of shape " + std::string(m.substr(kEmpty.size())));
  }
}

Tensor apply(OpId op, std::span<const Tensor> inputs, const Attrs& attrs) {
  const OpInfo& r = op_info(op);
  if (r.arity >= 0 && static_cast<int>(inputs.size()) != r.arity)
    throw ValueError(detail::op_prefix(op) + "expected " + std::to_string(r.arity) + " tensor inputs, got " +
                     std::to_string(inputs.size()));
  for (size_t i = 0; i < inputs.size(); ++i)
    if (!inputs[i].defined())
      throw ValueError(detail::op_prefix(op) + "input " + std::to_string(i) + " is an undefined tensor");
  // Every op goes through the current realization context; the built-in
  // eager context is the fast path (one thread-local read).
  if (RealizationContext* ctx = detail::active_context()) return detail::context_apply(ctx, op, inputs, attrs);
  return detail::eager_execute(op, inputs, attrs);
}

Tensor apply(OpId op, const Tensor& a, const Attrs& attrs) { return apply(op, std::span<const Tensor>(&a, 1), attrs); }

Tensor apply(OpId op, const Tensor& a, const Tensor& b, const Attrs& attrs) {
  const Tensor in[2] = {a, b};
  return apply(op, std::span<const Tensor>(in, 2), attrs);
}

}  // namespace kiln
