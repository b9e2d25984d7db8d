#include "shape.h"

#include "error.h"

namespace kiln {

std::string shape_str(const Shape& s) {
  std::string r = "[";
  for (size_t i = 0; i < s.size(); ++i) {
    if (i) r += ", ";
    r += std::to_string(s[i]);
  }
  return r + "]";
}

int64_t checked_numel(const Shape& s, std::string_view op) {
  int64_t n = 1;
  for (int64_t d : s) {
    if (d < 0) throw ShapeError(std::string(op) + ": negative dimension in shape " + shape_str(s));
    if (__builtin_mul_overflow(n, d, &n))
      throw ShapeError(std::string(op) + ": shape " + shape_str(s) + " has more elements than int64 can count");
  }
  return n;
}

Strides contiguous_strides(const Shape& s) {
  Strides st(s.size());
  int64_t acc = 1;
  for (size_t i = s.size(); i-- > 0;) {
    st[i] = acc;
    acc *= s[i] > 0 ? s[i] : 1;
  }
  return st;
}

bool is_contiguous(const Shape& s, const Strides& st) {
  int64_t acc = 1;
  for (size_t i = s.size(); i-- > 0;) {
    if (s[i] == 0) return true;
    if (s[i] != 1 && st[i] != acc) return false;
    acc *= s[i];
  }
  return true;
}

Shape broadcast_shapes(const Shape& a, const Shape& b, std::string_view op) {
  size_t n = std::max(a.size(), b.size());
  Shape r(n);
  for (size_t i = 0; i < n; ++i) {
    int64_t da = i < n - a.size() ? 1 : a[i - (n - a.size())];
    int64_t db = i < n - b.size() ? 1 : b[i - (n - b.size())];
    if (da == db || db == 1) r[i] = da;
    else if (da == 1) r[i] = db;
    else
      throw ShapeError(std::string(op) + ": cannot broadcast shapes " + shape_str(a) + " and " + shape_str(b));
  }
  return r;
}

int64_t normalize_axis(int64_t axis, int64_t ndim, std::string_view op) {
  if (ndim == 0)
    throw IndexError(std::string(op) + ": a 0-d tensor has no axis " + std::to_string(axis) +
                     " (it has no axes; reshape it to 1-d first)");
  if (axis < -ndim || axis >= ndim)
    throw IndexError(std::string(op) + ": axis " + std::to_string(axis) + " is out of range for a " +
                     std::to_string(ndim) + "-d tensor (expected -" + std::to_string(ndim) + " <= axis < " +
                     std::to_string(ndim) + ")");
  return axis < 0 ? axis + ndim : axis;
}

}  // namespace kiln
