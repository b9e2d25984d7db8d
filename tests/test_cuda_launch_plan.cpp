// kiln tests: the host-side geometry of the CUDA reduction, scan and row
// kernels (backends/cuda/launch_plan.h), checked on the CPU against
// brute-force walks over every element.
#include <algorithm>
#include <random>
#include <set>

#include "../backends/cuda/launch_plan.h"
#include "test_util.h"

namespace {
using namespace kiln::cuda;

std::vector<int64_t> row_major_strides(const std::vector<int64_t>& shape) {
  std::vector<int64_t> s(shape.size(), 1);
  for (size_t d = shape.size(); d-- > 1;) s[d - 1] = s[d] * shape[d];
  return s;
}

/// Calls f(multi-index) for every element of `shape` in row-major order.
template <class F> void for_each_index(const std::vector<int64_t>& shape, F f) {
  int64_t n = 1;
  for (int64_t e : shape) n *= e;
  std::vector<int64_t> idx(shape.size(), 0);
  for (int64_t i = 0; i < n; ++i) {
    f(idx);
    for (size_t d = shape.size(); d-- > 0;) {
      if (++idx[d] < shape[d]) break;
      idx[d] = 0;
    }
  }
}
}  // namespace

TEST_SUITE("cuda launch plan") {
  TEST_CASE("reduce_geometry: the permuted contiguous copy holds output o's elements at [o*nred, (o+1)*nred) in logical order") {
    std::mt19937_64 rng(7);
    for (int trial = 0; trial < 300; ++trial) {
      const size_t nd = rng() % 5;
      std::vector<int64_t> shape(nd);
      std::vector<bool> red(nd);
      for (size_t d = 0; d < nd; ++d) {
        shape[d] = int64_t(rng() % 4);  // 0..3: empty extents too
        red[d] = rng() & 1;
      }
      const ReduceGeometry g = reduce_geometry(shape, red);
      CAPTURE(kiln::shape_str(kiln::Shape(shape.begin(), shape.end())));
      REQUIRE(g.perm.size() == nd);
      // perm is a permutation: kept axes then reduced, each ascending.
      std::vector<int64_t> sorted = g.perm;
      std::sort(sorted.begin(), sorted.end());
      for (size_t d = 0; d < nd; ++d) CHECK(sorted[d] == int64_t(d));
      bool seen_red = false;
      for (size_t d = 0; d < nd; ++d) {
        if (red[size_t(g.perm[d])]) seen_red = true;
        else CHECK_FALSE(seen_red);
        if (d > 0 && red[size_t(g.perm[d])] == red[size_t(g.perm[d - 1])]) CHECK(g.perm[d] > g.perm[d - 1]);
      }
      bool identity = true;
      for (size_t d = 0; d < nd; ++d) identity = identity && g.perm[d] == int64_t(d);
      CHECK(g.identity == identity);
      // Brute force: each element's position in the permuted contiguous copy
      // is o * nred + r, o its output (row-major over kept axes), r its
      // row-major position over the reduced axes.
      std::vector<int64_t> pshape;
      for (int64_t a : g.perm) pshape.push_back(shape[size_t(a)]);
      const std::vector<int64_t> pst = row_major_strides(pshape);
      int64_t nout = 1, nred = 1, count = 0;
      for (size_t d = 0; d < nd; ++d) (red[d] ? nred : nout) *= shape[d];
      CHECK(g.nout == nout);
      CHECK(g.nred == nred);
      std::set<int64_t> positions;
      for_each_index(shape, [&](const std::vector<int64_t>& idx) {
        int64_t o = 0, r = 0, p = 0;
        for (size_t d = 0; d < nd; ++d) {
          if (red[d]) r = r * shape[d] + idx[d];
          else o = o * shape[d] + idx[d];
        }
        for (size_t j = 0; j < nd; ++j) p += idx[size_t(g.perm[j])] * pst[j];
        CHECK(p == o * g.nred + r);
        positions.insert(p);
        ++count;
      });
      CHECK(int64_t(positions.size()) == count);
    }
  }

  TEST_CASE("reduce_launch: chunks cover every element once, threads a power of two from the length only") {
    for (int64_t n : std::vector<int64_t>{0, 1, 2, 31, 32, 33, 255, 256, 257, 16383, 16384, 16385, 100000, int64_t(1) << 33}) {
      CAPTURE(n);
      const ReduceLaunch l = reduce_launch(n);
      CHECK(l.threads >= 32);
      CHECK(l.threads <= 256);
      CHECK((l.threads & (l.threads - 1)) == 0);
      if (n > 0) CHECK((l.threads >= n || l.threads == 256));
      if (n > 0 && l.threads > 32) CHECK(l.threads / 2 < n);
      CHECK(l.chunk >= 1);
      CHECK(l.chunk <= kReduceChunk);
      CHECK(l.chunks >= 1);
      if (n > 0) {
        CHECK(l.chunks * l.chunk >= n);
        CHECK((l.chunks - 1) * l.chunk < n);  // no empty chunk
      }
    }
  }

  TEST_CASE("line_geometry: base(line) + j * inner enumerates every element of a contiguous tensor once") {
    const std::vector<std::vector<int64_t>> shapes = {{}, {1}, {7}, {3, 4}, {2, 3, 4}, {5, 1, 2, 3}, {2, 0, 3}};
    for (const auto& shape : shapes) {
      for (int64_t axis = 0; axis < std::max<int64_t>(1, int64_t(shape.size())); ++axis) {
        CAPTURE(kiln::shape_str(kiln::Shape(shape.begin(), shape.end())));
        CAPTURE(axis);
        const LineGeometry g = line_geometry(shape, axis);
        int64_t n = 1;
        for (int64_t e : shape) n *= e;
        CHECK(g.lines() * g.len == n);
        const std::vector<int64_t> st = row_major_strides(shape);
        std::set<int64_t> seen;
        for (int64_t l = 0; l < g.lines(); ++l)
          for (int64_t j = 0; j < g.len; ++j) {
            const int64_t off = g.base(l) + j * g.inner;
            CHECK(off >= 0);
            CHECK(off < n);
            seen.insert(off);
            // Along the line the axis coordinate is j: the offset steps by the axis stride.
            if (!shape.empty() && j > 0) CHECK(off - (g.base(l) + (j - 1) * g.inner) == st[size_t(axis)]);
          }
        CHECK(int64_t(seen.size()) == n);
      }
    }
  }

  TEST_CASE("row_threads and grid_for") {
    CHECK(row_threads(0) == 32);
    CHECK(row_threads(1) == 32);
    CHECK(row_threads(33) == 64);
    CHECK(row_threads(1024) == 1024);
    CHECK(row_threads(1 << 20) == 1024);
    CHECK(grid_for(0, 256) == 1u);
    CHECK(grid_for(257, 256) == 2u);
    CHECK(grid_for(int64_t(1) << 45, 1) == 0x7fffffffu);
  }
}
