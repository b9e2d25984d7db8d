// Algebraic simplification: local rewrites in one walk (see passes.h for the
// list and why each is exact). A rewrite that removes a node makes its value
// read the surviving one; composed views (permute of permute, reshape of
// reshape) edit the outer node in place so that chains collapse in one walk.
#include <cmath>
#include <cstring>

#include "../../tensor/dispatch.h"
#include "passes.h"
#include "rewriter.h"

namespace kiln {
namespace {

// Broadcasting a one-element constant materialises it up to this size.
constexpr int64_t kMaxBroadcastConstant = 1024;

enum class Identity { one, int_zero_or_neg_zero, pos_zero };

// True when every element of the CPU constant `c` is the identity: 1; 0 for
// integer/bool and -0.0 for floats (additive identity of IEEE addition); 0
// for integer/bool and +0.0 for floats (x - (+0.0) = x, also for x = -0.0).
bool all_identity(const Tensor& c, Identity want) {
  if (!c.device().is_cpu()) return false;
  const int64_t n = c.numel();
  return detail::visit_dtype(c.dtype(), [&](auto tag) {
    using T = typename decltype(tag)::type;
    const T* p = static_cast<const T*>(c.data_ptr());
    for (int64_t i = 0; i < n; ++i) {
      const auto v = static_cast<detail::compute_t<T>>(p[i]);
      bool ok;
      if constexpr (std::is_floating_point_v<decltype(v)>) {
        ok = want == Identity::one ? v == 1 : v == 0 && std::signbit(v) == (want == Identity::int_zero_or_neg_zero);
      } else {
        ok = want == Identity::one ? v == 1 : v == 0;
      }
      if (!ok) return false;
    }
    return true;
  });
}

// Per (constant value, identity) whether all_identity holds, computed once:
// a large constant used by many nodes is scanned once, not once per use.
class IdentityCache {
 public:
  explicit IdentityCache(size_t values) : known_(3 * values, 0) {}
  bool all(const Node& constant, int32_t value, Identity want) {
    uint8_t& k = known_[3 * static_cast<size_t>(value) + static_cast<size_t>(want)];
    if (k == 0) k = all_identity(constant.data, want) ? 2 : 1;
    return k == 2;
  }

 private:
  std::vector<uint8_t> known_;  // 0 unknown, 1 no, 2 yes
};

// `which` is a constant of identity elements and `other` keeps the result type.
bool is_identity_operand(detail::Rewriter& rw, IdentityCache& cache, int32_t which, int32_t other, int32_t result,
                         Identity want) {
  // The producer's kind first: a node just read, while comparing the types
  // reads two shapes off the heap. Then the types (no promotion or broadcast
  // lost), then the elements (cached per constant).
  const Node& p = rw.producer(which);
  if (p.kind != NodeKind::constant) return false;
  const Graph& g = rw.graph();
  return g.type(other) == g.type(result) && cache.all(p, which, want);
}

bool is_op(const Node& n, OpId op) { return n.kind == NodeKind::op && n.op == op; }

// Non-negative permutation (the node verified, so entries are in range).
std::vector<int64_t> normalized_perm(const std::vector<int64_t>& p) {
  std::vector<int64_t> r(p);
  const int64_t nd = static_cast<int64_t>(p.size());
  for (int64_t& a : r)
    if (a < 0) a += nd;
  return r;
}

bool is_identity_perm(const std::vector<int64_t>& p) {
  for (size_t i = 0; i < p.size(); ++i)
    if (p[i] != static_cast<int64_t>(i)) return false;
  return true;
}

// A contiguous constant of `t`'s type with every element equal to the one
// element of `c`.
Tensor filled_like(const Tensor& c, const TensorType& t) {
  Tensor r = Tensor::empty(t.shape, t.dtype);
  const size_t item = c.itemsize();
  const Tensor one = c.contiguous();
  const char* src = static_cast<const char*>(one.data_ptr());
  char* dst = static_cast<char*>(r.data_ptr());
  const int64_t n = r.numel();
  for (int64_t i = 0; i < n; ++i) std::memcpy(dst + static_cast<size_t>(i) * item, src, item);
  return r;
}

// Rewrites node i if a rule applies. `is_output`: per value, whether it is
// a graph output.
void simplify(detail::Rewriter& rw, IdentityCache& ids, const std::vector<char>& is_output, size_t i) {
  const Graph& g = rw.graph();
  Node& n = rw.nodes()[i];
  if (n.kind != NodeKind::op) return;
  const int32_t out = n.outputs[0];
  switch (n.op) {
    case OpId::Mul:
      if (is_identity_operand(rw, ids, n.inputs[1], n.inputs[0], out, Identity::one)) rw.replace(i, n.inputs[0]);
      else if (is_identity_operand(rw, ids, n.inputs[0], n.inputs[1], out, Identity::one)) rw.replace(i, n.inputs[1]);
      return;
    case OpId::Add:
      if (is_identity_operand(rw, ids, n.inputs[1], n.inputs[0], out, Identity::int_zero_or_neg_zero))
        rw.replace(i, n.inputs[0]);
      else if (is_identity_operand(rw, ids, n.inputs[0], n.inputs[1], out, Identity::int_zero_or_neg_zero))
        rw.replace(i, n.inputs[1]);
      return;
    case OpId::Sub:
      if (is_identity_operand(rw, ids, n.inputs[1], n.inputs[0], out, Identity::pos_zero)) rw.replace(i, n.inputs[0]);
      return;
    case OpId::Div:
      if (is_identity_operand(rw, ids, n.inputs[1], n.inputs[0], out, Identity::one)) rw.replace(i, n.inputs[0]);
      return;
    case OpId::Neg: {
      const Node& p = rw.producer(n.inputs[0]);
      if (is_op(p, OpId::Neg) && g.type(p.inputs[0]) == g.type(out)) rw.replace(i, p.inputs[0]);
      return;
    }
    case OpId::Permute: {
      std::vector<int64_t> perm = normalized_perm(n.attrs.ints);
      const Node& p = rw.producer(n.inputs[0]);
      if (is_op(p, OpId::Permute)) {
        // out[k] = mid[perm[k]] = x[inner[perm[k]]]
        const std::vector<int64_t> inner = normalized_perm(p.attrs.ints);
        for (int64_t& a : perm) a = inner[static_cast<size_t>(a)];
        n.inputs[0] = p.inputs[0];
        n.attrs.ints = perm;
        rw.touched();
      }
      if (is_identity_perm(perm)) rw.replace(i, n.inputs[0]);
      return;
    }
    case OpId::Reshape: {
      const Node& p = rw.producer(n.inputs[0]);
      if (is_op(p, OpId::Reshape)) {
        n.inputs[0] = p.inputs[0];
        n.attrs.ints = g.type(out).shape;  // resolved: a -1 referred to the inner result
        rw.touched();
      }
      if (g.type(n.inputs[0]) == g.type(out)) rw.replace(i, n.inputs[0]);
      return;
    }
    case OpId::Cast: {
      // A reshape eager copies is recorded as the reshape and a copy (a
      // same-dtype cast, realization_context.cpp): as values, the two are
      // the reshape. Where the plan's reshape step cannot be a view it
      // copies anyway, so the cast would copy a second time.
      const Node& p = rw.producer(n.inputs[0]);
      if (is_op(p, OpId::Reshape) && !is_output[static_cast<size_t>(out)] && g.type(n.inputs[0]) == g.type(out))
        rw.replace(i, n.inputs[0]);
      return;
    }
    case OpId::BroadcastTo: {
      if (g.type(n.inputs[0]) == g.type(out)) {
        rw.replace(i, n.inputs[0]);
        return;
      }
      const Node& p = rw.producer(n.inputs[0]);
      const TensorType& t = g.type(out);
      if (p.kind == NodeKind::constant && p.data.device().is_cpu() && t.device.is_cpu() && p.data.numel() == 1 &&
          checked_numel(t.shape) <= kMaxBroadcastConstant) {
        n.data = filled_like(p.data, t);
        n.kind = NodeKind::constant;
        n.inputs.clear();
        n.attrs = Attrs{};
        n.op = OpId{};
        rw.touched();
      }
      return;
    }
    default: return;
  }
}

}  // namespace

bool detail::run_algebraic_simplification(Graph& g) {
  Rewriter rw(g);
  IdentityCache ids(g.num_values());
  std::vector<char> is_output(g.num_values(), 0);
  for (int32_t v : g.output_ids()) is_output[static_cast<size_t>(v)] = 1;
  for (size_t i = 0; i < rw.nodes().size(); ++i) {
    rw.read_inputs(i);
    simplify(rw, ids, is_output, i);
  }
  return rw.commit();
}

void algebraic_simplification(Graph& g) { detail::run_algebraic_simplification(g); }

}  // namespace kiln
