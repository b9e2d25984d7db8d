// kiln tests: shape and indexing (the View and Data categories of the op
// table and their front end in tensor/ops.h). The table checkers compare each
// row with a reference computed here by index arithmetic on the input's
// values; literals come from numpy, Python or PyTorch and are labelled so.
#include <algorithm>
#include <functional>
#include <sstream>
#include <type_traits>

#include "../tensor/ref_ops.h"
#include "op_table_checks.h"
#include "test_util.h"

namespace kt {
namespace {

// ---- inputs ---------------------------------------------------------------------

template <class T>
Tensor from_doubles(const std::vector<double>& v, const Shape& s, DType d) {
  std::vector<T> t;
  t.reserve(v.size());
  for (double x : v) {
    if constexpr (std::is_same_v<T, float16_t> || std::is_same_v<T, bfloat16_t>) t.push_back(T(static_cast<float>(x)));
    else t.push_back(static_cast<T>(x));
  }
  return Tensor::from_data(t.data(), d, t.size(), s);
}

// Distinct-ish values of `d` (NaN/inf/-0 among floats), made without the
// cast op so these tests depend only on the ops under test. Ints stay small
// so every promotion in concat is exact.
Tensor input(const Shape& s, DType d, uint64_t seed) {
  std::mt19937_64 rng(seed * 1000003 + 11);
  const int64_t n = checked_numel(s);
  std::vector<double> v(n);
  for (int64_t i = 0; i < n; ++i) {
    int64_t r = static_cast<int64_t>(rng() % 200) - 100;
    if (d == DType::bool_) v[i] = static_cast<double>(r & 1);
    else if (is_unsigned(d)) v[i] = static_cast<double>(r + 100);
    else if (!is_floating(d)) v[i] = static_cast<double>(r);
    else {
      v[i] = static_cast<double>(r) / 8.0;
      switch (rng() % 12) {
        case 0: v[i] = std::numeric_limits<double>::quiet_NaN(); break;
        case 1: v[i] = std::numeric_limits<double>::infinity(); break;
        case 2: v[i] = -std::numeric_limits<double>::infinity(); break;
        case 3: v[i] = -0.0; break;
        default: break;
      }
    }
  }
  switch (d) {
    case DType::bool_: return from_doubles<uint8_t>(v, s, d);
    case DType::uint8: return from_doubles<uint8_t>(v, s, d);
    case DType::int8: return from_doubles<int8_t>(v, s, d);
    case DType::int32: return from_doubles<int32_t>(v, s, d);
    case DType::int64: return from_doubles<int64_t>(v, s, d);
    case DType::int16: return from_doubles<int16_t>(v, s, d);
    case DType::uint16: return from_doubles<uint16_t>(v, s, d);
    case DType::uint32: return from_doubles<uint32_t>(v, s, d);
    case DType::uint64: return from_doubles<uint64_t>(v, s, d);
    case DType::float16: return from_doubles<float16_t>(v, s, d);
    case DType::bfloat16: return from_doubles<bfloat16_t>(v, s, d);
    case DType::float32: return from_doubles<float>(v, s, d);
    default: return from_doubles<double>(v, s, d);
  }
}

// Random indices in [lo, hi] of an index dtype.
Tensor indices(const Shape& s, DType d, int64_t lo, int64_t hi, uint64_t seed) {
  std::mt19937_64 rng(seed * 31 + 7);
  std::vector<double> v(checked_numel(s));
  for (double& x : v) x = static_cast<double>(lo + static_cast<int64_t>(rng() % static_cast<uint64_t>(hi - lo + 1)));
  return d == DType::int32 ? from_doubles<int32_t>(v, s, d) : from_doubles<int64_t>(v, s, d);
}

// The position an index value v in [-n, n) names along an axis of extent n
// (a negative one counts from the end).
int64_t wrap_index(double v, int64_t n) {
  const int64_t i = static_cast<int64_t>(v);
  return i < 0 ? i + n : i;
}

// index_select's and index_add's cases: for each axis `ax` of s (extent n)
// and each index dtype (int32, int64), a 1-d index of 5 positions in
// [-n, n) (of none when n = 0) with k's layout; f adds the cases it checks.
int for_each_axis_index(const Shape& s, ViewKind k, uint64_t seed,
                        const std::function<int(int64_t ax, DType idt, const Tensor& idx)>& f) {
  int cases = 0;
  for (int64_t ax = 0; ax < static_cast<int64_t>(s.size()); ++ax) {
    const int64_t n = s[ax];
    for (DType idt : {DType::int32, DType::int64})
      cases += f(ax, idt, relayout(indices({n > 0 ? 5 : 0}, idt, -n, n - 1, seed + ax), k));
  }
  return cases;
}

const std::vector<Shape>& shapes() {
  static const std::vector<Shape> v = {{2, 3, 4}, {3, 1, 5}, {0, 3}, {1}, {}};
  return v;
}
const ViewKind kViews[] = {ViewKind::contiguous, ViewKind::transposed, ViewKind::strided, ViewKind::negative};

// ---- reference helpers -------------------------------------------------------------

// want[j] = f(multi-index j of out_shape), in row-major order.
std::vector<double> ref(const Shape& out_shape, const std::function<double(const Index&)>& f) {
  const int64_t n = checked_numel(out_shape);
  std::vector<double> r(n);
  for (int64_t j = 0; j < n; ++j) r[j] = f(unravel(j, out_shape));
  return r;
}
std::string str(const std::vector<int64_t>& v) { return shape_str(v); }

// Checks dtype, shape and every value (exactly: these ops only move data).
int compare(const Tensor& got, DType dtype, const Shape& shape, const std::vector<double>& want,
            const std::string& what) {
  CHECK_MESSAGE(got.dtype() == dtype, what << ": dtype " << got.dtype() << ", want " << dtype);
  CHECK_MESSAGE(got.shape() == shape, what << ": shape " << shape_str(got.shape()) << ", want " << shape_str(shape));
  if (got.shape() == shape) check_all_close(got, want, 0.0, 0.0, what);
  return 1;
}

std::string label(OpId op, DType d, const Shape& s, ViewKind k, const std::string& extra) {
  std::ostringstream os;
  os << op_name(op) << " " << d << " " << shape_str(s) << " " << view_name(k) << " " << extra;
  return os.str();
}

Attrs attrs_of(std::vector<int64_t> ints, int64_t axis = 0) {
  Attrs a;
  a.ints = std::move(ints);
  a.axis = axis;
  return a;
}

// ---- view cases: (attrs, reference of the output) for one input shape ---------------

struct ViewCase {
  Attrs attrs;
  Shape out_shape;
  std::function<Index(const Index&)> in_index;  // output multi-index -> input multi-index
};

std::vector<ViewCase> view_cases(OpId op, const Shape& s) {
  const int64_t nd = static_cast<int64_t>(s.size());
  const int64_t n = checked_numel(s);
  std::vector<ViewCase> cs;
  auto same_order = [s](const Shape& out) {  // row-major order unchanged
    return [s, out](const Index& o) { return unravel(ravel(o, out), s); };
  };
  switch (op) {
    case OpId::Reshape: {
      std::vector<Shape> targets = {{n}, Shape(s.rbegin(), s.rend())};
      Shape ones = s;
      ones.insert(ones.begin(), 1);
      ones.push_back(1);
      targets.push_back(ones);
      if (nd >= 2) {
        Shape merged = {s[0] * s[1]};
        merged.insert(merged.end(), s.begin() + 2, s.end());
        targets.push_back(merged);
      }
      for (const Shape& t : targets) cs.push_back({attrs_of(t), t, same_order(t)});
      if (n > 0) {
        Shape t = s;
        if (nd) t[0] = -1;
        else t = {-1};
        Shape resolved = nd ? s : Shape{1};
        cs.push_back({attrs_of(t), resolved, same_order(resolved)});
      }
      break;
    }
    case OpId::Permute: {
      Index rev(nd), rot(nd), neg(nd);
      for (int64_t i = 0; i < nd; ++i) {
        rev[i] = nd - 1 - i;
        rot[i] = (i + 1) % nd;
        neg[i] = rot[i] - nd;  // the same rotation with negative axes
      }
      for (const Index& p : {rev, rot, neg}) {
        Shape out(nd);
        for (int64_t i = 0; i < nd; ++i) out[i] = s[(p[i] + nd) % nd];
        cs.push_back({attrs_of(p), out, [p, nd](const Index& o) {
                        Index in(nd);
                        for (int64_t i = 0; i < nd; ++i) in[(p[i] + nd) % nd] = o[i];
                        return in;
                      }});
      }
      break;
    }
    case OpId::BroadcastTo: {
      Shape expanded = s;
      for (int64_t& e : expanded)
        if (e == 1) e = 3;
      Shape lead = expanded;
      lead.insert(lead.begin(), 2);
      for (const Shape& t : {s, expanded, lead}) {
        const size_t off = t.size() - s.size();
        cs.push_back({attrs_of(t), t, [s, off](const Index& o) {
                        Index in(s.size());
                        for (size_t k = 0; k < s.size(); ++k) in[k] = s[k] == 1 ? 0 : o[off + k];
                        return in;
                      }});
      }
      break;
    }
    case OpId::Slice:
      for (int64_t ax = 0; ax < nd; ++ax) {
        const int64_t e = s[ax];
        // Normalised bounds (as Python's slice.indices gives them).
        const std::vector<Index> bounds = {{0, e, 1},
                                           {std::min<int64_t>(1, e), e, 2},
                                           {e - 1, -1, -1},
                                           {e - 1, std::min<int64_t>(0, e - 1), -2},
                                           {std::min<int64_t>(1, e), std::min<int64_t>(1, e), 1}};
        for (const Index& b : bounds) {
          Index picked;  // the Python loop over range(start, stop, step)
          for (int64_t i = b[0]; b[2] > 0 ? i < b[1] : i > b[1]; i += b[2]) picked.push_back(i);
          Shape out = s;
          out[ax] = static_cast<int64_t>(picked.size());
          cs.push_back({attrs_of(b, ax - nd * (ax % 2)), out, [picked, ax](const Index& o) {
                          Index in = o;
                          in[ax] = picked[o[ax]];
                          return in;
                        }});
        }
      }
      break;
    case OpId::Select:
      for (int64_t ax = 0; ax < nd; ++ax) {
        if (s[ax] == 0) continue;
        for (int64_t idx : {int64_t(0), s[ax] - 1, int64_t(-1)}) {
          Shape out = s;
          out.erase(out.begin() + ax);
          const int64_t at = idx < 0 ? idx + s[ax] : idx;
          cs.push_back({attrs_of({idx}, ax), out, [ax, at](const Index& o) {
                          Index in = o;
                          in.insert(in.begin() + ax, at);
                          return in;
                        }});
        }
      }
      break;
    case OpId::Squeeze: {
      std::vector<Index> axes_list = {{}};
      for (int64_t ax = 0; ax < nd; ++ax)
        if (s[ax] == 1) axes_list.push_back({ax - nd});
      for (const Index& axes : axes_list) {
        std::vector<bool> drop(nd, false);
        for (int64_t ax = 0; ax < nd; ++ax) drop[ax] = axes.empty() ? s[ax] == 1 : ax == axes[0] + nd;
        Shape out;
        for (int64_t ax = 0; ax < nd; ++ax)
          if (!drop[ax]) out.push_back(s[ax]);
        cs.push_back({attrs_of(axes), out, [drop, nd](const Index& o) {
                        Index in(nd, 0);
                        size_t j = 0;
                        for (int64_t ax = 0; ax < nd; ++ax)
                          if (!drop[ax]) in[ax] = o[j++];
                        return in;
                      }});
      }
      break;
    }
    case OpId::Unsqueeze:
      for (int64_t axis : {int64_t(0), nd, int64_t(-1)}) {
        const int64_t at = axis < 0 ? axis + nd + 1 : axis;
        Shape out = s;
        out.insert(out.begin() + at, 1);
        cs.push_back({attrs_of({}, axis), out, [at](const Index& o) {
                        Index in = o;
                        in.erase(in.begin() + at);
                        return in;
                      }});
      }
      break;
    case OpId::Flip: {
      std::vector<Index> axes_list = {{}};
      for (int64_t ax = 0; ax < nd; ++ax) axes_list.push_back({ax});
      if (nd >= 2) axes_list.push_back({0, -1});
      for (const Index& axes : axes_list) {
        std::vector<bool> flip(nd, axes.empty());
        for (int64_t a : axes) flip[(a + nd) % nd] = true;
        cs.push_back({attrs_of(axes), s, [flip, s](const Index& o) {
                        Index in = o;
                        for (size_t k = 0; k < s.size(); ++k)
                          if (flip[k]) in[k] = s[k] - 1 - o[k];
                        return in;
                      }});
      }
      break;
    }
    default: break;
  }
  return cs;
}

// ---- data cases ------------------------------------------------------------------------

int check_concat(DType d, const Shape& s, ViewKind k, uint64_t seed) {
  if (s.empty()) return 0;
  int cases = 0;
  const DType other = all_dtypes()[(static_cast<int>(d) + 3) % kNumDTypes];
  for (int64_t ax = 0; ax < static_cast<int64_t>(s.size()); ++ax) {
    for (DType d2 : {d, other}) {
      Shape s2 = s, s3 = s;
      s2[ax] = 2;
      s3[ax] = 0;
      std::vector<Tensor> xs = {relayout(input(s, d, seed), k), input(s2, d2, seed + 1), input(s3, d, seed + 2),
                                relayout(input(s, d2, seed + 3), k)};
      std::vector<std::vector<double>> vals;
      for (const Tensor& x : xs) vals.push_back(values(x));
      Shape out = s;
      out[ax] = 2 * s[ax] + 2;
      auto want = ref(out, [&](const Index& o) {
        Index in = o;
        for (size_t i = 0; i < xs.size(); ++i) {
          const Shape& xsh = xs[i].shape();
          if (in[ax] < xsh[ax]) return vals[i][ravel(in, xsh)];
          in[ax] -= xsh[ax];
        }
        return std::nan("");
      });
      Tensor got = apply(OpId::Concat, std::span<const Tensor>(xs), attrs_of({}, ax - (ax % 2) * int64_t(s.size())));
      cases += compare(got, promote_types(d, d2), out, want, label(OpId::Concat, d, s, k, "with " + std::string(name(d2)) + " axis " + std::to_string(ax)));
    }
  }
  return cases;
}

int check_pad(DType d, const Shape& s, ViewKind k, uint64_t seed) {
  int cases = 0;
  Tensor x = relayout(input(s, d, seed), k);
  const std::vector<double> xv = values(x);
  const std::vector<double> fills = is_floating(d) ? std::vector<double>{3.0, -1.5, std::nan("")} : std::vector<double>{3.0, 0.0};
  for (double value : fills) {
    for (int variant = 0; variant < 2; ++variant) {
      Index pads;
      for (size_t i = 0; i < s.size(); ++i) {
        pads.push_back(variant ? 0 : static_cast<int64_t>(i % 3));
        pads.push_back(variant ? static_cast<int64_t>(i + 1) : 2 - static_cast<int64_t>(i % 3));
      }
      Shape out = s;
      for (size_t i = 0; i < s.size(); ++i) out[i] += pads[2 * i] + pads[2 * i + 1];
      const double fill = d == DType::bool_ ? (value != 0.0) : value;
      auto want = ref(out, [&](const Index& o) {
        Index in(s.size());
        for (size_t i = 0; i < s.size(); ++i) {
          in[i] = o[i] - pads[2 * i];
          if (in[i] < 0 || in[i] >= s[i]) return fill;
        }
        return xv[ravel(in, s)];
      });
      Attrs a = attrs_of(pads);
      a.scalar = value;
      cases += compare(apply(OpId::Pad, x, a), d, out, want, label(OpId::Pad, d, s, k, str(pads) + " value " + std::to_string(value)));
    }
  }
  return cases;
}

int check_tile(DType d, const Shape& s, ViewKind k, uint64_t seed) {
  int cases = 0;
  Tensor x = relayout(input(s, d, seed), k);
  const std::vector<double> xv = values(x);
  for (const Index& reps : std::vector<Index>{{}, {2}, {1, 3}, {2, 1, 1, 2}, {0, 2}}) {
    const size_t nd = std::max(s.size(), reps.size());
    Shape xs(nd - s.size(), 1), rs(nd - reps.size(), 1);
    xs.insert(xs.end(), s.begin(), s.end());
    rs.insert(rs.end(), reps.begin(), reps.end());
    Shape out(nd);
    for (size_t i = 0; i < nd; ++i) out[i] = xs[i] * rs[i];
    auto want = ref(out, [&](const Index& o) {
      Index in(nd);
      for (size_t i = 0; i < nd; ++i) in[i] = o[i] % xs[i];
      return xv[ravel(in, xs)];
    });
    cases += compare(apply(OpId::Tile, x, attrs_of(reps)), d, out, want, label(OpId::Tile, d, s, k, str(reps)));
  }
  return cases;
}

int check_gather(DType d, const Shape& s, ViewKind k, uint64_t seed) {
  int cases = 0;
  const int64_t nd = static_cast<int64_t>(s.size());
  Tensor x = relayout(input(s, d, seed), k);
  const std::vector<double> xv = values(x);
  for (int64_t ax = 0; ax < nd; ++ax) {
    const int64_t n = s[ax];
    for (int variant = 0; variant < 2; ++variant) {
      // variant 1: a non-axis extent of 1 in the index broadcasts against x
      Shape is = s;
      is[ax] = n > 0 ? 3 : 0;
      if (variant && nd > 1) is[(ax + 1) % nd] = 1;
      const DType idt = variant ? DType::int32 : DType::int64;
      Tensor idx = relayout(indices(is, idt, -n, n - 1, seed + ax), k);
      const std::vector<double> iv = values(idx);
      Shape out = s;
      out[ax] = is[ax];
      auto want = ref(out, [&](const Index& o) {
        Index ii = o, in = o;
        for (int64_t dd = 0; dd < nd; ++dd)
          if (is[dd] == 1) ii[dd] = 0;
        in[ax] = wrap_index(iv[ravel(ii, is)], n);
        return xv[ravel(in, s)];
      });
      cases += compare(apply(OpId::Gather, x, idx, attrs_of({}, ax - nd * variant)), d, out, want,
                       label(OpId::Gather, d, s, k, "axis " + std::to_string(ax) + " index " + shape_str(is)));
    }
  }
  return cases;
}

int check_index_select(DType d, const Shape& s, ViewKind k, uint64_t seed) {
  Tensor x = relayout(input(s, d, seed), k);
  const std::vector<double> xv = values(x);
  return for_each_axis_index(s, k, seed, [&](int64_t ax, DType idt, const Tensor& idx) {
    const std::vector<double> iv = values(idx);
    Shape out = s;
    out[ax] = idx.shape()[0];
    auto want = ref(out, [&](const Index& o) {
      Index in = o;
      in[ax] = wrap_index(iv[o[ax]], s[ax]);
      return xv[ravel(in, s)];
    });
    return compare(apply(OpId::IndexSelect, x, idx, attrs_of({}, ax)), d, out, want,
                   label(OpId::IndexSelect, d, s, k, "axis " + std::to_string(ax) + " " + std::string(name(idt))));
  });
}

// Here the dtype loop is the result dtype (attrs.dtype); indices are int32/int64.
int check_one_hot(DType d, const Shape& s, ViewKind k, uint64_t seed) {
  int cases = 0;
  const int64_t classes = 4;
  for (DType idt : {DType::int32, DType::int64}) {
    Tensor idx = relayout(indices(s, idt, 0, classes - 1, seed), k);
    const std::vector<double> iv = values(idx);
    Shape out = s;
    out.push_back(classes);
    auto want = ref(out, [&](const Index& o) {
      Index in(o.begin(), o.end() - 1);
      return iv[ravel(in, s)] == static_cast<double>(o.back()) ? 1.0 : 0.0;
    });
    Attrs a;
    a.axis = classes;
    a.dtype = d;
    cases += compare(apply(OpId::OneHot, idx, a), d, out, want, label(OpId::OneHot, d, s, k, std::string(name(idt))));
  }
  // Any other index dtype is refused.
  for (DType bad : all_dtypes()) {
    if (bad == DType::int32 || bad == DType::int64) continue;
    Attrs a;
    a.axis = classes;
    CHECK_THROWS_AS(apply(OpId::OneHot, input(s, bad, seed), a), DTypeError);
    ++cases;
  }
  return cases;
}

// a + b as scatter_add/index_add define it for dtype d: rounded to d at
// every step (floats), wrapped (integers), or (bool).
double ref_add(double a, double b, DType d) {
  if (d == DType::bool_) return (a != 0 || b != 0) ? 1.0 : 0.0;
  if (!is_floating(d)) return static_cast<double>(ref_cast_int(static_cast<int64_t>(a) + static_cast<int64_t>(b), d));
  return ref_cast(a + b, d);
}

// scatter / scatter_add (x, index, src) along every axis; index smaller than
// src (variant 1) and than x off the axis, repeated targets, both index dtypes.
int check_scatter(OpId op, DType d, const Shape& s, ViewKind k, uint64_t seed) {
  int cases = 0;
  const int64_t nd = static_cast<int64_t>(s.size());
  Tensor x = relayout(input(s, d, seed), k);
  const std::vector<double> xv = values(x);
  for (int64_t ax = 0; ax < nd; ++ax) {
    const int64_t n = s[ax];
    for (int variant = 0; variant < 2; ++variant) {
      Shape is = s;
      is[ax] = n > 0 ? 4 : 0;  // 4 > some extents: repeated targets
      if (variant && nd > 1 && is[(ax + 1) % nd] > 1) --is[(ax + 1) % nd];
      Shape ss = is;
      if (variant)
        for (int64_t& e : ss) ++e;
      const DType idt = variant ? DType::int32 : DType::int64;
      Tensor idx = relayout(indices(is, idt, -n, n - 1, seed + ax), k);
      Tensor src = relayout(input(ss, d, seed + 17 + ax), k);
      const std::vector<double> iv = values(idx), sv = values(src);
      std::vector<double> want = xv;
      for (int64_t p = 0; p < checked_numel(is); ++p) {  // row-major order of index
        const Index pi = unravel(p, is);
        Index t = pi;
        t[ax] = wrap_index(iv[p], n);
        double& o = want[ravel(t, s)];
        const double sval = sv[ravel(pi, ss)];
        o = op == OpId::Scatter ? sval : ref_add(o, sval, d);
      }
      Attrs a = attrs_of({}, variant ? ax - nd : ax);
      const Tensor in[3] = {x, idx, src};
      cases += compare(apply(op, in, a), d, s, want,
                       label(op, d, s, k, "axis " + std::to_string(ax) + " index " + shape_str(is) + " src " + shape_str(ss)));
    }
  }
  return cases;
}

// index_add (x, 1-d index, src) along every axis, repeated indices.
int check_index_add(DType d, const Shape& s, ViewKind k, uint64_t seed) {
  Tensor x = relayout(input(s, d, seed), k);
  const std::vector<double> xv = values(x);
  return for_each_axis_index(s, k, seed, [&](int64_t ax, DType idt, const Tensor& idx) {
    Shape ss = s;
    ss[ax] = idx.shape()[0];
    Tensor src = relayout(input(ss, d, seed + 31 + ax), k);
    const std::vector<double> iv = values(idx), sv = values(src);
    std::vector<double> want = xv;
    for (int64_t p = 0; p < checked_numel(ss); ++p) {
      const Index pi = unravel(p, ss);
      Index t = pi;
      t[ax] = wrap_index(iv[pi[ax]], s[ax]);
      double& o = want[ravel(t, s)];
      o = ref_add(o, sv[p], d);
    }
    const Tensor in[3] = {x, idx, src};
    return compare(apply(OpId::IndexAdd, in, attrs_of({}, ax)), d, s, want,
                   label(OpId::IndexAdd, d, s, k, "axis " + std::to_string(ax) + " " + std::string(name(idt))));
  });
}

}  // namespace

int check_view_op(OpId op) {
  int cases = 0;
  uint64_t seed = 1;
  for (DType d : all_dtypes())
    for (const Shape& s : shapes())
      for (ViewKind k : kViews) {
        Tensor x = relayout(input(s, d, ++seed), k);
        const std::vector<double> xv = values(x);
        for (const ViewCase& c : view_cases(op, s)) {
          const std::string what = label(op, d, s, k, str(c.attrs.ints) + " axis " + std::to_string(c.attrs.axis));
          Tensor got = apply(op, x, c.attrs);
          auto want = ref(c.out_shape, [&](const Index& o) { return xv[ravel(c.in_index(o), s)]; });
          cases += compare(got, d, c.out_shape, want, what);
          // Views share storage; reshape may copy, but never a contiguous input.
          if (op != OpId::Reshape || x.is_contiguous())
            CHECK_MESSAGE(got.buffer() == x.buffer(), what << ": result does not share the input's storage");
          // The shape rule agrees with the eager result.
          const TensorLayout in_layout[1] = {x.layout()};
          CHECK_MESSAGE(infer_layout(op, in_layout, c.attrs).shape == c.out_shape, what << ": infer_layout shape");
        }
      }
  return cases;
}

int check_data_op(OpId op) {
  int cases = 0;
  uint64_t seed = 100;
  for (DType d : all_dtypes())
    for (const Shape& s : shapes())
      for (ViewKind k : kViews) {
        ++seed;
        switch (op) {
          case OpId::Concat: cases += check_concat(d, s, k, seed); break;
          case OpId::Pad: cases += check_pad(d, s, k, seed); break;
          case OpId::Tile: cases += check_tile(d, s, k, seed); break;
          case OpId::Gather: cases += check_gather(d, s, k, seed); break;
          case OpId::IndexSelect: cases += check_index_select(d, s, k, seed); break;
          case OpId::OneHot: cases += check_one_hot(d, s, k, seed); break;
          case OpId::Scatter:
          case OpId::ScatterAdd: cases += check_scatter(op, d, s, k, seed); break;
          case OpId::IndexAdd: cases += check_index_add(d, s, k, seed); break;
          case OpId::Conv2d: cases += check_conv2d_row(d, s, k, seed); break;
          default: cases += check_select_row(op, d, s, k, seed); break;
        }
      }
  return cases;
}

}  // namespace kt

// ---- focused tests -----------------------------------------------------------------------

namespace {
using namespace kiln;
using kt::values;

Tensor f32(std::vector<float> v, Shape s = {}) { return Tensor::from_vector(v, s); }
Tensor i64(std::vector<int64_t> v, Shape s = {}) { return Tensor::from_vector(v, s); }
// start, start + 1, ... as float32 of shape s.
Tensor iota(Shape s, float start = 0.0f) {
  std::vector<float> v(checked_numel(s));
  for (size_t i = 0; i < v.size(); ++i) v[i] = start + static_cast<float>(i);
  return f32(v, s);
}
std::vector<double> dv(std::initializer_list<double> v) { return v; }
}  // namespace

TEST_SUITE("shape") {
  TEST_CASE("view ops share storage with their input") {
    Tensor x = iota({2, 3});
    float* p = x.data<float>();
    Tensor r = reshape(x, {3, 2}), t = transpose(x), s = slice(x, 1, 1, std::nullopt), sel = select(x, 0, 1);
    Tensor b = broadcast_to(x, {4, 2, 3}), u = unsqueeze(x, 1), q = squeeze(unsqueeze(x, 0)), f = flip(x);
    p[4] = 100.0f;  // x[1, 1]
    CHECK(r.to_vector<float>()[4] == 100.0f);
    CHECK(t.to_vector<float>()[3] == 100.0f);  // t[1, 1]
    CHECK(s.to_vector<float>()[2] == 100.0f);  // s[1, 0]
    CHECK(sel.to_vector<float>()[1] == 100.0f);
    CHECK(b.to_vector<float>()[3 * 6 + 4] == 100.0f);
    CHECK(u.to_vector<float>()[4] == 100.0f);
    CHECK(q.to_vector<float>()[4] == 100.0f);
    CHECK(f.to_vector<float>()[1] == 100.0f);  // f[0, 1] = x[1, 1]
    for (const Tensor& v : {r, t, s, sel, b, u, q, f}) CHECK(v.buffer() == x.buffer());
    CHECK(x.reshape({6}).buffer() == x.buffer());
    CHECK(x.permute({1, 0}).shape() == Shape{3, 2});
    CHECK(x.transpose().strides() == Strides{1, 3});
  }

  TEST_CASE("reshape copies only when the strides cannot express the shape") {
    // numpy: np.arange(6).reshape(2, 3).T.reshape(6) -> [0, 3, 1, 4, 2, 5]
    Tensor x = iota({2, 3});
    Tensor t = transpose(x);
    Tensor r = reshape(t, {6});
    CHECK_FALSE(r.buffer() == x.buffer());
    CHECK(r.is_contiguous());
    kt::check_all_close(r, dv({0, 3, 1, 4, 2, 5}), 0, 0, "numpy: x.T.reshape(6)");
    // a = np.arange(24).reshape(4, 6)[:, ::2] has strides (6, 2) elements:
    // both reshapes are views in numpy.
    Tensor a = slice(iota({4, 6}), 1, std::nullopt, std::nullopt, 2);
    Tensor v = reshape(a, {2, 2, 3});
    CHECK(v.buffer() == a.buffer());
    CHECK(v.strides() == Strides{12, 6, 2});
    CHECK(reshape(a, {12}).strides() == Strides{2});
    kt::check_all_close(reshape(a, {12}), dv({0, 2, 4, 6, 8, 10, 12, 14, 16, 18, 20, 22}), 0, 0, "numpy: a.reshape(12)");
    // b = np.arange(24).reshape(4, 6)[:, :3]: reshape(2, 2, 3) is a view,
    // reshape(12) a copy.
    Tensor b = slice(iota({4, 6}), 1, 0, 3);
    CHECK(reshape(b, {2, 2, 3}).buffer() == b.buffer());
    CHECK(reshape(b, {2, 2, 3}).strides() == Strides{12, 6, 1});
    Tensor c = reshape(b, {12});
    CHECK_FALSE(c.buffer() == b.buffer());
    kt::check_all_close(c, dv({0, 1, 2, 6, 7, 8, 12, 13, 14, 18, 19, 20}), 0, 0, "numpy: b.reshape(12)");
    // Splitting an axis of a transposed tensor keeps it a view.
    Tensor p = permute(iota({2, 3, 4}), {1, 0, 2});
    Tensor q = reshape(p, {3, 2, 2, 2});
    CHECK(q.buffer() == p.buffer());
    kt::check_all_close(q, values(p), 0, 0, "split last axis");
    // Empty and 0-d.
    CHECK(reshape(iota({0, 3}), {3, 0, 5}).shape() == Shape{3, 0, 5});
    CHECK(reshape(iota({0, 3}), {-1, 3}).shape() == Shape{0, 3});
    CHECK(reshape(f32({7}), {}).shape() == Shape{});
    CHECK(reshape(reshape(f32({7}), {}), {1, 1, -1}).shape() == Shape{1, 1, 1});
    CHECK(flatten(reshape(f32({7}), {})).shape() == Shape{1});
    CHECK(flatten(iota({2, 3, 4}), 1).shape() == Shape{2, 12});
    CHECK(flatten(iota({2, 3, 4}), 0, 1).shape() == Shape{6, 4});
  }

  TEST_CASE("slice follows Python's slice semantics") {
    Tensor x = iota({10});
    auto sl = [&](std::optional<int64_t> a, std::optional<int64_t> b, int64_t c) { return values(slice(x, 0, a, b, c)); };
    using V = std::vector<double>;
    // python: list(range(10))[...]
    CHECK(sl(2, 8, 2) == V{2, 4, 6});
    CHECK(sl(std::nullopt, std::nullopt, -1) == V{9, 8, 7, 6, 5, 4, 3, 2, 1, 0});
    CHECK(sl(8, 2, -2) == V{8, 6, 4});
    CHECK(sl(-3, std::nullopt, 1) == V{7, 8, 9});
    CHECK(sl(-100, 100, 1) == V{0, 1, 2, 3, 4, 5, 6, 7, 8, 9});
    CHECK(sl(5, 100, -1) == V{});
    CHECK(sl(100, -100, -3) == V{9, 6, 3, 0});
    CHECK(sl(std::nullopt, -100, -1) == V{9, 8, 7, 6, 5, 4, 3, 2, 1, 0});
    CHECK(sl(3, 3, 1) == V{});
    CHECK(sl(-1, -12, -4) == V{9, 5, 1});
    CHECK(sl(std::nullopt, 4, -3) == V{9, 6});
    CHECK(sl(1, std::nullopt, 100) == V{1});
    CHECK(sl(std::nullopt, std::nullopt, INT64_MIN) == V{9});
    CHECK(sl(INT64_MIN, INT64_MAX, INT64_MAX) == V{0});
    // python: [[0,1,2,3],[4,5,6,7],[8,9,10,11]] sliced [:, ::-2] -> [[3,1],[7,5],[11,9]]
    Tensor m = slice(iota({3, 4}), -1, std::nullopt, std::nullopt, -2);
    CHECK(m.shape() == Shape{3, 2});
    CHECK(m.strides() == Strides{4, -2});
    CHECK(values(m) == V{3, 1, 7, 5, 11, 9});
    // Slicing an empty axis.
    CHECK(slice(iota({0, 2}), 0, 1, 5, -1).shape() == Shape{0, 2});
  }

  TEST_CASE("flip, permute, squeeze, unsqueeze, broadcast_to and select") {
    Tensor x = iota({2, 3});
    CHECK(values(flip(x)) == dv({5, 4, 3, 2, 1, 0}));  // numpy: np.flip(x)
    CHECK(values(flip(x, {1})) == dv({2, 1, 0, 5, 4, 3}));
    Tensor ff = flip(flip(x, {0, 1}), {-1, -2});
    CHECK(values(ff) == values(x));
    CHECK(ff.strides() == x.strides());
    CHECK(ff.offset() == x.offset());
    CHECK(values(transpose(x)) == dv({0, 3, 1, 4, 2, 5}));
    // Empty views keep their input's offset (nothing is read through them).
    CHECK(flip(iota({0, 3})).offset() == 0);
    CHECK(select(iota({0, 3}), 1, 2).offset() == 0);
    CHECK(permute(iota({2, 3, 4}), {2, 0, 1}).shape() == Shape{4, 2, 3});
    CHECK(squeeze(iota({1, 3, 1})).shape() == Shape{3});
    CHECK(squeeze(iota({1, 3, 1}), {-1}).shape() == Shape{1, 3});
    CHECK(squeeze(iota({1, 1})).shape() == Shape{});
    CHECK(unsqueeze(x, -1).shape() == Shape{2, 3, 1});
    CHECK(unsqueeze(x, 0).shape() == Shape{1, 2, 3});
    // numpy: np.broadcast_to([[0],[1]], (2, 2, 3)).ravel()
    Tensor b = broadcast_to(iota({2, 1}), {2, 2, 3});
    CHECK(values(b) == dv({0, 0, 0, 1, 1, 1, 0, 0, 0, 1, 1, 1}));
    CHECK(b.strides() == Strides{0, 1, 0});
    CHECK(values(select(x, 1, -1)) == dv({2, 5}));
    CHECK(select(iota({3}), 0, 2).item<float>() == 2.0f);
  }

  TEST_CASE("concat and stack") {
    Tensor a = iota({2, 2});
    Tensor b = Tensor::from_vector(std::vector<int8_t>{7, 8}, {1, 2});
    Tensor c = concat({a, b});
    CHECK(c.dtype() == DType::float32);  // numpy: float32 with int8
    CHECK(concat({a, Tensor::from_vector(std::vector<int32_t>{7, 8}, {1, 2})}).dtype() == DType::float64);
    CHECK(values(c) == dv({0, 1, 2, 3, 7, 8}));
    // numpy: np.stack([a, a + 10], axis=1) with a = [[0,1],[2,3]]
    Tensor a10 = Tensor::from_vector(std::vector<float>{10, 11, 12, 13}, {2, 2});
    Tensor s = stack({a, a10}, 1);
    CHECK(s.shape() == Shape{2, 2, 2});
    CHECK(values(s) == dv({0, 1, 10, 11, 2, 3, 12, 13}));
    CHECK(stack({a, a10}, -1).shape() == Shape{2, 2, 2});
    CHECK(values(stack({a, a10}, -1)) == dv({0, 10, 1, 11, 2, 12, 3, 13}));
    // Type promotion across three inputs (numpy 2.x: uint8, int8 -> int16).
    Tensor u = Tensor::from_vector(std::vector<uint8_t>{200});
    Tensor i = Tensor::from_vector(std::vector<int8_t>{-5});
    Tensor ui = concat({u, i, u});
    CHECK(ui.dtype() == DType::int16);
    CHECK(values(ui) == dv({200, -5, 200}));
    CHECK(concat({iota({0, 3}), iota({2, 3})}).shape() == Shape{2, 3});
    CHECK(concat({a}).buffer() != a.buffer());
  }

  TEST_CASE("split and chunk sizes") {
    Tensor x = iota({10});
    auto sizes = [](const std::vector<Tensor>& ts) {
      std::vector<int64_t> r;
      for (const Tensor& t : ts) r.push_back(t.shape()[0]);
      return r;
    };
    auto p = split(x, std::vector<int64_t>{3, 0, 7});
    CHECK(sizes(p) == std::vector<int64_t>{3, 0, 7});
    CHECK(values(p[2]) == dv({3, 4, 5, 6, 7, 8, 9}));
    CHECK(p[2].buffer() == x.buffer());
    CHECK(sizes(split(x, 4)) == std::vector<int64_t>{4, 4, 2});  // torch.split(torch.arange(10), 4)
    CHECK(sizes(split(x, 10)) == std::vector<int64_t>{10});
    CHECK(sizes(split(x, 20)) == std::vector<int64_t>{10});
    // torch.chunk: pieces of ceil(n / chunks), possibly fewer than chunks.
    CHECK(sizes(chunk(x, 3)) == std::vector<int64_t>{4, 4, 2});
    CHECK(sizes(chunk(iota({5}), 4)) == std::vector<int64_t>{2, 2, 1});
    CHECK(sizes(chunk(iota({6}), 4)) == std::vector<int64_t>{2, 2, 2});
    CHECK(sizes(chunk(iota({3}), 5)) == std::vector<int64_t>{1, 1, 1});
    CHECK(sizes(chunk(iota({0}), 3)) == std::vector<int64_t>{0, 0, 0});
    CHECK(sizes(split(iota({0}), 0)) == std::vector<int64_t>{0});
    auto cols = chunk(iota({2, 5}), 2, -1);
    REQUIRE(cols.size() == 2);
    CHECK(values(cols[1]) == dv({3, 4, 8, 9}));
  }

  TEST_CASE("pad and tile values") {
    // numpy: np.pad(np.arange(6).reshape(2, 3), ((1, 0), (0, 2)), constant_values=9)
    Tensor p = pad(iota({2, 3}), {{1, 0}, {0, 2}}, 9);
    CHECK(p.shape() == Shape{3, 5});
    CHECK(values(p) == dv({9, 9, 9, 9, 9, 0, 1, 2, 9, 9, 3, 4, 5, 9, 9}));
    // Pads name the last axes: only axis 1 padded.
    Tensor q = pad(iota({2, 2}), {{1, 1}});
    CHECK(values(q) == dv({0, 0, 1, 0, 0, 2, 3, 0}));
    // int32 pad with a float value converts like numpy (truncation).
    Tensor r = pad(Tensor::from_vector(std::vector<int32_t>{1}), {{1, 0}}, -2.7);
    CHECK(r.dtype() == DType::int32);
    CHECK(values(r) == dv({-2, 1}));
    CHECK(pad(iota({0}), {{2, 1}}, 4).shape() == Shape{3});
    // numpy: np.tile([[1, 2], [3, 4]], (2, 1, 2)).ravel()
    Tensor t = tile(iota({2, 2}, 1.0f), {2, 1, 2});
    CHECK(t.shape() == Shape{2, 2, 4});
    CHECK(values(t) == dv({1, 2, 1, 2, 3, 4, 3, 4, 1, 2, 1, 2, 3, 4, 3, 4}));
    // numpy: np.tile([0, 1, 2], 2)
    CHECK(values(tile(iota({3}), {2})) == dv({0, 1, 2, 0, 1, 2}));
    CHECK(tile(reshape(f32({5}), {}), {}).shape() == Shape{});
  }

  TEST_CASE("gather, index_select, embedding and one_hot") {
    // numpy: np.take_along_axis(a, idx, axis=1), a = [[10,11,12],[13,14,15]], idx = [[2,0],[-1,1]]
    Tensor a = iota({2, 3}, 10.0f);
    Tensor g = gather(a, 1, i64({2, 0, -1, 1}, {2, 2}));
    CHECK(values(g) == dv({12, 10, 15, 14}));
    // The index broadcasts against x outside the axis (numpy too): idx [[1],[0]] along axis 0 with shape [2, 1]
    Tensor gb = gather(a, 0, i64({1, 0}, {2, 1}));
    CHECK(gb.shape() == Shape{2, 3});
    CHECK(values(gb) == dv({13, 14, 15, 10, 11, 12}));
    // numpy: np.take(a, [2, -3, 2], axis=1)
    Tensor s = index_select(a, 1, Tensor::from_vector(std::vector<int32_t>{2, -3, 2}));
    CHECK(values(s) == dv({12, 10, 12, 15, 13, 15}));
    CHECK(index_select(a, 0, i64({})).shape() == Shape{0, 3});
    // embedding: weight = np.arange(8).reshape(4, 2); weight[[[3, 0], [1, 1]]]
    Tensor e = embedding(iota({4, 2}), i64({3, 0, 1, 1}, {2, 2}));
    CHECK(e.shape() == Shape{2, 2, 2});
    CHECK(values(e) == dv({6, 7, 0, 1, 2, 3, 2, 3}));
    Tensor e0 = embedding(iota({4, 2}), reshape(i64({2}), {}));
    CHECK(e0.shape() == Shape{2});
    CHECK(values(e0) == dv({4, 5}));
    // torch.nn.functional.one_hot(torch.tensor([2, 0, 1]), 3)
    Tensor o = one_hot(i64({2, 0, 1}), 3);
    CHECK(o.dtype() == DType::int64);
    CHECK(o.shape() == Shape{3, 3});
    CHECK(values(o) == dv({0, 0, 1, 1, 0, 0, 0, 1, 0}));
    CHECK(one_hot(i64({1}), 2, DType::float16).dtype() == DType::float16);
  }

  TEST_CASE("large inputs take the parallel paths and stay exact") {
    // Above kParallelGrain so run_loop and the index scans split over threads.
    const int64_t rows = 70000;
    Tensor x = iota({rows, 3});
    std::vector<int64_t> idv(rows);
    for (int64_t i = 0; i < rows; ++i) idv[i] = (i * 7919) % rows - (i % 2 ? rows : 0);
    Tensor idx = i64(idv);
    Tensor s = index_select(x, 0, idx);
    std::vector<double> want(rows * 3);
    for (int64_t i = 0; i < rows; ++i)
      for (int64_t j = 0; j < 3; ++j) want[i * 3 + j] = static_cast<double>(((idv[i] + rows) % rows) * 3 + j);
    kt::check_all_close(s, want, 0, 0, "index_select large");
    idv[rows - 5] = rows;  // one bad index far into the tensor
    CHECK_THROWS_WITH_AS(index_select(x, 0, i64(idv)),
                         "index_select: index 70000 is out of range for axis 0 with extent 70000 (expected -70000 <= "
                         "index < 70000)",
                         IndexError);
    Tensor oh = one_hot(i64(std::vector<int64_t>(rows, 1)), 2, DType::uint8);
    std::vector<double> ohv = values(oh), ohw(2 * rows);
    for (int64_t i = 0; i < rows; ++i) ohw[2 * i + 1] = 1.0;
    CHECK(ohv == ohw);
    // tile and pad over many rows
    Tensor t = tile(iota({1, 3}), {rows, 1});
    CHECK(values(t) == values(broadcast_to(iota({1, 3}), {rows, 3})));
    Tensor pd = pad(x, {{0, 0}, {1, 0}}, -1.0);
    CHECK(values(select(pd, 1, 0)) == std::vector<double>(rows, -1.0));
    CHECK(values(slice(pd, 1, 1, std::nullopt)) == values(x));
  }


  TEST_CASE("errors name the op, what was expected and what came") {
    Tensor x = iota({2, 3});
    // reshape
    CHECK_THROWS_WITH_AS(reshape(x, {4}), "reshape: cannot reshape [2, 3] (6 elements) to [4]", ShapeError);
    CHECK_THROWS_WITH_AS(reshape(x, {4, -1}), "reshape: cannot reshape [2, 3] (6 elements) to [4, -1]", ShapeError);
    CHECK_THROWS_WITH_AS(reshape(x, {-1, -1}), "reshape: only one extent may be -1, got [-1, -1]", ShapeError);
    CHECK_THROWS_WITH_AS(reshape(x, {-2, -3}),
                         "reshape: invalid extent -2 in [-2, -3] (extents must be >= 0, or -1 to infer one)",
                         ShapeError);
    CHECK_THROWS_WITH_AS(reshape(iota({0, 3}), {-1, 0}), "reshape: cannot reshape [0, 3] (0 elements) to [-1, 0]",
                         ShapeError);
    CHECK_THROWS_AS(reshape(x, {INT64_C(1) << 62, 8}), ShapeError);
    CHECK_THROWS_AS(reshape(iota({0}), {INT64_C(1) << 62, 8, 0}), ShapeError);
    CHECK_THROWS_WITH_AS(flatten(x, 1, 0), "flatten: start axis 1 comes after end axis 0 for a 2-d tensor", ValueError);
    CHECK_THROWS_AS(flatten(x, 2), IndexError);
    // permute / transpose
    CHECK_THROWS_WITH_AS(permute(x, {0, 0}), "permute: axis 0 appears more than once in [0, 0]", ValueError);
    CHECK_THROWS_WITH_AS(permute(x, {0}), "permute: expected a permutation of 2 axes for shape [2, 3], got [0]",
                         ValueError);
    CHECK_THROWS_WITH_AS(permute(x, {0, 2}), "permute: axis 2 is out of range for a 2-d tensor (expected -2 <= axis < 2)",
                         IndexError);
    CHECK_THROWS_WITH_AS(transpose(iota({3})), "transpose: axis -2 is out of range for a 1-d tensor (expected -1 <= axis < 1)",
                         IndexError);
    // broadcast_to
    CHECK_THROWS_WITH_AS(broadcast_to(x, {4, 3}), "broadcast_to: cannot broadcast shape [2, 3] to [4, 3]", ShapeError);
    CHECK_THROWS_WITH_AS(broadcast_to(x, {3}),
                         "broadcast_to: cannot broadcast shape [2, 3] to [3] (the target has fewer dimensions)", ShapeError);
    CHECK_THROWS_WITH_AS(broadcast_to(x, {-1, 2, 3}),
                         "broadcast_to: cannot broadcast shape [2, 3] to [-1, 2, 3] (negative extent in the target)",
                         ShapeError);
    CHECK_THROWS_AS(broadcast_to(x, {INT64_C(1) << 62, 1 << 20, 2, 3}), ShapeError);
    // slice / select
    CHECK_THROWS_WITH_AS(slice(x, 0, 0, 1, 0), "slice: step cannot be zero", ValueError);
    CHECK_THROWS_WITH_AS(slice(x, 2, 0, 1), "slice: axis 2 is out of range for a 2-d tensor (expected -2 <= axis < 2)",
                         IndexError);
    Attrs raw;
    raw.ints = {0, 5, 1};
    CHECK_THROWS_WITH_AS(apply(OpId::Slice, x, raw),
                         "slice: bounds start=0, stop=5 with step 1 are not normalised for axis 0 with extent 2 "
                         "(expected 0 <= start, stop <= 2)",
                         IndexError);
    raw.ints = {-1, 0, 1};
    CHECK_THROWS_AS(apply(OpId::Slice, x, raw), IndexError);
    raw.ints = {1, 1};
    CHECK_THROWS_AS(apply(OpId::Slice, x, raw), ValueError);
    CHECK_THROWS_WITH_AS(select(x, 1, 3), "select: index 3 is out of range for axis 1 with extent 3", IndexError);
    CHECK_THROWS_WITH_AS(select(x, -1, -4), "select: index -4 is out of range for axis 1 with extent 3", IndexError);
    CHECK_THROWS_AS(select(iota({0}), 0, 0), IndexError);
    CHECK_THROWS_AS(select(reshape(f32({1}), {}), 0, 0), IndexError);
    raw.ints = {};
    CHECK_THROWS_WITH_AS(apply(OpId::Select, x, raw), "select: expected attrs.ints = {index}, got []", ValueError);
    // squeeze / unsqueeze / flip
    CHECK_THROWS_WITH_AS(squeeze(x, {1}), "squeeze: cannot squeeze axis 1 with extent 3 (shape [2, 3])", ShapeError);
    CHECK_THROWS_WITH_AS(squeeze(iota({1, 1}), {0, -2}), "squeeze: axis 0 appears more than once in [0, -2]", ValueError);
    CHECK_THROWS_AS(squeeze(x, {5}), IndexError);
    CHECK_THROWS_WITH_AS(unsqueeze(x, 3), "unsqueeze: axis 3 is out of range for a 2-d tensor (expected -3 <= axis <= 2)",
                         IndexError);
    CHECK_THROWS_AS(unsqueeze(x, -4), IndexError);
    CHECK_THROWS_WITH_AS(flip(x, {1, -1}), "flip: axis 1 appears more than once in [1, -1]", ValueError);
    CHECK_THROWS_AS(flip(reshape(f32({1}), {}), {0}), IndexError);
    // concat / stack / split / chunk
    CHECK_THROWS_WITH_AS(concat({}), "concat: expected at least one tensor, got an empty list", ValueError);
    CHECK_THROWS_AS(apply(OpId::Concat, std::span<const Tensor>(), Attrs{}), ValueError);
    CHECK_THROWS_WITH_AS(concat({reshape(f32({1}), {}), reshape(f32({2}), {})}),
                         "concat: input 0 is 0-d; zero-dimensional tensors cannot be concatenated", ShapeError);
    CHECK_THROWS_WITH_AS(concat({x, iota({2, 4})}),
                         "concat: input 1 has shape [2, 4] but input 0 has shape [2, 3] (all extents except axis 0 "
                         "must match)",
                         ShapeError);
    CHECK_THROWS_WITH_AS(concat({x, iota({6})}),
                         "concat: input 1 has shape [6] but input 0 has shape [2, 3] (the number of dimensions must "
                         "match)",
                         ShapeError);
    CHECK_THROWS_AS(concat({x, x}, 2), IndexError);
    CHECK_THROWS_WITH_AS(stack({x, iota({3, 2})}),
                         "stack: input 1 has shape [3, 2] but input 0 has shape [2, 3] (all shapes must be equal)",
                         ShapeError);
    CHECK_THROWS_WITH_AS(stack({}), "stack: expected at least one tensor, got an empty list", ValueError);
    CHECK_THROWS_AS(stack({x, x}, 3), IndexError);
    CHECK_THROWS_WITH_AS(split(x, std::vector<int64_t>{1, 1}, 1),
                         "split: sizes [1, 1] do not sum to the extent 3 of axis 1 (shape [2, 3])", ValueError);
    CHECK_THROWS_WITH_AS(split(x, std::vector<int64_t>{-1, 3}), "split: sizes must be non-negative, got [-1, 3]",
                         ValueError);
    CHECK_THROWS_AS(split(x, std::vector<int64_t>{INT64_MAX, INT64_MAX, 4}), ValueError);
    CHECK_THROWS_WITH_AS(split(x, int64_t(0)), "split: split size must be positive, got 0 for axis 0 with extent 2",
                         ValueError);
    CHECK_THROWS_WITH_AS(chunk(x, 0), "chunk: number of chunks must be positive, got 0", ValueError);
    // pad / tile
    CHECK_THROWS_WITH_AS(pad(x, {{0, 0}, {-1, 0}}), "pad: pads must be non-negative, got [0, 0, -1, 0]", ValueError);
    CHECK_THROWS_WITH_AS(pad(x, {{0, 0}, {0, 0}, {0, 0}}), "pad: got pads for 3 axes but the tensor has shape [2, 3]",
                         ValueError);
    raw.ints = {1, 1};
    CHECK_THROWS_WITH_AS(apply(OpId::Pad, x, raw), "pad: expected 2 pads per axis (4 for shape [2, 3]), got [1, 1]",
                         ValueError);
    CHECK_THROWS_WITH_AS(pad(x, {{INT64_MAX, 0}}), "pad: result extent overflows int64", ShapeError);
    CHECK_THROWS_WITH_AS(tile(x, {2, -1}), "tile: repetitions must be non-negative, got [2, -1]", ValueError);
    CHECK_THROWS_AS(tile(x, {INT64_C(1) << 62, 4}), ShapeError);
    // gather / index_select / embedding / one_hot
    CHECK_THROWS_WITH_AS(gather(x, 1, iota({2, 1})), "gather: index must be int32 or int64, got float32", DTypeError);
    CHECK_THROWS_WITH_AS(gather(x, 1, i64({0, 1})),
                         "gather: index has shape [2] but x has shape [2, 3] (the number of dimensions must match)",
                         ShapeError);
    CHECK_THROWS_WITH_AS(gather(x, 1, i64({0, 0, 0, 0, 0, 0}, {3, 2})),
                         "gather: index shape [3, 2] does not broadcast against x shape [2, 3] outside axis 1", ShapeError);
    CHECK_THROWS_WITH_AS(gather(x, 1, i64({0, 3}, {2, 1})),
                         "gather: index 3 is out of range for axis 1 with extent 3 (expected -3 <= index < 3)", IndexError);
    CHECK_THROWS_WITH_AS(gather(x, 0, i64({-3, 0, 0}, {1, 3})),
                         "gather: index -3 is out of range for axis 0 with extent 2 (expected -2 <= index < 2)", IndexError);
    CHECK_THROWS_AS(gather(x, 2, i64({0, 0}, {2, 1})), IndexError);
    CHECK_THROWS_WITH_AS(index_select(x, 0, i64({0, 1}, {1, 2})), "index_select: indices must be 1-d, got shape [1, 2]",
                         ShapeError);
    CHECK_THROWS_WITH_AS(index_select(x, 0, iota({2})), "index_select: indices must be int32 or int64, got float32",
                         DTypeError);
    CHECK_THROWS_WITH_AS(index_select(x, 0, i64({1, 2})),
                         "index_select: index 2 is out of range for axis 0 with extent 2 (expected -2 <= index < 2)",
                         IndexError);
    CHECK_THROWS_AS(index_select(iota({0, 3}), 0, i64({0})), IndexError);
    CHECK_THROWS_WITH_AS(embedding(iota({4}), i64({0})), "embedding: weight must be 2-d [num_embeddings, dim], got shape [4]",
                         ShapeError);
    CHECK_THROWS_WITH_AS(embedding(x, iota({1})), "embedding: ids must be int32 or int64, got float32", DTypeError);
    CHECK_THROWS_AS(embedding(x, i64({2})), IndexError);
    CHECK_THROWS_WITH_AS(one_hot(i64({0}), 0), "one_hot: num_classes must be positive, got 0", ValueError);
    CHECK_THROWS_WITH_AS(one_hot(i64({0, 3}), 3),
                         "one_hot: index 3 is out of range for 3 classes (expected 0 <= index < 3)", IndexError);
    CHECK_THROWS_WITH_AS(one_hot(i64({-1}), 3),
                         "one_hot: index -1 is out of range for 3 classes (expected 0 <= index < 3)", IndexError);
    CHECK_THROWS_WITH_AS(one_hot(iota({2}), 3), "one_hot: indices must be int32 or int64, got float32", DTypeError);
    CHECK_THROWS_AS(one_hot(i64({0}), INT64_MAX), ShapeError);
    // Undefined tensors and wrong arity through apply.
    CHECK_THROWS_AS(reshape(Tensor(), {1}), ValueError);
    CHECK_THROWS_AS(apply(OpId::Gather, std::span<const Tensor>(&x, 1), Attrs{}), ValueError);
  }

  TEST_CASE("infer_layout agrees with the eager data ops") {
    Tensor x = iota({2, 3});
    Tensor idx = i64({0, 1, 1, 0}, {2, 2});
    Attrs a;
    a.axis = 1;
    const TensorLayout g[2] = {x.layout(), idx.layout()};
    CHECK(infer_layout(OpId::Gather, g, a).shape == gather(x, 1, idx).shape());
    const TensorLayout c[2] = {x.layout(), Tensor::from_vector(std::vector<int8_t>{1, 2, 3}, {1, 3}).layout()};
    a.axis = 0;
    TensorLayout lc = infer_layout(OpId::Concat, c, a);
    CHECK(lc.shape == Shape{3, 3});
    CHECK(lc.dtype == DType::float32);
    a.ints = {2, 2, 0};
    CHECK(infer_layout(OpId::Tile, std::span<const TensorLayout>(g, 1), a).shape == Shape{2, 4, 0});
    a.ints = {1, 1, 1, 2, 0, 0};
    CHECK_THROWS_AS(infer_layout(OpId::Pad, std::span<const TensorLayout>(g, 1), a), ValueError);
    a.axis = 5;
    a.dtype = DType::bool_;
    TensorLayout lo = infer_layout(OpId::OneHot, std::span<const TensorLayout>(g + 1, 1), a);
    CHECK(lo.shape == Shape{2, 2, 5});
    CHECK(lo.dtype == DType::bool_);
  }
}
