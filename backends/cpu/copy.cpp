#include "copy.h"

#include <cstring>

#include "../../tensor/dispatch.h"
#include "strided_loop.h"

namespace kiln::cpu {

std::vector<int64_t> broadcast_byte_strides(const Tensor& t, const Shape& shape) {
  const Shape& s = t.shape();
  const Strides& st = t.strides();
  const int64_t item = static_cast<int64_t>(t.itemsize());
  std::vector<int64_t> r(shape.size(), 0);
  const size_t lead = shape.size() - s.size();
  for (size_t i = 0; i < s.size(); ++i) r[lead + i] = s[i] == 1 && shape[lead + i] != 1 ? 0 : st[i] * item;
  return r;
}

void copy_into(const Tensor& src, const Tensor& dst) {
  auto L = make_loop<2>(dst.shape(), {&dst, &src});
  detail::visit_dtype(dst.dtype(), [&](auto dt) {
    using D = typename decltype(dt)::type;
    detail::visit_dtype(src.dtype(), [&](auto stag) {
      using S = typename decltype(stag)::type;
      run_loop(L, [](char** p, const int64_t* st, int64_t n) {
        if constexpr (std::is_same_v<D, S>) {
          if (st[0] == sizeof(D) && st[1] == sizeof(S)) {
            std::memcpy(p[0], p[1], n * sizeof(D));
            return;
          }
        }
        char* d = p[0];
        const char* s = p[1];
        for (int64_t i = 0; i < n; ++i, d += st[0], s += st[1])
          *reinterpret_cast<D*>(d) = detail::convert<D>(*reinterpret_cast<const S*>(s));
      });
    });
  });
}

}  // namespace kiln::cpu
