#include "tensor.h"

#include <algorithm>
#include <cstdint>
#include <cstdio>
#include <cstring>
#include <ostream>
#include <thread>

#include "dispatch.h"
#include "kernel_registry.h"
#include "op_table.h"
#include "realize_hook.h"

namespace kiln {

std::ostream& operator<<(std::ostream& os, const TensorLayout& l) {
  static constexpr const char* kClass[] = {"contiguous", "broadcast", "transposed", "general"};
  return os << "TensorLayout(" << l.dtype << ", " << shape_str(l.shape) << ", " << l.device << ", "
            << kClass[static_cast<int>(l.stride_class)] << ")";
}

// ---- PendingState (tensor.h) ----------------------------------------------------------
uint8_t detail::PendingState::lock() const noexcept {
  uint8_t b = bits_.load(std::memory_order_relaxed);
  for (int spins = 0;; ++spins) {
    if (!(b & kLocked) &&
        bits_.compare_exchange_weak(b, static_cast<uint8_t>(b | kLocked), std::memory_order_acquire,
                                    std::memory_order_relaxed))
      return b;
    if (b & kLocked) {
      if (spins > 64) std::this_thread::yield();  // held for a pointer copy: rarely for long
      b = bits_.load(std::memory_order_relaxed);
    }
  }
}

std::shared_ptr<RealizationState> detail::PendingState::get() const {
  if (!pending()) return nullptr;  // realized: a pending state is set only by the recording thread
  const uint8_t b = lock();
  std::shared_ptr<RealizationState> s = ptr_;
  bits_.store(static_cast<uint8_t>(b & kPending), std::memory_order_release);
  return s;
}

void detail::PendingState::set(std::shared_ptr<RealizationState> s) {
  (void)lock();
  ptr_.swap(s);
  bits_.store(ptr_ ? kPending : uint8_t(0), std::memory_order_release);
  // s (the old state) is released here, after the unlock
}

void detail::throw_undefined_tensor() {
  throw ValueError("Tensor: use of an undefined tensor (default-constructed)");
}

Tensor::Tensor(Buffer storage, DType dtype, Shape shape, Strides strides, int64_t offset) {
  if (strides.size() != shape.size())
    throw ShapeError("Tensor: strides " + shape_str(strides) + " do not match shape " + shape_str(shape));
  int64_t n = checked_numel(shape, "Tensor");
  // Element access needs the dtype's alignment (kernels read T* from it);
  // kiln's own buffers are 64-byte aligned, wrapped memory may not be.
  const size_t item = size_of(dtype);
  if (const auto addr = reinterpret_cast<uintptr_t>(storage.data()); addr % item != 0)
    throw ValueError("Tensor: the storage's data address 0x" + [&] {
      char buf[32];
      std::snprintf(buf, sizeof buf, "%llx", static_cast<unsigned long long>(addr));
      return std::string(buf);
    }() + " is not a multiple of " + std::to_string(item) + " bytes, the alignment of dtype " +
                     std::string(name(dtype)) + " (wrap memory aligned to the element size)");
  if (n > 0) {
    // The lowest and highest element reached must lie inside the storage.
    int64_t lo = offset, hi = offset;
    for (size_t i = 0; i < shape.size(); ++i) {
      int64_t span;
      if (__builtin_mul_overflow(shape[i] - 1, strides[i], &span))
        throw ShapeError("Tensor: strides overflow for shape " + shape_str(shape));
      (span < 0 ? lo : hi) += span;
    }
    int64_t cap = static_cast<int64_t>(storage.nbytes() / size_of(dtype));
    if (lo < 0 || hi >= cap)
      throw IndexError("Tensor: view with shape " + shape_str(shape) + ", strides " + shape_str(strides) +
                       " and offset " + std::to_string(offset) + " reaches elements [" + std::to_string(lo) + ", " +
                       std::to_string(hi) + "] outside a storage of " + std::to_string(cap) + " elements");
  }
  auto impl = std::make_shared<detail::TensorImpl>();
  impl->dtype = dtype;
  impl->shape = std::move(shape);
  impl->strides = std::move(strides);
  impl->offset = offset;
  impl->device = storage.device();
  impl->storage = std::move(storage);
  impl_ = std::move(impl);
}

Tensor Tensor::empty(const Shape& shape, DType dtype, Device device) {
  int64_t n = checked_numel(shape, "empty");
  size_t bytes;
  if (__builtin_mul_overflow(static_cast<size_t>(n), size_of(dtype), &bytes))
    throw ShapeError("empty: shape " + shape_str(shape) + " needs more bytes than fit in size_t");
  auto impl = std::make_shared<detail::TensorImpl>();
  impl->dtype = dtype;
  impl->shape = shape;
  impl->strides = contiguous_strides(shape);
  impl->device = device;
  impl->storage = Buffer::allocate(bytes, device);
  return Tensor(std::move(impl));
}

Tensor Tensor::from_data(const void* data, DType dtype, size_t n, const Shape& shape) {
  int64_t want = checked_numel(shape, "from_data");
  if (static_cast<size_t>(want) != n)
    throw ShapeError("from_data: " + std::to_string(n) + " values cannot fill shape " + shape_str(shape) + " (" +
                     std::to_string(want) + " elements)");
  // A null pointer is refused when there is something to copy; with n == 0
  // it is fine (an empty std::vector's data() may be null: from_vector({})).
  if (!data && n)
    throw ValueError("from_data: data is a null pointer but " + std::to_string(n) + " " + std::string(name(dtype)) +
                     " value(s) were to be copied from it (shape " + shape_str(shape) + ")");
  Tensor t = empty(shape, dtype);
  if (n) std::memcpy(t.data_ptr(), data, n * size_of(dtype));
  return t;
}

const Strides& Tensor::strides() const {
  if (!is_realized())
    if (auto l = detail::traced_layout(*this)) {
      // A traced value: the strides eager code would see, where the trace knows them.
      if (!l->strides)
        throw RealizationError("strides(): the strides of this traced tensor are not known while tracing (" + l->why +
                               "); eagerly they depend on the argument's memory layout. Use is_contiguous() or "
                               "stride_class(), or call contiguous() first (its strides are known)");
      const_cast<detail::TensorImpl&>(impl()).strides = std::move(*l->strides);  // recomputed on each call
      return impl().strides;
    }
  realize();
  return impl().strides;
}

int64_t Tensor::numel() const {
  int64_t n = 1;
  for (int64_t d : impl().shape) n *= d;
  return n;
}

int64_t Tensor::size(int64_t axis) const { return impl().shape[normalize_axis(axis, ndim(), "size")]; }

StrideClass Tensor::stride_class() const {
  if (!is_realized())
    if (auto l = detail::traced_layout(*this); l && !l->cls_known)
      // Eagerly the class depends on strides the trace does not know: no guess.
      throw RealizationError("stride_class(): the stride class of this traced tensor is not known while tracing (" +
                             l->why + "); eagerly it depends on the argument's strides, and the compiled entry "
                             "covers every layout of the argument's stride class, so no one class is right. Call "
                             "contiguous() (always contiguous) or pass a contiguous argument");
  return detail::covering_stride_class(*this);
}

StrideClass detail::covering_stride_class(const Tensor& t) {
  if (!t.is_realized()) {
    // A traced value reports the layout the trace knows (eager's; general
    // when not even the class is known).
    if (auto l = traced_layout(t)) return l->cls;
    // A lazy one (of a kiln::lazy() scope, ended or not) is realized first,
    // as strides() does: a lazy view (a transpose, a strided slice of a lazy
    // result) realizes with its own strides, not the contiguous placeholders
    // it holds until then. Compiled calls and the jit cache key read their
    // arguments' layouts here. Inside its own open scope it is realized as a
    // compiled call there realizes its arguments: the scope's recorded ops
    // up to it run (the eager context made current for that).
    EagerGuard eager;
    t.realize();
  }
  const auto& im = t.impl();
  return stride_class_of(im.shape, im.strides);
}

StrideClass detail::stride_class_of(const Shape& shape, const Strides& strides) {
  if (kiln::is_contiguous(shape, strides)) return StrideClass::contiguous;
  bool broadcast = false, negative = false;
  for (size_t i = 0; i < shape.size(); ++i) {
    if (shape[i] > 1 && strides[i] == 0) broadcast = true;
    if (strides[i] < 0) negative = true;
  }
  if (broadcast) return StrideClass::broadcast;
  if (!negative) {
    // A permutation of a contiguous layout: sort axes by stride and check.
    std::vector<size_t> order(shape.size());
    for (size_t i = 0; i < order.size(); ++i) order[i] = i;
    std::sort(order.begin(), order.end(), [&](size_t a, size_t b) { return strides[a] > strides[b]; });
    int64_t acc = 1;
    bool ok = true;
    for (size_t k = order.size(); k-- > 0;) {
      size_t i = order[k];
      if (shape[i] == 1) continue;
      if (strides[i] != acc) { ok = false; break; }
      acc *= shape[i];
    }
    if (ok) return StrideClass::transposed;
  }
  return StrideClass::general;
}

bool Tensor::is_contiguous() const {
  if (!is_realized())
    if (auto l = detail::traced_layout(*this); l && !l->cls_known)
      // Eagerly the answer depends on strides the trace does not know: no guess.
      throw RealizationError("is_contiguous(): whether this traced tensor is contiguous is not known while tracing (" +
                             l->why + "); eagerly it depends on the argument's memory layout. Call contiguous() "
                             "(always contiguous) or pass a contiguous argument");
  return stride_class() == StrideClass::contiguous;
}

TensorLayout Tensor::layout() const {
  return TensorLayout(dtype(), shape(), device(), detail::covering_stride_class(*this));
}

const Buffer& Tensor::buffer() const {
  realize();
  return impl().storage;
}

void* Tensor::data_ptr() const {
  realize();
  const auto& im = impl();
  return static_cast<char*>(im.storage.data()) + im.offset * static_cast<int64_t>(size_of(im.dtype));
}

void Tensor::check_dtype(DType want, const char* what) const {
  if (dtype() != want)
    throw DTypeError(std::string("Tensor::") + what + ": tensor has dtype " + std::string(name(dtype())) +
                     ", not " + std::string(name(want)));
}

const Tensor& Tensor::realize() const {
  if (!impl().state) return *this;
  detail::realize_tensor(*this);
  return *this;
}

template <class T>
T Tensor::item() const {
  if (numel() != 1)
    throw ShapeError("item: expected a tensor with one element, got shape " + shape_str(shape()));
  if (impl().state) detail::realize_for(*this, "item");
  if (!device().is_cpu()) [[unlikely]] return cpu().item<T>();
  const void* p = data_ptr();
  return detail::visit_dtype(dtype(), [&](auto tag) {
    using S = typename decltype(tag)::type;
    return detail::convert<T>(*static_cast<const S*>(p));
  });
}

template <class T>
std::vector<T> Tensor::to_vector() const {
  if (impl().state) detail::realize_for(*this, "to_vector");
  if (!device().is_cpu()) [[unlikely]] return cpu().to_vector<T>();
  Tensor c = contiguous();
  std::vector<T> out(static_cast<size_t>(c.numel()));
  const void* p = c.data_ptr();
  detail::visit_dtype(c.dtype(), [&](auto tag) {
    using S = typename decltype(tag)::type;
    const S* s = static_cast<const S*>(p);
    for (size_t i = 0; i < out.size(); ++i) out[i] = detail::convert<T>(s[i]);
  });
  return out;
}

#define KILN_INSTANTIATE(T) \
  template T Tensor::item<T>() const; \
  template std::vector<T> Tensor::to_vector<T>() const;
KILN_INSTANTIATE(float)
KILN_INSTANTIATE(double)
KILN_INSTANTIATE(int32_t)
KILN_INSTANTIATE(int64_t)
KILN_INSTANTIATE(bool)
KILN_INSTANTIATE(int16_t)
KILN_INSTANTIATE(uint16_t)
KILN_INSTANTIATE(uint32_t)
KILN_INSTANTIATE(uint64_t)
KILN_INSTANTIATE(uint8_t)
KILN_INSTANTIATE(int8_t)
KILN_INSTANTIATE(float16_t)
KILN_INSTANTIATE(bfloat16_t)
#undef KILN_INSTANTIATE

Tensor Tensor::contiguous() const {
  if (!defined()) throw ValueError("contiguous: the tensor is undefined (default-constructed)");
  // Recorded (jit/compile/stage, lazy scopes): a view of another value is
  // copied, any other value is returned as is (its layout is the plan's).
  if (Tensor r = detail::recorded_copy(*this, false); r.defined()) return r;
  realize();
  if (is_contiguous()) return *this;
  return clone();
}

Tensor Tensor::clone() const {
  if (!defined()) throw ValueError("clone: the tensor is undefined (default-constructed)");
  // Recorded: a copy in the graph (realizing here would fail while tracing).
  if (Tensor r = detail::recorded_copy(*this, true); r.defined()) return r;
  realize();
  Tensor out = empty(shape(), dtype(), device());
  detail::copy_into(*this, out);
  return out;
}

Tensor Tensor::to(DType d) const {
  if (!defined()) throw ValueError("to: the tensor is undefined (default-constructed)");
  if (d == dtype()) return *this;
  Attrs a;
  a.dtype = d;
  return apply(OpId::Cast, *this, a);
}

}  // namespace kiln
