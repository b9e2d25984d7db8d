// kiln (internal): SmallVector<T, N>, a std::vector-like array of trivially
// copyable T that keeps up to N elements inside the object and longer ones
// on the heap. With sizeof(T) * N == 16 it has a std::vector's size. The
// graph's value-id lists (trace/graph.h ValueList) and a plan step's constant
// table (jit/plan.h ImmTable) use it: most nodes and steps then own no heap
// block, so a walk over a big graph reads its node array in order, and
// restoring or freeing a plan costs no allocation per list.
#pragma once
#include <cstddef>
#include <cstdint>
#include <initializer_list>
#include <iterator>
#include <stdexcept>
#include <type_traits>
#include <vector>

namespace kiln {

template <class T, uint32_t N>
class SmallVector {
  static_assert(std::is_trivially_copyable_v<T> && N > 0);

 public:
  using value_type = T;
  using size_type = size_t;
  using difference_type = std::ptrdiff_t;
  using reference = T&;
  using const_reference = const T&;
  using pointer = T*;
  using const_pointer = const T*;
  using iterator = T*;
  using const_iterator = const T*;

  SmallVector() noexcept {}
  SmallVector(std::initializer_list<T> il) { assign(il.begin(), il.end()); }
  SmallVector(const std::vector<T>& v) { assign(v.begin(), v.end()); }  // NOLINT: implicit, as the old vector
  SmallVector(const SmallVector& o) { assign(o.begin(), o.end()); }
  SmallVector(SmallVector&& o) noexcept { steal(o); }
  SmallVector& operator=(const SmallVector& o) {
    if (this != &o) assign(o.begin(), o.end());
    return *this;
  }
  SmallVector& operator=(SmallVector&& o) noexcept {
    if (this != &o) {
      release();
      steal(o);
    }
    return *this;
  }
  SmallVector& operator=(std::initializer_list<T> il) {
    assign(il.begin(), il.end());
    return *this;
  }
  ~SmallVector() { release(); }

  size_t size() const noexcept { return size_; }
  bool empty() const noexcept { return size_ == 0; }
  size_t capacity() const noexcept { return cap_; }
  T* data() noexcept { return cap_ > kInline ? heap_ : inline_; }
  const T* data() const noexcept { return cap_ > kInline ? heap_ : inline_; }
  iterator begin() noexcept { return data(); }
  iterator end() noexcept { return data() + size_; }
  const_iterator begin() const noexcept { return data(); }
  const_iterator end() const noexcept { return data() + size_; }
  const_iterator cbegin() const noexcept { return begin(); }
  const_iterator cend() const noexcept { return end(); }
  T& operator[](size_t i) noexcept { return data()[i]; }
  const T& operator[](size_t i) const noexcept { return data()[i]; }
  T& at(size_t i) {
    if (i >= size_) throw std::out_of_range("SmallVector::at");
    return data()[i];
  }
  const T& at(size_t i) const {
    if (i >= size_) throw std::out_of_range("SmallVector::at");
    return data()[i];
  }
  T& front() noexcept { return data()[0]; }
  const T& front() const noexcept { return data()[0]; }
  T& back() noexcept { return data()[size_ - 1]; }
  const T& back() const noexcept { return data()[size_ - 1]; }

  void push_back(T v) {
    if (size_ == cap_) grow(2 * static_cast<size_t>(cap_));
    data()[size_++] = v;
  }
  void emplace_back(T v) { push_back(v); }
  void pop_back() noexcept { --size_; }
  void clear() noexcept { size_ = 0; }
  void reserve(size_t n) {
    if (n > cap_) grow(n);
  }
  void resize(size_t n, T v = 0) {
    reserve(n);
    for (size_t i = size_; i < n; ++i) data()[i] = v;
    size_ = static_cast<uint32_t>(n);
  }
  template <class It>
  void assign(It first, It last) {
    clear();
    if constexpr (std::is_base_of_v<std::forward_iterator_tag,
                                    typename std::iterator_traits<It>::iterator_category>)
      reserve(static_cast<size_t>(std::distance(first, last)));
    for (; first != last; ++first) push_back(*first);
  }

  operator std::vector<T>() const { return std::vector<T>(begin(), end()); }  // NOLINT: implicit
  friend bool operator==(const SmallVector& a, const SmallVector& b) noexcept {
    if (a.size_ != b.size_) return false;
    for (uint32_t i = 0; i < a.size_; ++i)
      if (a[i] != b[i]) return false;
    return true;
  }

 private:
  static constexpr uint32_t kInline = N;
  void grow(size_t n) {
    if (n > UINT32_MAX) throw std::length_error("SmallVector: too many elements");
    T* p = new T[n];
    for (uint32_t i = 0; i < size_; ++i) p[i] = data()[i];
    release();
    heap_ = p;
    cap_ = static_cast<uint32_t>(n);
  }
  void release() noexcept {
    if (cap_ > kInline) delete[] heap_;
    cap_ = kInline;
  }
  // Requires cap_ == kInline (released): takes o's elements, leaves o empty.
  void steal(SmallVector& o) noexcept {
    size_ = o.size_;
    if (o.cap_ > kInline) {
      heap_ = o.heap_;
      cap_ = o.cap_;
    } else {
      for (uint32_t i = 0; i < o.size_; ++i) inline_[i] = o.inline_[i];
    }
    o.size_ = 0;
    o.cap_ = kInline;
  }
  uint32_t size_ = 0, cap_ = kInline;  // cap_ == kInline: the elements are in inline_
  union {
    T inline_[kInline] = {};
    T* heap_;
  };
};

}  // namespace kiln
