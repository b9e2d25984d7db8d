// Host-side logic of the CUDA elementwise kernels (backends/cuda/
// offset_calc.h), tested on the CPU: dimension merging, the per-operand
// offsets of every linear index against a direct computation, the 32-bit
// index decision and the launch arithmetic.
#include "../backends/cuda/offset_calc.h"
#include "test_util.h"

namespace {
using namespace kiln::cuda;

/// Offset of row-major linear index i in a tensor of `shape` with `strides`.
int64_t direct_offset(int64_t i, const std::vector<int64_t>& shape, const std::vector<int64_t>& strides) {
  int64_t off = 0;
  for (size_t j = shape.size(); j-- > 0;) {
    off += (i % shape[j]) * strides[j];
    i /= shape[j];
  }
  return off;
}
}  // namespace

TEST_SUITE("cuda_offset_calc") {
  TEST_CASE("contiguous operands merge into one dimension; size-1 dimensions drop") {
    const Coalesced c = coalesce({4, 1, 5, 6}, {{30, 30, 6, 1}, {30, 1, 6, 1}});
    REQUIRE(c.sizes.size() == 1);
    CHECK(c.sizes[0] == 120);
    CHECK(c.strides[0] == std::vector<int64_t>{1, 1});
  }

  TEST_CASE("a broadcast operand keeps its own dimension; a transposed one does not merge") {
    const Coalesced b = coalesce({4, 5}, {{5, 1}, {0, 1}});  // a row broadcast down 4 rows
    REQUIRE(b.sizes.size() == 2);
    CHECK(b.sizes == std::vector<int64_t>{5, 4});
    CHECK(b.strides[1] == std::vector<int64_t>{5, 0});
    const Coalesced t = coalesce({4, 5}, {{5, 1}, {1, 4}});
    CHECK(t.sizes.size() == 2);
  }

  TEST_CASE("offsets of every element match the direct computation (random shapes, strides, broadcasts)") {
    std::mt19937_64 rng(7);
    for (int trial = 0; trial < 200; ++trial) {
      const size_t nd = 1 + rng() % 5;
      std::vector<int64_t> shape(nd);
      for (auto& s : shape) s = 1 + int64_t(rng() % 4);
      std::vector<std::vector<int64_t>> strides(3, std::vector<int64_t>(nd));
      for (auto& st : strides)
        for (size_t j = 0; j < nd; ++j) st[j] = rng() % 4 == 0 ? 0 : int64_t(rng() % 41) - 20;
      const Coalesced c = coalesce(shape, strides);
      OffsetCalc<3, int64_t> oc;
      REQUIRE(make_offset_calc(c, oc));
      OffsetCalc<3, int32_t> oc32;
      REQUIRE(fits_int32(c, 1000));
      REQUIRE(make_offset_calc(c, oc32));
      const int64_t n = kiln::checked_numel(shape);
      for (int64_t i = 0; i < n; ++i) {
        int64_t off[3];
        int32_t off32[3];
        oc.get(i, off);
        oc32.get(int32_t(i), off32);
        for (int k = 0; k < 3; ++k) {
          CAPTURE(trial);
          CAPTURE(i);
          CHECK(off[k] == direct_offset(i, shape, strides[size_t(k)]));
          CHECK(off32[k] == off[k]);
        }
      }
    }
  }

  TEST_CASE("32-bit indices only when the count and every operand's reach fit") {
    CHECK(fits_int32(coalesce({1 << 20}, {{1}}), 1 << 20));
    CHECK_FALSE(fits_int32(coalesce({int64_t(1) << 31}, {{1}}), int64_t(1) << 31));
    CHECK_FALSE(fits_int32(coalesce({3}, {{int64_t(1) << 30}}), 3));   // reaches 2^31: a far stride
    CHECK(fits_int32(coalesce({3}, {{-(int64_t(1) << 29)}}), 3));       // negative strides count by size
    CHECK_FALSE(fits_int32(coalesce({3}, {{-(int64_t(1) << 30)}}), 3));
    CHECK_FALSE(make_offset_calc(Coalesced{std::vector<int64_t>(13, 2), std::vector<std::vector<int64_t>>(13, {1})},
                                 *std::make_unique<OffsetCalc<1, int64_t>>()));
  }

  TEST_CASE("launch arithmetic: enough 256-thread blocks for every element, capped, never zero") {
    CHECK(launch_for(1, 4, 100).blocks == 1);
    CHECK(launch_for(1024, 4, 100).blocks == 1);
    CHECK(launch_for(1025, 4, 100).blocks == 2);
    CHECK(launch_for(int64_t(1) << 30, 1, 2112).blocks == 2112);
    CHECK(launch_for(0, 1, 10).blocks == 1);
    CHECK(launch_for(5, 1, 10).threads == 256);
  }
}
