// kiln: Tensor (a cheap handle to shape, strides and shared storage) and
// TensorLayout (what a compiled function is specialised on).
#pragma once
#include <atomic>
#include <cstddef>
#include <cstdint>
#include <initializer_list>
#include <iosfwd>
#include <memory>
#include <optional>
#include <utility>
#include <vector>

#include "buffer.h"
#include "device.h"
#include "dtype.h"
#include "elementwise_rows.h"
#include "error.h"
#include "method_rows.h"
#include "scalar.h"
#include "shape.h"

namespace kiln {

class TensorIndex;    // one entry of x.index({...}) (tensor/indexing.h)
class IndexedTensor;  // what x.index({...}) returns (tensor/indexing.h)
class RealizationState;  // graph values + context of an unrealized tensor (trace/)
struct GraphValue;       // a value of a Graph (trace/graph.h)

/// How a tensor's strides relate to its shape; part of a compiled call's cache key.
enum class StrideClass : uint8_t {
  contiguous,  ///< row-major
  broadcast,   ///< some stride is 0 (a broadcast view)
  transposed,  ///< a permutation of row-major strides
  general,     ///< anything else (slices with steps, negative strides)
};

/// dtype, shape and device of a tensor, plus its stride class. Two tensors
/// with equal layouts can be passed to the same compiled callable.
struct TensorLayout {
  DType dtype = DType::float32;
  Shape shape;
  Device device = Device::cpu();
  StrideClass stride_class = StrideClass::contiguous;

  TensorLayout() = default;
  TensorLayout(DType dtype, Shape shape, Device device = Device::cpu(),
               StrideClass stride_class = StrideClass::contiguous)
      : dtype(dtype), shape(std::move(shape)), device(device), stride_class(stride_class) {}
  bool is_contiguous() const { return stride_class == StrideClass::contiguous; }
  int64_t ndim() const { return static_cast<int64_t>(shape.size()); }
  int64_t numel() const { return checked_numel(shape); }
  friend bool operator==(const TensorLayout&, const TensorLayout&) = default;
};
std::ostream& operator<<(std::ostream& os, const TensorLayout& l);

/// How an in-place write may convert the dtype of the value written into the
/// destination's dtype (numpy's `casting=`). The destination's dtype never changes.
enum class Casting : uint8_t {
  same_kind,  ///< within a kind or up the kinds bool -> integer -> float (numpy's default for `out=`)
  unsafe,     ///< any conversion (cast semantics: float -> int truncates)
};

namespace detail {
/// TensorImpl::state: the RealizationState of an unrealized tensor, null
/// once it is realized. A tensor of an ended kiln::lazy() scope becomes
/// realized in whichever thread reads it first while other threads may be
/// reading it too (copies of a handle share the TensorImpl), so the field
/// is read atomically: `pending()` (also `if (state)`, `state == nullptr`)
/// is one acquire load of a byte -- all the eager fast path pays per input
/// -- and get() (also `state->...`) copies the pointer under a per-tensor
/// spin lock held for that copy only, so the state it returns stays valid
/// when another thread realizes the tensor meanwhile. The realizing thread
/// writes storage and strides first, then reset(): its release publishes
/// them, so a thread that sees !pending() sees them too. Other changes of
/// the state (recording, in-place writes while tracing) happen on the one
/// thread that records into the tensor's context.
class PendingState {
 public:
  PendingState() = default;
  PendingState(const PendingState&) = delete;
  PendingState& operator=(const PendingState&) = delete;
  /// set(s)
  PendingState& operator=(std::shared_ptr<RealizationState> s) {
    set(std::move(s));
    return *this;
  }
  /// True while the tensor is unrealized (one acquire load).
  bool pending() const noexcept { return (bits_.load(std::memory_order_acquire) & kPending) != 0; }
  explicit operator bool() const noexcept { return pending(); }
  friend bool operator==(const PendingState& s, std::nullptr_t) noexcept { return !s.pending(); }
  /// A copy of the state (null when realized): the value at one instant,
  /// kept alive by the copy.
  std::shared_ptr<RealizationState> get() const;
  /// get()->...: the copy lives until the end of the full expression.
  std::shared_ptr<RealizationState> operator->() const { return get(); }
  /// Replaces the state (null: realized). The old one is released after
  /// the lock is dropped (releasing it may destroy its context).
  void set(std::shared_ptr<RealizationState> s);
  void reset() { set(nullptr); }

 private:
  static constexpr uint8_t kPending = 1, kLocked = 2;
  uint8_t lock() const noexcept;  // returns the bits before locking
  mutable std::atomic<uint8_t> bits_{0};
  std::shared_ptr<RealizationState> ptr_;  // read and written only under the lock
};

struct TensorImpl {
  DType dtype = DType::float32;
  Shape shape;
  Strides strides;      // element strides (realized tensors)
  int64_t offset = 0;   // element offset of index (0, ..., 0) into storage
  Buffer storage;       // realized data
  Device device = Device::cpu();
  PendingState state;   // set while unrealized (read atomically: see PendingState)
};
// Raises ValueError "use of an undefined tensor" (Tensor::impl's cold path).
[[noreturn, gnu::cold, gnu::noinline]] void throw_undefined_tensor();
}  // namespace detail

/// An n-dimensional array. Copying a Tensor copies the handle, not the data:
/// views (reshape, slice, permute, ...) share storage. Element strides may be
/// zero or negative. A tensor is either realized (it has storage) or
/// unrealized (a value in a graph being recorded or lazily evaluated).
class Tensor {
 public:
  /// An undefined tensor (no data, `defined()` is false).
  Tensor() = default;
  Tensor(const Tensor&) = default;
  Tensor(Tensor&&) noexcept = default;
  /// Assignment to a named tensor rebinds the handle (`Tensor a = b; a = c;`
  /// makes a share c's data; nothing is written).
  Tensor& operator=(const Tensor&) & = default;
  Tensor& operator=(Tensor&&) & noexcept = default;
  /// Assignment to a temporary writes into its memory, as LibTorch's does:
  /// `x.slice(0, 1, 3) = v`, `x.transpose() = v` are `copy_(v)` (v broadcast
  /// and cast with same_kind casting, tensor/mutation.h), `... = 2.0` is
  /// fill_. `x[i] = v` and `x.index({...}) = v` are IndexedTensor's (they
  /// write into x also with advanced indices and when traced).
  Tensor& operator=(const Tensor& v) &&;
  Tensor& operator=(Tensor&& v) &&;
  Tensor& operator=(Scalar v) &&;
  /// A realized view over `storage`. Throws IndexError when the view reaches
  /// outside the storage.
  Tensor(Buffer storage, DType dtype, Shape shape, Strides strides, int64_t offset = 0);
  /// A new, uninitialised, contiguous tensor.
  static Tensor empty(const Shape& shape, DType dtype = DType::float32, Device device = Device::cpu());
  /// A tensor copied from `data`, reshaped to `shape` (default: 1-d). Throws
  /// ShapeError when the element count does not match.
  template <class T>
  static Tensor from_vector(const std::vector<T>& data, Shape shape = {}) {
    return from_data(data.data(), dtype_v<T>, data.size(), shape.empty() ? Shape{int64_t(data.size())} : shape);
  }
  /// Copies `n` elements of `dtype` from `data` into a new tensor of `shape`.
  static Tensor from_data(const void* data, DType dtype, size_t n, const Shape& shape);

  bool defined() const { return impl_ != nullptr; }
  DType dtype() const { return impl().dtype; }
  const Shape& shape() const { return impl().shape; }
  /// Element strides. A traced tensor (inside jit/compile/stage) reports
  /// the strides eager code would see; where the trace does not know them (a
  /// view of an argument traced for a non-contiguous stride class) it throws
  /// RealizationError. Other unrealized tensors are realized first.
  const Strides& strides() const;
  int64_t offset() const { return impl().offset; }
  int64_t ndim() const { return static_cast<int64_t>(impl().shape.size()); }
  int64_t numel() const;
  /// Extent of `axis` (negative counts from the end).
  int64_t size(int64_t axis) const;
  Device device() const { return impl().device; }
  /// dtype, shape, device and stride class: the spec of the compiled entry
  /// that takes this tensor. For a traced tensor whose stride class is not
  /// known while tracing (see stride_class) the class is
  /// StrideClass::general, the one whose traced code assumes no layout;
  /// never throws for a defined tensor.
  TensorLayout layout() const;
  /// The class of the strides(). A traced tensor reports the class eager
  /// code would see (an argument: the class its compiled entry was traced
  /// for). Throws RealizationError, naming stride_class(), for a traced
  /// tensor whose class depends on strides the trace does not know: a view
  /// (transpose, slice, ...) of an argument traced for a non-contiguous
  /// class, whose compiled entry covers every layout of that class (eagerly
  /// such a view may be contiguous for one and not for another). A lazy
  /// tensor not yet realized reports contiguous.
  StrideClass stride_class() const;
  /// stride_class() == StrideClass::contiguous; throws RealizationError where
  /// stride_class() does (a traced tensor whose class is not known).
  bool is_contiguous() const;
  size_t itemsize() const { return size_of(dtype()); }

  /// The storage (realizes the tensor first if needed).
  const Buffer& buffer() const;
  /// Address of element (0, ..., 0) (realizes first). Do not write through it
  /// into a tensor that shares storage unless you mean to change every view.
  void* data_ptr() const;
  template <class T> T* data() const {
    check_dtype(dtype_v<T>, "data");
    return static_cast<T*>(data_ptr());
  }

  /// The value of a one-element tensor converted to T (default double).
  /// Throws ShapeError when numel() != 1. The conversion is cast()'s (ops.h:
  /// numpy's astype), never a range check: into an integer T a float is
  /// truncated toward zero (1.7 -> 1), and a value T cannot hold wraps or
  /// saturates silently (300 as int8_t is 44; 1e30, NaN or infinity as
  /// int64_t is INT64_MIN); bool is value != 0. Unlike full / masked_fill,
  /// which refuse an out-of-range scalar with ValueError, and LibTorch's
  /// item<T>(), which raises on overflow: when the range is not known, read into
  /// the tensor's own C++ type (or double for floats) and check it there. A tensor on a device is copied to the
  /// CPU first (this waits for the work that computes it); so is it for
  /// to_vector and printing.
  template <class T = double> T item() const;
  /// All elements in row-major order, each converted to T as item() does
  /// (cast()'s wrapping, no range check).
  template <class T> std::vector<T> to_vector() const;
  /// This tensor if contiguous, else a contiguous copy.
  Tensor contiguous() const;
  /// A copy converted to `dtype` (this tensor when the dtype already matches).
  Tensor to(DType dtype) const;
  /// A contiguous copy on `device` (this tensor when it is there already):
  /// host to device, device to host or device to device, on the device's
  /// kiln stream; a copy to the CPU has finished when this returns. Throws
  /// NotBuiltError for a CUDA device when kiln was built without CUDA, and
  /// DeviceError with the driver's words when the device is absent.
  Tensor to(Device device) const;
  /// to(Device::cpu()) and to(Device::cuda(index)).
  Tensor cpu() const;
  Tensor cuda(int index = 0) const;
  /// A contiguous copy that shares nothing with this tensor.
  Tensor clone() const;

  /// A tensor standing for graph value `v` in the current (graph) context;
  /// throws RealizationError when the current context does not record into
  /// v's graph.
  static Tensor from_graph_value(const GraphValue& v);

  // Realization (see trace/realization_context.h).
  /// False while the tensor is unrealized. One atomic (acquire) load: safe
  /// while another thread realizes the tensor (an ended lazy scope's result
  /// read by several threads); once it returns true, storage and strides
  /// are set and stay so.
  bool is_realized() const { return !impl().state.pending(); }
  /// Realizes this tensor in its context (no-op when realized). Returns *this.
  const Tensor& realize() const;

  /// Shape-related methods, same as the free functions of the same name.
  Tensor reshape(const Shape& shape) const;
  Tensor permute(const std::vector<int64_t>& axes) const;
  Tensor transpose(int64_t a = -2, int64_t b = -1) const;

  // ---- in-place writes (rules in tensor/mutation.h) ---------------------------
  // Each writes into this tensor's memory (a view writes through to its
  // base) and returns *this. The destination keeps its dtype and shape: a
  // value that does not broadcast to the shape is a ShapeError, one whose
  // dtype does not cast under `casting` a DTypeError. An operand that
  // overlaps the destination in memory is read as it was before the write.

  /// Writes src (broadcast to this shape, converted to this dtype) into this tensor.
  const Tensor& copy_(const Tensor& src, Casting casting = Casting::same_kind) const;
  /// Assignment through a view: `slice(x, 0, 1, 3).assign(y)` writes y into rows 1..2 of x (copy_).
  const Tensor& assign(const Tensor& src, Casting casting = Casting::same_kind) const { return copy_(src, casting); }
  /// Sets every element to v (converted to this dtype; an integer v must fit an integer dtype).
  const Tensor& fill_(Scalar v) const;
  const Tensor& zero_() const;
  /// In-place clamp / masked_fill (same rules as the free functions).
  const Tensor& clamp_(std::optional<Scalar> lo, std::optional<Scalar> hi) const;
  const Tensor& clamp_(const Tensor& lo, const Tensor& hi) const;
  const Tensor& masked_fill_(const Tensor& mask, Scalar value) const;
  /// Writes values into the entries `indices` (1-d int32/int64, negative from
  /// the end) along `axis`: this[..., indices[i], ...] = values[..., i, ...];
  /// values broadcast to index_select(*this, axis, indices)'s shape. With a
  /// repeated index the last write wins (numpy). Out of range: IndexError.
  const Tensor& index_put_(const Tensor& indices, const Tensor& values, int64_t axis = 0) const;

  /// `x.exp_()`, `x.add_(y)`, `x.add_(2.0)`, ...: the `_` variant of every unary
  /// and binary op-table row (generated from tensor/ops.def), equal bit for
  /// bit to `x.copy_(exp(x))`, `x.copy_(x + y)` with same_kind casting.
#define KILN_INPLACE_UNARY(id, name) const Tensor& name##_() const;
#define KILN_INPLACE_BINARY(id, name)              \
  const Tensor& name##_(const Tensor& other) const; \
  const Tensor& name##_(Scalar other) const;
#define KILN_OP(id, name, arity, cat, rule) \
  KILN_FOR_ELEMENTWISE_ROW(KILN_INPLACE_UNARY, KILN_INPLACE_BINARY, id, name, cat, rule)
#include "ops.def"
#undef KILN_OP
#undef KILN_INPLACE_UNARY
#undef KILN_INPLACE_BINARY

  // ---- method forms of the op table's rows (generated from tensor/ops.def) -----
  // `x.exp()`, `x.add(y)`, `x.add(2.0)`, `x.sum({0}, true)`, `x.mean()`,
  // `x.argmax(1)`, `x.var({}, 0.0)`, `x.softmax(-1)`, `x.matmul(w)`,
  // `x.cast(DType::int32)`, `x.gather(1, idx)`, ...: each is `kiln::name(x,
  // ...)` with the same arguments, defaults, result and errors (tensor/ops.h,
  // tensor/sorting.h); tensor/method_rows.h says which row gets which form.
#define KILN_M_UNARY(id, name) Tensor name() const;
#define KILN_M_BINARY(id, name)               \
  Tensor name(const Tensor& other) const; \
  Tensor name(Scalar other) const;
#define KILN_M_TENSOR(id, name) Tensor name(const Tensor& other) const;
#define KILN_M_CAST(id, name) Tensor name(DType dtype) const;
#define KILN_M_REDUCE(id, name) Tensor name(const std::vector<int64_t>& axes = {}, bool keepdim = false) const;
#define KILN_M_ARGREDUCE(id, name) Tensor name(std::optional<int64_t> axis = std::nullopt, bool keepdim = false) const;
#define KILN_M_MOMENT(id, name) \
  Tensor name(const std::vector<int64_t>& axes = {}, double correction = 1.0, bool keepdim = false) const;
#define KILN_M_SCAN(id, name) Tensor name(int64_t axis) const;
#define KILN_M_SORT(id, name) Tensor name(int64_t axis = -1, bool descending = false) const;
#define KILN_M_SOFTMAX(id, name) Tensor name(int64_t axis = -1) const;
#define KILN_M_LAYER_NORM(id, name) \
  Tensor name(const Tensor& weight = {}, const Tensor& bias = {}, double eps = 1e-5) const;
#define KILN_M_RMS_NORM(id, name) Tensor name(const Tensor& weight = {}, double eps = 1e-6) const;
#define KILN_M_SHAPE(id, name) Tensor name(const Shape& shape) const;
#define KILN_M_SLICE(id, name) \
  Tensor name(int64_t axis, std::optional<int64_t> start, std::optional<int64_t> stop, int64_t step = 1) const;
#define KILN_M_SELECT(id, name) Tensor name(int64_t axis, int64_t index) const;
#define KILN_M_AXES(id, name) Tensor name(const std::vector<int64_t>& axes = {}) const;
#define KILN_M_AXIS(id, name) Tensor name(int64_t axis) const;
#define KILN_M_REPS(id, name) Tensor name(const std::vector<int64_t>& reps) const;
#define KILN_M_PAD(id, name) \
  Tensor name(const std::vector<std::pair<int64_t, int64_t>>& pads, Scalar value = 0.0) const;
#define KILN_M_AXIS_INDEX(id, name) Tensor name(int64_t axis, const Tensor& index) const;
#define KILN_M_ONE_HOT(id, name) Tensor name(int64_t num_classes, DType dtype = DType::int64) const;
#define KILN_M_SCATTER(id, name) Tensor name(int64_t axis, const Tensor& index, const Tensor& src) const;
#define KILN_M_INDEX_ADD(id, name) \
  Tensor name(int64_t axis, const Tensor& index, const Tensor& src, Scalar alpha = 1) const;
#define KILN_OP(id, name, arity, cat, rule) KILN_FOR_METHOD_ROW(id, name, cat, rule)
#include "ops.def"
#undef KILN_OP
#include "method_rows_undef.h"

  // ---- indexing (numpy's rules; tensor/indexing.h) ----------------------------
  /// x[i]: a view of entry i along axis 0 (negative counts from the end), as
  /// an IndexedTensor so that `x[i] = v` writes into x. Throws IndexError
  /// naming the axis and its size when i is out of range, and for a 0-d tensor.
  IndexedTensor operator[](int64_t i) const;
  /// x.index({Slice(1, None, 2), 0, None, Ellipsis, mask, idx}): numpy
  /// indexing, a view for basic indices, a copy once an integer or boolean
  /// tensor is among them. The result can be written through:
  /// `x.index({...}).assign(v)` (see IndexedTensor).
  IndexedTensor index(std::initializer_list<TensorIndex> indices) const;
  IndexedTensor index(const std::vector<TensorIndex>& indices) const;
  /// x[indices] = values (values broadcast to x.index(indices)'s shape and
  /// cast to x's dtype with same_kind): writes through to x's memory. With
  /// advanced indices a repeated position keeps the last value (numpy).
  const Tensor& index_put_(std::initializer_list<TensorIndex> indices, const Tensor& values) const;
  const Tensor& index_put_(std::initializer_list<TensorIndex> indices, Scalar value) const;

  /// Shares the impl: true when both handles are the same tensor.
  bool is_same(const Tensor& o) const { return impl_ == o.impl_; }
  // Inline: every accessor goes through it (about 30 times per eager op); the
  // throw stays out of line.
  detail::TensorImpl& impl() const {
    if (!impl_) [[unlikely]] detail::throw_undefined_tensor();
    return *impl_;
  }
  const std::shared_ptr<detail::TensorImpl>& impl_ptr() const { return impl_; }
  explicit Tensor(std::shared_ptr<detail::TensorImpl> impl) : impl_(std::move(impl)) {}

 private:
  void check_dtype(DType want, const char* what) const;
  std::shared_ptr<detail::TensorImpl> impl_;
};

/// Prints in numpy's format, e.g. `[[1., 2.],\n [3., 4.]]`; tensors with
/// more than 1000 elements are summarised with `...` (3 items each side).
/// Precision, summarising, line width and scientific notation follow this
/// thread's PrintOptions (print_options.h). Throws DeviceError for a
/// tensor that is not on the CPU.
std::ostream& operator<<(std::ostream& os, const Tensor& t);

extern template float Tensor::item<float>() const;
extern template double Tensor::item<double>() const;
extern template int32_t Tensor::item<int32_t>() const;
extern template int64_t Tensor::item<int64_t>() const;
extern template bool Tensor::item<bool>() const;
extern template int16_t Tensor::item<int16_t>() const;
extern template uint16_t Tensor::item<uint16_t>() const;
extern template uint32_t Tensor::item<uint32_t>() const;
extern template uint64_t Tensor::item<uint64_t>() const;
extern template uint8_t Tensor::item<uint8_t>() const;
extern template int8_t Tensor::item<int8_t>() const;
extern template float16_t Tensor::item<float16_t>() const;
extern template bfloat16_t Tensor::item<bfloat16_t>() const;
extern template std::vector<int16_t> Tensor::to_vector<int16_t>() const;
extern template std::vector<uint16_t> Tensor::to_vector<uint16_t>() const;
extern template std::vector<uint32_t> Tensor::to_vector<uint32_t>() const;
extern template std::vector<uint64_t> Tensor::to_vector<uint64_t>() const;
extern template std::vector<float> Tensor::to_vector<float>() const;
extern template std::vector<double> Tensor::to_vector<double>() const;
extern template std::vector<int32_t> Tensor::to_vector<int32_t>() const;
extern template std::vector<int64_t> Tensor::to_vector<int64_t>() const;
extern template std::vector<uint8_t> Tensor::to_vector<uint8_t>() const;
extern template std::vector<int8_t> Tensor::to_vector<int8_t>() const;
extern template std::vector<bool> Tensor::to_vector<bool>() const;
extern template std::vector<float16_t> Tensor::to_vector<float16_t>() const;
extern template std::vector<bfloat16_t> Tensor::to_vector<bfloat16_t>() const;

}  // namespace kiln

// IndexedTensor (the result of x[i] and x.index({...})) is complete wherever
// Tensor is, so that `x[0] = v` and `auto r = x[0];` need no other include.
#include "indexing.h"  // IWYU pragma: export
