// kiln (internal): the loop plumbing shared by the unary, binary and ternary
// CPU kernels. The strided loop engine (strided_loop.h) hands a kernel runs of
// n elements with byte strides; here an operand of such a run is read in
// place when it already is a unit-stride array of the compute type, and
// otherwise staged block by block into a small buffer (converting
// float16/bfloat16 to float, gathering strided or broadcast elements). The
// same block function therefore serves contiguous and strided operands, so
// both give identical results.
#pragma once
#include <algorithm>
#include <array>
#include <cstdint>
#include <type_traits>

#include "../../tensor/dispatch.h"
#include "strided_loop.h"

namespace kiln::cpu::ew {

/// Elements per staged block: 512 x 8 bytes per operand stays in L1.
inline constexpr int64_t kBlock = 512;

/// An input operand over one run, read as the compute type C.
template <class S, class C>
class StagedInput {
 public:
  StagedInput(const char* p, int64_t stride) : p_(p), st_(stride) {}
  /// Readable in place as a unit-stride array of C.
  bool direct() const { return std::is_same_v<S, C> && st_ == static_cast<int64_t>(sizeof(S)); }
  /// One value repeated over the run (stride 0).
  bool broadcast() const { return st_ == 0; }
  C value() const { return detail::convert<C>(*reinterpret_cast<const S*>(p_)); }
  /// Elements [i0, i0 + m) as a unit-stride array (m <= kBlock unless direct()).
  const C* block(int64_t i0, int64_t m) {
    if (direct()) return reinterpret_cast<const C*>(p_) + i0;
    stage(i0, m);
    return buf_;
  }

 private:
  // Out of line: one copy per (S, C) instead of one per op (compile time).
  [[gnu::noinline]] void stage(int64_t i0, int64_t m) {
    const char* q = p_ + i0 * st_;
    for (int64_t i = 0; i < m; ++i, q += st_) buf_[i] = detail::convert<C>(*reinterpret_cast<const S*>(q));
  }

  const char* p_;
  int64_t st_;
  alignas(64) C buf_[kBlock];
};

/// The output operand over one run: the kernel writes values of type O,
/// stored as SO (in place when they coincide and the stride is unit).
template <class O, class SO>
class StagedOutput {
 public:
  StagedOutput(char* p, int64_t stride) : p_(p), st_(stride) {}
  bool direct() const { return std::is_same_v<O, SO> && st_ == static_cast<int64_t>(sizeof(SO)); }
  /// Where the kernel writes elements [i0, i0 + m).
  O* block(int64_t i0) { return direct() ? reinterpret_cast<O*>(p_) + i0 : buf_; }
  /// Stores a staged block (no-op when written in place).
  void commit(int64_t i0, int64_t m) {
    if (!direct()) store(i0, m);
  }

 private:
  [[gnu::noinline]] void store(int64_t i0, int64_t m) {
    char* q = p_ + i0 * st_;
    for (int64_t i = 0; i < m; ++i, q += st_) *reinterpret_cast<SO*>(q) = detail::convert<SO>(buf_[i]);
  }

  char* p_;
  int64_t st_;
  alignas(64) O buf_[kBlock];
};

/// Calls body(i0, m) over [0, n): once when `whole`, else in blocks of kBlock.
template <class Body>
inline void for_blocks(int64_t n, bool whole, Body&& body) {
  if (whole) {
    body(int64_t(0), n);
    return;
  }
  for (int64_t i0 = 0; i0 < n; i0 += kBlock) body(i0, std::min(kBlock, n - i0));
}

/// A run of the strided loop: inner(ptrs, byte_strides, n). A plain function
/// pointer, so the loop engine is instantiated once per operand count rather
/// than once per op and dtype (compile time; the call is per run, not per
/// element).
using InnerFn = void (*)(char** p, const int64_t* st, int64_t n);

/// Runs inner over ops[0]'s shape (ops[0] is the output; the others
/// broadcast to it). Small loops whose operands are all contiguous with the
/// output's element count, or single elements, skip the loop engine: one
/// call, no allocation, no thread start.
template <int N>
void launch(const std::array<const Tensor*, N>& ops, InnerFn inner) {
  const Tensor& out = *ops[0];
  const int64_t n = out.numel();
  if (n == 0) return;
  if (n < kParallelGrain && out.is_contiguous()) {
    std::array<char*, N> p;
    std::array<int64_t, N> st;
    bool flat = true;
    for (int k = 0; k < N && flat; ++k) {
      const Tensor& t = *ops[k];
      const int64_t tn = t.numel();
      if (tn == 1 && k > 0 && n > 1) st[k] = 0;
      else if (tn == n && t.is_contiguous()) st[k] = static_cast<int64_t>(t.itemsize());
      else flat = false;
      p[k] = static_cast<char*>(t.data_ptr());
    }
    if (flat) {
      inner(p.data(), st.data(), n);
      return;
    }
  }
  run_loop(make_loop<N>(out.shape(), ops), inner);
}

}  // namespace kiln::cpu::ew
