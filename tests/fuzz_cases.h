// The differential fuzzer's random graphs (tests/test_fuzz_compile.cpp runs
// them eagerly, compiled and in float64; tests/test_cuda_compiled.cpp
// compiles their fused groups for CUDA with NVRTC): 1 to 30 ops from the op
// table, random shapes with broadcasting and size-0/size-1 dims, random
// strides, every dtype. make_case(seed) is a pure function of the seed.
#pragma once
#include <cstring>
#include <random>

#include "test_util.h"

namespace kiln::fuzz_cases {

struct FuzzOp {
  enum Kind { unary, binary, reduce, softmax, reshape, transpose, inplace_unary, inplace_binary, inplace_flip } kind;
  OpId op;
  int a = 0, b = 0;  // operand indices into the value pool
  int64_t axis = 0;
  bool keepdim = false;
};

// Smooth float ops (no discontinuity, so tiny rounding differences stay tiny).
inline const OpId kFloatUnary[] = {OpId::Neg, OpId::Abs, OpId::Exp, OpId::Tanh, OpId::Sigmoid, OpId::Sin,
                            OpId::Cos, OpId::Square, OpId::Silu, OpId::Gelu, OpId::Erf, OpId::Relu};
inline const OpId kFloatBinary[] = {OpId::Add, OpId::Sub, OpId::Mul, OpId::Maximum, OpId::Minimum};
// Integer chains stay small: |inputs| <= 5 and at most 30 ops of which
// add/sub at most double the range, so int32 never overflows (5 * 2^30 > 2^31
// is prevented by the cap on ops below).
inline const OpId kIntUnary[] = {OpId::Neg, OpId::Abs};
inline const OpId kIntBinary[] = {OpId::Add, OpId::Sub, OpId::Maximum, OpId::Minimum};

struct FuzzCase {
  DType dtype;
  std::vector<Tensor> inputs;
  std::vector<FuzzOp> ops;
  std::vector<int> outputs;
};

inline Shape random_shape(std::mt19937_64& rng, const Shape& base) {
  // A shape that broadcasts with `base`: some axes set to 1 or dropped.
  Shape s = base;
  for (auto& d : s)
    if (rng() % 4 == 0) d = 1;
  size_t drop = rng() % (s.size() + 1);
  if (rng() % 3 == 0) s.erase(s.begin(), s.begin() + static_cast<long>(std::min(drop, s.size())));
  return s;
}

inline Tensor apply_fuzz_op(const FuzzOp& o, const std::vector<Tensor>& pool) {
  const Tensor& x = pool[o.a];
  switch (o.kind) {
    case FuzzOp::unary: return apply(o.op, x);
    case FuzzOp::binary: return apply(o.op, x, pool[o.b]);
    case FuzzOp::reduce: return o.op == OpId::Sum ? sum(x, {o.axis}, o.keepdim) : max(x, {o.axis}, o.keepdim);
    case FuzzOp::softmax: return softmax(x, o.axis);
    case FuzzOp::reshape: return reshape(x, {-1});
    case FuzzOp::transpose: return transpose(x, 0, x.ndim() - 1);
    // In place into pool[a]; the op's value is the written tensor itself.
    case FuzzOp::inplace_unary: return o.op == OpId::Neg ? x.neg_() : o.op == OpId::Abs ? x.abs_() : x.tanh_();
    case FuzzOp::inplace_binary: {
      const Tensor& y = pool[o.b];
      return o.op == OpId::Add ? x.add_(y) : o.op == OpId::Sub ? (x -= y) : x.maximum_(y);
    }
    case FuzzOp::inplace_flip: return x.add_(flip(x));  // the operand aliases the destination
  }
  return x;
}

// Copies with the very same layout (strides, offset, buffer size).
inline std::vector<Tensor> clone_like(const std::vector<Tensor>& xs) {
  std::vector<Tensor> r;
  for (const Tensor& t : xs) {
    Buffer b = Buffer::allocate(t.buffer().nbytes());
    std::memcpy(b.data(), t.buffer().data(), t.buffer().nbytes());
    r.emplace_back(b, t.dtype(), t.shape(), t.strides(), t.offset());
  }
  return r;
}

inline std::vector<Tensor> run_case(const FuzzCase& c, const std::vector<Tensor>& xs) {
  std::vector<Tensor> pool = xs;
  for (const auto& o : c.ops) pool.push_back(apply_fuzz_op(o, pool));
  std::vector<Tensor> out;
  for (int k : c.outputs) out.push_back(pool[k]);
  return out;
}

inline FuzzCase make_case(uint64_t seed) {
  std::mt19937_64 rng(seed);
  static const DType kTypes[] = {DType::float32, DType::float32, DType::float32, DType::float64,
                                 DType::float16, DType::bfloat16, DType::int32,  DType::int64};
  FuzzCase c;
  c.dtype = kTypes[rng() % 8];
  const bool is_float = is_floating(c.dtype);
  Shape base;
  int nd = static_cast<int>(rng() % 4);
  for (int i = 0; i < nd; ++i) base.push_back(static_cast<int64_t>(rng() % 6) + (rng() % 9 == 0 ? -1 : 0) + 1);
  for (auto& d : base) d = std::max<int64_t>(d, 0);  // occasional size-0 dims
  int nin = 1 + static_cast<int>(rng() % 3);
  std::vector<Shape> shapes;
  for (int i = 0; i < nin; ++i) {
    Shape s = i == 0 ? base : random_shape(rng, base);
    shapes.push_back(s);
    Tensor t = kt::random_tensor(s, c.dtype, seed * 31 + i, false, 1.0, -5, 5);
    c.inputs.push_back(kt::relayout(t, static_cast<kt::ViewKind>(rng() % 4)));
  }
  std::vector<Shape> pool = shapes;
  // Values that are views or have views taken (reshape/transpose): not
  // written in place (a traced write through a view is refused, by design).
  std::vector<char> viewish(pool.size(), 0);
  std::vector<size_t> root(pool.size());  // an in-place op's value is the tensor it wrote: one root per tensor
  for (size_t i = 0; i < root.size(); ++i) root[i] = i;
  int nops = 1 + static_cast<int>(rng() % (is_float ? 30 : 24));
  for (int k = 0; k < nops; ++k) {
    FuzzOp o;
    o.a = static_cast<int>(rng() % pool.size());
    const Shape& sa = pool[o.a];
    int pick = static_cast<int>(rng() % 12);
    if (pick >= 10 && !viewish[root[o.a]]) {
      // in place: unary, binary with a partner that broadcasts to the destination, or x += flip(x)
      const int which = static_cast<int>(rng() % 3);
      std::vector<int> ok;
      for (size_t j = 0; j < pool.size(); ++j) {
        try {
          if (broadcast_shapes(sa, pool[j], "fuzz") == sa) ok.push_back(static_cast<int>(j));
        } catch (const ShapeError&) {
        }
      }
      if (which == 0) {
        o.kind = FuzzOp::inplace_unary;
        o.op = is_float ? (rng() % 2 ? OpId::Tanh : OpId::Neg) : (rng() % 2 ? OpId::Abs : OpId::Neg);
      } else if (which == 1 && !ok.empty()) {
        o.kind = FuzzOp::inplace_binary;
        const OpId ops3[] = {OpId::Add, OpId::Sub, OpId::Maximum};
        o.op = ops3[rng() % 3];
        o.b = ok[rng() % ok.size()];
      } else {
        o.kind = FuzzOp::inplace_flip;
      }
      pool.push_back(sa);
      root.push_back(root[o.a]);
    } else if (pick < 5) {
      o.kind = FuzzOp::unary;
      o.op = is_float ? kFloatUnary[rng() % std::size(kFloatUnary)] : kIntUnary[rng() % std::size(kIntUnary)];
      pool.push_back(sa);
    } else if (pick < 8) {
      o.kind = FuzzOp::binary;
      o.op = is_float ? kFloatBinary[rng() % std::size(kFloatBinary)] : kIntBinary[rng() % std::size(kIntBinary)];
      // A partner whose shape broadcasts with sa.
      std::vector<int> ok;
      for (size_t j = 0; j < pool.size(); ++j) {
        try {
          broadcast_shapes(sa, pool[j], "fuzz");
          ok.push_back(static_cast<int>(j));
        } catch (const ShapeError&) {
        }
      }
      o.b = ok[rng() % ok.size()];
      pool.push_back(broadcast_shapes(sa, pool[o.b], "fuzz"));
    } else if (pick == 8 && !sa.empty()) {
      o.axis = static_cast<int64_t>(rng() % sa.size());
      bool has_empty_axis = sa[o.axis] == 0;
      if (rng() % 2 == 0 || !is_float || has_empty_axis) {
        o.kind = FuzzOp::reduce;
        o.op = has_empty_axis ? OpId::Sum : (rng() % 2 ? OpId::Sum : OpId::Max);
        o.keepdim = rng() % 2;
        Shape r = sa;
        if (o.keepdim) r[o.axis] = 1;
        else r.erase(r.begin() + o.axis);
        pool.push_back(r);
      } else {
        o.kind = FuzzOp::softmax;
        pool.push_back(sa);
      }
    } else if (!sa.empty() && pick < 10) {
      o.kind = rng() % 2 ? FuzzOp::reshape : FuzzOp::transpose;
      viewish[root[o.a]] = 1;
      if (o.kind == FuzzOp::reshape) pool.push_back({checked_numel(sa)});
      else {
        Shape t = sa;
        std::swap(t.front(), t.back());
        pool.push_back(t);
      }
    } else {
      o.kind = FuzzOp::unary;
      o.op = OpId::Neg;
      pool.push_back(sa);
    }
    viewish.resize(pool.size(), 0);
    if (root.size() < pool.size()) root.push_back(pool.size() - 1);
    if (o.kind == FuzzOp::reshape || o.kind == FuzzOp::transpose) viewish.back() = 1;
    c.ops.push_back(o);
  }
  // Outputs: the last value plus a random earlier one.
  c.outputs.push_back(static_cast<int>(pool.size() - 1));
  if (pool.size() > 1 && rng() % 2) c.outputs.push_back(static_cast<int>(rng() % (pool.size() - 1)));
  return c;
}

}  // namespace kiln::fuzz_cases
