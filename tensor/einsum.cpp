// einsum and the convolutions of tensor/einsum.h, composed from op-table rows.
#include "einsum.h"

#include <algorithm>
#include <functional>
#include <limits>
#include <map>
#include <string>

#include "creation.h"
#include "error.h"
#include "op_table.h"
#include "ops.h"

namespace kiln {

namespace {

std::string str(int64_t v) { return std::to_string(v); }

// Labels: 0-51 are the letters a-z, A-Z; 52 + k is the k-th broadcast axis
// of "..." (right-aligned across operands).
using Labels = std::vector<int>;
constexpr int kEllipsisBase = 52;

int letter_label(char c) { return c >= 'a' && c <= 'z' ? c - 'a' : c - 'A' + 26; }
char label_char(int l) { return l < 26 ? char('a' + l) : char('A' + l - 26); }

struct Term {
  Labels letters_before, letters_after;  // around "..." (all in letters_before when there is none)
  bool ellipsis = false;
};

[[noreturn]] void bad_subscripts(std::string_view s, size_t at, const std::string& why) {
  throw ValueError("einsum: " + why + " at position " + str(int64_t(at)) + " of \"" + std::string(s) + "\"");
}

// Parses one comma-separated term between [b, e) of s.
Term parse_term(std::string_view s, size_t b, size_t e) {
  Term t;
  for (size_t i = b; i < e; ++i) {
    const char c = s[i];
    if (c == ' ') continue;
    if (c == '.') {
      if (t.ellipsis || i + 3 > e || s.substr(i, 3) != "...") bad_subscripts(s, i, "expected \"...\" (once per term)");
      t.ellipsis = true;
      i += 2;
      continue;
    }
    if (!((c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z')))
      bad_subscripts(s, i, std::string("invalid subscript character '") + c + "' (letters, ',', '->' and '...' only)");
    (t.ellipsis ? t.letters_after : t.letters_before).push_back(letter_label(c));
  }
  return t;
}

// The labels of an operand of rank nd: letters around its ellipsis axes.
Labels expand(const Term& t, int64_t nd, int64_t max_ell, size_t which) {
  const int64_t letters = static_cast<int64_t>(t.letters_before.size() + t.letters_after.size());
  if (!t.ellipsis && letters != nd)
    throw ValueError("einsum: operand " + str(int64_t(which)) + " has " + str(nd) + " axes but its subscripts name " +
                     str(letters));
  if (t.ellipsis && letters > nd)
    throw ValueError("einsum: operand " + str(int64_t(which)) + " has " + str(nd) + " axes, fewer than the " +
                     str(letters) + " letters of its subscripts");
  Labels l = t.letters_before;
  const int64_t e = nd - letters;
  for (int64_t k = 0; t.ellipsis && k < e; ++k) l.push_back(kEllipsisBase + static_cast<int>(max_ell - e + k));
  l.insert(l.end(), t.letters_after.begin(), t.letters_after.end());
  return l;
}

struct Operand {
  Tensor t;
  Labels labels;
};

int64_t index_of(const Labels& l, int x) {
  for (size_t i = 0; i < l.size(); ++i)
    if (l[i] == x) return static_cast<int64_t>(i);
  return -1;
}
bool has(const Labels& l, int x) { return index_of(l, x) >= 0; }

// The diagonal of axes p < q (equal extents) as one axis at the end.
Operand take_diagonal(const Operand& o, int64_t p, int64_t q) {
  const int64_t n = o.t.shape()[p];
  if (o.t.shape()[q] != n)
    throw ShapeError("einsum: label '" + std::string(1, label_char(o.labels[p])) + "' is repeated in one operand with " +
                     "extents " + str(n) + " and " + str(o.t.shape()[q]));
  Axes perm;
  Labels rest;
  for (int64_t d = 0; d < o.t.ndim(); ++d)
    if (d != p && d != q) { perm.push_back(d); rest.push_back(o.labels[d]); }
  perm.push_back(p);
  perm.push_back(q);
  Shape s;
  for (int64_t d : perm) s.push_back(o.t.shape()[d]);
  s.pop_back();
  s.back() = n * n;
  Tensor flat = reshape(permute(o.t, perm), s);
  rest.push_back(o.labels[p]);
  return {slice(flat, -1, 0, n * n, n + 1), rest};
}

// Sums the axes of o whose labels `keep` does not hold.
Operand sum_unkept(const Operand& o, const std::function<bool(int)>& keep) {
  Axes axes;
  Labels rest;
  for (int64_t d = 0; d < o.t.ndim(); ++d) {
    if (keep(o.labels[d])) rest.push_back(o.labels[d]);
    else axes.push_back(d);
  }
  if (axes.empty()) return o;
  return {sum(o.t, axes), rest};
}

Tensor permute_to(const Operand& o, const Labels& order) {
  Axes perm;
  for (int l : order) perm.push_back(index_of(o.labels, l));
  bool identity = true;
  for (size_t i = 0; i < perm.size(); ++i) identity = identity && perm[i] == static_cast<int64_t>(i);
  return identity ? o.t : permute(o.t, perm);
}

// A x B as one batched matmul: [batch, a_only, contracted] @ [batch,
// contracted, b_only] -> [batch, a_only, b_only].
Operand contract(const Operand& a, const Operand& b, const std::function<bool(int)>& keep,
                 const std::map<int, int64_t>& extent) {
  Labels batch, a_only, b_only, k;
  for (int l : a.labels) {
    if (has(b.labels, l)) (keep(l) ? batch : k).push_back(l);
    else a_only.push_back(l);
  }
  for (int l : b.labels)
    if (!has(a.labels, l)) b_only.push_back(l);
  auto prod = [&](const Labels& ls) {
    int64_t p = 1;
    for (int l : ls) p *= extent.at(l);
    return p;
  };
  Shape sa, sb;
  Labels la = batch, lb = batch;
  la.insert(la.end(), a_only.begin(), a_only.end());
  la.insert(la.end(), k.begin(), k.end());
  lb.insert(lb.end(), k.begin(), k.end());
  lb.insert(lb.end(), b_only.begin(), b_only.end());
  const int64_t nb = prod(batch), m = prod(a_only), n = prod(b_only), kk = prod(k);
  Tensor ta = reshape(permute_to(a, la), {nb, m, kk});
  Tensor tb = reshape(permute_to(b, lb), {nb, kk, n});
  Tensor r = matmul(ta, tb);
  Labels out = batch;
  out.insert(out.end(), a_only.begin(), a_only.end());
  out.insert(out.end(), b_only.begin(), b_only.end());
  Shape s;
  for (int l : out) s.push_back(extent.at(l));
  return {reshape(r, s), out};
}

}  // namespace

Tensor einsum(std::string_view subscripts, const std::vector<Tensor>& operands) {
  const size_t arrow = subscripts.find("->");
  const std::string_view lhs = subscripts.substr(0, arrow);
  std::vector<Term> terms;
  for (size_t b = 0;;) {
    const size_t e = std::min(lhs.find(',', b), lhs.size());
    terms.push_back(parse_term(subscripts, b, e));
    if (e >= lhs.size()) break;
    b = e + 1;
  }
  if (terms.size() != operands.size())
    throw ValueError("einsum: \"" + std::string(subscripts) + "\" names " + str(int64_t(terms.size())) +
                     " operands, got " + str(int64_t(operands.size())));
  int64_t max_ell = 0;
  for (size_t i = 0; i < terms.size(); ++i) {
    if (!operands[i].defined()) throw ValueError("einsum: operand " + str(int64_t(i)) + " is an undefined tensor");
    if (terms[i].ellipsis)
      max_ell = std::max<int64_t>(max_ell, operands[i].ndim() - static_cast<int64_t>(terms[i].letters_before.size() +
                                                                                      terms[i].letters_after.size()));
  }
  std::vector<Operand> ops;
  std::map<int, int64_t> extent;
  for (size_t i = 0; i < terms.size(); ++i) {
    Operand o{operands[i], expand(terms[i], operands[i].ndim(), max_ell, i)};
    for (int64_t d = 0; d < o.t.ndim(); ++d) {
      const int l = o.labels[d];
      const int64_t x = o.t.shape()[d];
      auto [it, fresh] = extent.emplace(l, x);
      if (!fresh && it->second != x) {
        if (it->second == 1) it->second = x;
        else if (x != 1)
          throw ShapeError("einsum: label '" + (l < kEllipsisBase ? std::string(1, label_char(l)) : std::string("...")) +
                           "' has extent " + str(it->second) + " in one operand and " + str(x) + " in operand " +
                           str(int64_t(i)));
      }
    }
    ops.push_back(std::move(o));
  }
  // The output labels.
  Labels out;
  if (arrow != std::string_view::npos) {
    const Term t = parse_term(subscripts, arrow + 2, subscripts.size());
    if (t.ellipsis && max_ell == 0 && std::none_of(terms.begin(), terms.end(), [](const Term& x) { return x.ellipsis; }))
      bad_subscripts(subscripts, arrow + 2, "output has \"...\" but no input does");
    out = t.letters_before;
    for (int64_t k = 0; t.ellipsis && k < max_ell; ++k) out.push_back(kEllipsisBase + static_cast<int>(k));
    out.insert(out.end(), t.letters_after.begin(), t.letters_after.end());
    for (size_t i = 0; i < out.size(); ++i) {
      if (!extent.count(out[i]))
        bad_subscripts(subscripts, arrow + 2,
                       std::string("output letter '") + label_char(out[i]) + "' appears in no input");
      if (index_of(out, out[i]) != static_cast<int64_t>(i))
        bad_subscripts(subscripts, arrow + 2, std::string("output letter '") + label_char(out[i]) + "' is repeated");
    }
  } else {
    std::map<int, int> axes_seen;
    for (const Operand& o : ops)
      for (int l : o.labels) ++axes_seen[l];
    for (int64_t k = 0; k < max_ell; ++k) out.push_back(kEllipsisBase + static_cast<int>(k));
    for (const auto& [l, n] : axes_seen)  // std::map: letters in ASCII order (A-Z before a-z)
      if (l < kEllipsisBase && n == 1) out.push_back(l);
    std::stable_sort(out.begin() + max_ell, out.end(), [](int a, int b) { return label_char(a) < label_char(b); });
  }
  // Per operand: broadcast size-1 extents, take diagonals of repeated labels.
  for (Operand& o : ops) {
    Shape want;
    for (int l : o.labels) want.push_back(extent[l]);
    if (want != o.t.shape()) o.t = broadcast_to(o.t, want);
    for (bool again = true; again;) {
      again = false;
      for (int64_t p = 0; p < o.t.ndim() && !again; ++p)
        for (int64_t q = p + 1; q < o.t.ndim() && !again; ++q)
          if (o.labels[p] == o.labels[q]) {
            o = take_diagonal(o, p, q);
            again = true;
          }
    }
  }
  // Greedy pairwise contraction: the pair with the smallest result first.
  auto needed_after = [&](int l, const Operand* x, const Operand* y) {
    if (has(out, l)) return true;
    for (const Operand& o : ops)
      if (&o != x && &o != y && has(o.labels, l)) return true;
    return false;
  };
  while (ops.size() > 1) {
    size_t bi = 0, bj = 1;
    double best = std::numeric_limits<double>::infinity();
    for (size_t i = 0; i < ops.size(); ++i)
      for (size_t j = i + 1; j < ops.size(); ++j) {
        // The result keeps the labels of either operand needed later.
        Labels result;
        for (const Operand* o : {&ops[i], &ops[j]})
          for (int l : o->labels)
            if (!has(result, l) && needed_after(l, &ops[i], &ops[j])) result.push_back(l);
        double size = 1;
        for (int l : result) size *= double(extent[l]);
        if (size < best) { best = size; bi = i; bj = j; }
      }
    const Operand* x = &ops[bi];
    const Operand* y = &ops[bj];
    auto keep = [&](int l) { return needed_after(l, x, y); };
    // Labels only one side has and no one needs are summed away first.
    Operand a = sum_unkept(*x, [&](int l) { return keep(l) || has(y->labels, l); });
    Operand b = sum_unkept(*y, [&](int l) { return keep(l) || has(x->labels, l); });
    Operand r = contract(a, b, keep, extent);
    ops.erase(ops.begin() + static_cast<std::ptrdiff_t>(bj));
    ops[bi] = std::move(r);
  }
  Operand last = sum_unkept(ops[0], [&](int l) { return has(out, l); });
  return permute_to(last, out);
}

// ---- convolution (the pools are rows: ops_select.cpp) -------------------------------------------------

namespace {

struct Window {
  int64_t kh, kw, sh, sw, ph, pw, dh, dw, oh, ow;
};

std::vector<int64_t> pair_of(std::vector<int64_t> v, const char* op, const char* what) {
  if (v.size() == 1) v.push_back(v[0]);
  if (v.size() != 2)
    throw ValueError(std::string(op) + ": " + what + " must have 1 or 2 entries, got " + str(int64_t(v.size())));
  return v;
}

// [N, C, KH*KW, OH, OW]: the input under each kernel position, from strided
// slices of the padded input.
Tensor patches(const Tensor& x, const Window& w, Scalar pad_value) {
  Tensor xp = w.ph || w.pw ? pad(x, {{w.ph, w.ph}, {w.pw, w.pw}}, pad_value) : x;
  std::vector<Tensor> cols;
  for (int64_t i = 0; i < w.kh; ++i)
    for (int64_t j = 0; j < w.kw; ++j) {
      Tensor r = slice(xp, 2, i * w.dh, i * w.dh + (w.oh - 1) * w.sh + 1, w.sh);
      cols.push_back(unsqueeze(slice(r, 3, j * w.dw, j * w.dw + (w.ow - 1) * w.sw + 1, w.sw), 2));
    }
  return cols.size() == 1 ? cols[0] : concat(cols, 2);
}

}  // namespace

Tensor conv2d(const Tensor& x, const Tensor& weight, const Tensor& bias, std::vector<int64_t> stride,
              std::vector<int64_t> padding, std::vector<int64_t> dilation, int64_t groups) {
  if (!x.defined() || !weight.defined()) throw ValueError("conv2d: x and weight must be defined tensors");
  const auto s = pair_of(std::move(stride), "conv2d", "stride"), p = pair_of(std::move(padding), "conv2d", "padding"),
             d = pair_of(std::move(dilation), "conv2d", "dilation");
  Attrs a;
  a.ints = {s[0], s[1], p[0], p[1], d[0], d[1]};
  a.axis = groups;
  const TensorLayout in[2] = {x.layout(), weight.layout()};
  const Shape out = infer_layout(OpId::Conv2d, in, a).shape;  // checks shapes, groups and attributes
  const int64_t oc = out[1];
  if (bias.defined() && bias.shape() != Shape{oc})
    throw ShapeError("conv2d: bias must have shape [" + str(oc) + "], got " + shape_str(bias.shape()));
  Tensor y;
  if (x.device().type == DeviceType::cpu) {
    y = apply(OpId::Conv2d, x, weight, a);  // the Conv2d row: im2col in one pass + GEMM
  } else {  // devices without a Conv2d kernel: im2col from strided slices, one batched matmul
    const Window w{weight.shape()[2], weight.shape()[3], s[0], s[1], p[0], p[1], d[0], d[1], out[2], out[3]};
    const int64_t n = x.shape()[0], kk = w.kh * w.kw, cg = x.shape()[1] / groups;
    Tensor cols = reshape(patches(x, w, 0), {n, groups, cg * kk, w.oh * w.ow});
    Tensor wm = reshape(weight, {1, groups, oc / groups, cg * kk});
    y = reshape(matmul(wm, cols), out);
  }
  return bias.defined() ? y + reshape(bias, {oc, 1, 1}) : y;
}

Tensor conv1d(const Tensor& x, const Tensor& weight, const Tensor& bias, int64_t stride, int64_t padding,
              int64_t dilation, int64_t groups) {
  if (!x.defined() || x.ndim() != 3)
    throw ShapeError("conv1d: x must be 3-d [N, C, L], got " + (x.defined() ? shape_str(x.shape()) : "undefined"));
  if (!weight.defined() || weight.ndim() != 3)
    throw ShapeError("conv1d: weight must be 3-d [C_out, C_in / groups, K], got " +
                     (weight.defined() ? shape_str(weight.shape()) : "undefined"));
  // conv1d's own checks (conv2d's messages would name conv2d and 4-d shapes),
  // overflow-checked: padding and dilation are user-given and may be huge.
  const Shape &xs = x.shape(), &ws = weight.shape();
  const std::string shapes = "(x shape " + shape_str(xs) + ", weight shape " + shape_str(ws) + ")";
  if (stride <= 0 || dilation <= 0)
    throw ValueError("conv1d: stride and dilation must be positive, got stride " + str(stride) + ", dilation " +
                     str(dilation));
  if (padding < 0) throw ValueError("conv1d: padding must not be negative, got " + str(padding));
  if (groups <= 0) throw ValueError("conv1d: groups must be positive, got " + str(groups));
  const int64_t c = xs[1], oc = ws[0], k = ws[2];
  if (c % groups != 0 || oc % groups != 0)
    throw ShapeError("conv1d: groups " + str(groups) + " must divide the input channels " + str(c) +
                     " and the output channels " + str(oc));
  if (ws[1] != c / groups)
    throw ShapeError("conv1d: weight shape " + shape_str(ws) + " expects " + str(ws[1] * groups) +
                     " input channels (groups " + str(groups) + "), x has " + str(c) + " " + shapes);
  if (k <= 0) throw ShapeError("conv1d: the kernel must have a positive length, got weight shape " + shape_str(ws));
  int64_t twice = 0, padded = 0, span = 0;
  if (__builtin_mul_overflow(padding, int64_t{2}, &twice) || __builtin_add_overflow(xs[2], twice, &padded))
    throw ShapeError("conv1d: the padded input's length (" + str(xs[2]) + " + 2 x " + str(padding) +
                     ") exceeds 2^63 - 1");
  if (__builtin_mul_overflow(dilation, k - 1, &span) || __builtin_add_overflow(span, int64_t{1}, &span))
    throw ShapeError("conv1d: the kernel's span (dilation " + str(dilation) + " x (kernel " + str(k) +
                     " - 1) + 1) exceeds 2^63 - 1 " + shapes);
  if (span > padded)
    throw ShapeError("conv1d: the kernel spans " + str(span) + " but the padded input is " + str(padded) + " " +
                     shapes.substr(0, shapes.size() - 1) + ", padding " + str(padding) + ", dilation " +
                     str(dilation) + ")");
  if (bias.defined() && bias.shape() != Shape{oc})
    throw ShapeError("conv1d: bias must have shape [" + str(oc) + "], got " + shape_str(bias.shape()));
  Tensor y = conv2d(unsqueeze(x, 2), unsqueeze(weight, 2), bias, {1, stride}, {0, padding}, {1, dilation}, groups);
  return squeeze(y, {2});
}

}  // namespace kiln
