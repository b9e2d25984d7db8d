// kiln (internal): the tensors of one call, borrowed (no handle copied).
//
// A call's argument leaves come either as an array of handles (execute_raw's
// span, a flattened argument vector) or as an array of their addresses (the
// leaves of struct arguments gathered by address, pytree_fixed.h). Copying a
// handle into an array costs two atomic reference-count updates (the copy
// and its destruction): 20 per call for a training step's ten leaves. The
// call path (the checked call, its checks and write-back, engine::Model and
// ExecutionPlan::run) reads the leaves through this view instead, which
// holds neither the tensors nor the array: both must outlive it (a call's
// arguments do).
#pragma once
#include <cstddef>
#include <iterator>
#include <span>
#include <vector>

#include "../tensor/tensor.h"

namespace kiln::detail {

class TensorRefs {
 public:
  TensorRefs() = default;
  /// The tensors of an array of handles.
  TensorRefs(std::span<const Tensor> s) noexcept : flat_(s.data()), n_(s.size()) {}  // NOLINT: implicit by design
  TensorRefs(const std::vector<Tensor>& v) noexcept : flat_(v.data()), n_(v.size()) {}  // NOLINT
  /// The tensors an array of addresses points at (each non-null).
  TensorRefs(std::span<const Tensor* const> p) noexcept : refs_(p.data()), n_(p.size()) {}  // NOLINT

  size_t size() const noexcept { return n_; }
  bool empty() const noexcept { return n_ == 0; }
  const Tensor& operator[](size_t i) const noexcept { return refs_ ? *refs_[i] : flat_[i]; }
  /// Handles copied into a vector (for the cold paths: a traced call, an error).
  std::vector<Tensor> to_vector() const { return std::vector<Tensor>(begin(), end()); }

  class iterator {
   public:
    using iterator_category = std::forward_iterator_tag;
    using value_type = Tensor;
    using difference_type = std::ptrdiff_t;
    using pointer = const Tensor*;
    using reference = const Tensor&;
    iterator() = default;
    iterator(const TensorRefs* r, size_t i) : r_(r), i_(i) {}
    reference operator*() const { return (*r_)[i_]; }
    pointer operator->() const { return &(*r_)[i_]; }
    iterator& operator++() {
      ++i_;
      return *this;
    }
    iterator operator++(int) {
      iterator t = *this;
      ++i_;
      return t;
    }
    bool operator==(const iterator& o) const { return i_ == o.i_; }

   private:
    const TensorRefs* r_ = nullptr;
    size_t i_ = 0;
  };
  iterator begin() const { return {this, 0}; }
  iterator end() const { return {this, n_}; }

 private:
  const Tensor* flat_ = nullptr;
  const Tensor* const* refs_ = nullptr;
  size_t n_ = 0;
};

}  // namespace kiln::detail
