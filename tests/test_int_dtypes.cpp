// int16, uint16, uint32, uint64 as first-class dtypes (issue 11, item 6):
// codes, names, numpy 2's promotion table, exact scalars at the range edges,
// creation, casts, kernels, reductions, ordering, printing, file formats and
// the compiled path (compiled == eager bitwise). The table-driven op walk
// (test_op_table.cpp) covers every row on these dtypes through kt::all_dtypes.
#include <algorithm>
#include <cstdint>
#include <filesystem>
#include <limits>
#include <map>
#include <sstream>

#include "../io/npy.h"
#include "../io/safetensors.h"
#include "../tensor/kernel_registry.h"
#include "../tensor/ref_ops.h"
#include "same_bits.h"
#include "test_util.h"

using namespace kiln;

namespace {

constexpr uint64_t kU64Max = std::numeric_limits<uint64_t>::max();
constexpr uint64_t k2to63 = uint64_t(1) << 63;

template <class T>
std::vector<T> vec(const Tensor& t) {
  return t.to_vector<T>();
}

}  // namespace

TEST_SUITE("int_dtypes") {
  TEST_CASE("codes are stable (MEF files store them), names and sizes") {
    // The nine older codes keep their values; the new ones are appended.
    const std::pair<DType, int> codes[] = {{DType::bool_, 0},   {DType::uint8, 1},    {DType::int8, 2},
                                           {DType::int32, 3},   {DType::int64, 4},    {DType::float16, 5},
                                           {DType::bfloat16, 6}, {DType::float32, 7}, {DType::float64, 8},
                                           {DType::int16, 9},   {DType::uint16, 10},  {DType::uint32, 11},
                                           {DType::uint64, 12}};
    for (auto [d, c] : codes) CHECK(static_cast<int>(d) == c);
    CHECK(kNumDTypes == 13);
    CHECK(name(DType::int16) == "int16");
    CHECK(name(DType::uint16) == "uint16");
    CHECK(name(DType::uint32) == "uint32");
    CHECK(name(DType::uint64) == "uint64");
    CHECK(size_of(DType::int16) == 2);
    CHECK(size_of(DType::uint16) == 2);
    CHECK(size_of(DType::uint32) == 4);
    CHECK(size_of(DType::uint64) == 8);
    for (DType d : {DType::int16, DType::uint16, DType::uint32, DType::uint64}) {
      CHECK(dtype_from_name(name(d)) == d);
      CHECK(is_integral(d));
      CHECK_FALSE(is_floating(d));
      std::ostringstream os;
      os << d;
      CHECK(os.str() == name(d));
    }
    CHECK(is_signed(DType::int16));
    for (DType d : {DType::uint8, DType::uint16, DType::uint32, DType::uint64}) {
      CHECK(is_unsigned(d));
      CHECK_FALSE(is_signed(d));
    }
    for (DType d : {DType::bool_, DType::int8, DType::int16, DType::int32, DType::int64, DType::float32})
      CHECK_FALSE(is_unsigned(d));
    CHECK_THROWS_AS(name(static_cast<DType>(13)), DTypeError);
    CHECK(dtype_v<uint64_t> == DType::uint64);
    CHECK(dtype_v<int16_t> == DType::int16);
  }

  TEST_CASE("promotion follows the numpy 2.x promotion table") {
    // numpy 2.x promotion table: numpy.promote_types(row, column), numpy 2.4.
    using D = DType;
    constexpr D b_ = D::bool_, u8 = D::uint8, i8 = D::int8, i16 = D::int16, u16 = D::uint16, i32 = D::int32,
                u32 = D::uint32, i64 = D::int64, u64 = D::uint64, f16 = D::float16, f32 = D::float32,
                f64 = D::float64;
    const D order[12] = {b_, u8, i8, i16, u16, i32, u32, i64, u64, f16, f32, f64};
    const D table[12][12] = {
        {b_, u8, i8, i16, u16, i32, u32, i64, u64, f16, f32, f64},    // b_
        {u8, u8, i16, i16, u16, i32, u32, i64, u64, f16, f32, f64},   // u8
        {i8, i16, i8, i16, i32, i32, i64, i64, f64, f16, f32, f64},   // i8
        {i16, i16, i16, i16, i32, i32, i64, i64, f64, f32, f32, f64}, // i16
        {u16, u16, i32, i32, u16, i32, u32, i64, u64, f32, f32, f64}, // u16
        {i32, i32, i32, i32, i32, i32, i64, i64, f64, f64, f64, f64}, // i32
        {u32, u32, i64, i64, u32, i64, u32, i64, u64, f64, f64, f64}, // u32
        {i64, i64, i64, i64, i64, i64, i64, i64, f64, f64, f64, f64}, // i64
        {u64, u64, f64, f64, u64, f64, u64, f64, u64, f64, f64, f64}, // u64
        {f16, f16, f16, f32, f32, f64, f64, f64, f64, f16, f32, f64}, // f16
        {f32, f32, f32, f32, f32, f64, f64, f64, f64, f32, f32, f64}, // f32
        {f64, f64, f64, f64, f64, f64, f64, f64, f64, f64, f64, f64}, // f64
    };
    for (int i = 0; i < 12; ++i)
      for (int j = 0; j < 12; ++j) {
        CAPTURE(name(order[i]));
        CAPTURE(name(order[j]));
        CHECK(promote_types(order[i], order[j]) == table[i][j]);
      }
    // bfloat16 follows float16's rules (ml_dtypes); float16 with bfloat16 gives float32.
    for (int j = 0; j < 9; ++j) CHECK(promote_types(D::bfloat16, order[j]) == (table[9][j] == f16 ? D::bfloat16 : table[9][j]));
    // The op front end promotes by the same table.
    CHECK((ones({2}, D::uint32) + ones({2}, D::int32)).dtype() == i64);
    CHECK((ones({2}, D::uint64) + ones({2}, D::int64)).dtype() == f64);
    CHECK((ones({2}, D::uint8) * ones({2}, D::int8)).dtype() == i16);
    CHECK((ones({2}, D::int16) + ones({2}, D::float16)).dtype() == f32);
    // Scalars stay weak: the tensor's dtype wins within its kind.
    CHECK((ones({2}, D::uint16) + 1).dtype() == u16);
    CHECK((ones({2}, D::uint64) * 2.5).dtype() == f32);
    // Accum rows: unsigned accumulates in uint64, signed in int64 (numpy).
    for (D d : {u8, u16, u32, u64}) {
      CHECK(sum(ones({2}, d)).dtype() == u64);
      CHECK(prod(ones({2}, d)).dtype() == u64);
      CHECK(cumsum(ones({2}, d), 0).dtype() == u64);
    }
    CHECK(sum(ones({2}, i16)).dtype() == i64);
    CHECK(cumprod(ones({2}, i16), 0).dtype() == i64);
  }

  TEST_CASE("scalars are exact at the range edges: INT16_MIN/MAX, UINT64_MAX, 2^63") {
    CHECK(vec<int16_t>(full({2}, INT16_MIN, DType::int16)) == std::vector<int16_t>{INT16_MIN, INT16_MIN});
    CHECK(vec<int16_t>(full({1}, INT16_MAX, DType::int16)) == std::vector<int16_t>{INT16_MAX});
    CHECK_THROWS_AS(full({1}, INT16_MAX + 1, DType::int16), ValueError);
    CHECK_THROWS_AS(full({1}, INT16_MIN - 1, DType::int16), ValueError);
    CHECK(vec<uint16_t>(full({1}, 65535, DType::uint16)) == std::vector<uint16_t>{65535});
    CHECK_THROWS_AS(full({1}, 65536, DType::uint16), ValueError);
    CHECK_THROWS_AS(full({1}, -1, DType::uint16), ValueError);
    CHECK(vec<uint32_t>(full({1}, UINT32_MAX, DType::uint32)) == std::vector<uint32_t>{UINT32_MAX});
    CHECK_THROWS_AS(full({1}, int64_t(UINT32_MAX) + 1, DType::uint32), ValueError);
    CHECK(vec<uint64_t>(full({1}, kU64Max, DType::uint64)) == std::vector<uint64_t>{kU64Max});
    CHECK(vec<uint64_t>(full({1}, k2to63, DType::uint64)) == std::vector<uint64_t>{k2to63});
    CHECK(vec<uint64_t>(full({1}, k2to63 + 1, DType::uint64)) == std::vector<uint64_t>{k2to63 + 1});
    CHECK_THROWS_AS(full({1}, -1, DType::uint64), ValueError);
    CHECK_THROWS_AS(full({1}, kU64Max, DType::int64), ValueError);
    // A float scalar: truncated when in range, an error outside (numpy 2).
    CHECK(vec<uint64_t>(full({1}, 9223372036854775808.0, DType::uint64)) == std::vector<uint64_t>{k2to63});
    CHECK_THROWS_AS(full({1}, 18446744073709551616.0, DType::uint64), ValueError);
    CHECK_THROWS_AS(full({1}, -1.0, DType::uint16), ValueError);
    CHECK(vec<int16_t>(full({1}, -32768.9, DType::int16)) == std::vector<int16_t>{INT16_MIN});

    // Arithmetic and comparisons with integer scalars are exact over uint64's range.
    const Tensor u = tensor({kU64Max, k2to63, uint64_t(0)});
    CHECK(u.dtype() == DType::uint64);
    CHECK(vec<bool>(u == kU64Max) == std::vector<bool>{true, false, false});
    CHECK(vec<bool>(u == k2to63) == std::vector<bool>{false, true, false});
    CHECK(vec<bool>(u > k2to63) == std::vector<bool>{true, false, false});
    CHECK(vec<uint64_t>(u + 1) == std::vector<uint64_t>{0, k2to63 + 1, 1});  // wraps modulo 2^64
    CHECK(vec<uint64_t>(u - kU64Max) == std::vector<uint64_t>{0, k2to63 + 1, 1});
    CHECK_THROWS_AS(u + (-1), ValueError);  // -1 is outside uint64 (numpy 2: OverflowError)
    const Tensor s = tensor({int16_t(INT16_MIN), int16_t(INT16_MAX)});
    CHECK(vec<int16_t>(s + 1) == std::vector<int16_t>{INT16_MIN + 1, INT16_MIN});
    CHECK(vec<int16_t>(s - 1) == std::vector<int16_t>{INT16_MAX, INT16_MAX - 1});
    CHECK(vec<int16_t>(-s) == std::vector<int16_t>{INT16_MIN, -INT16_MAX});
    CHECK(vec<int16_t>(abs(s)) == std::vector<int16_t>{INT16_MIN, INT16_MAX});  // numpy: abs(INT16_MIN) wraps
    // clamp bounds beyond the dtype bound nothing on that side (numpy 2's clip)
    CHECK(vec<uint64_t>(clamp(u, int64_t(5), kU64Max)) == std::vector<uint64_t>{kU64Max, k2to63, 5});
    CHECK(vec<uint64_t>(clamp(u, std::nullopt, k2to63)) == std::vector<uint64_t>{k2to63, k2to63, 0});
    CHECK(vec<uint16_t>(clamp(tensor({uint16_t(3), uint16_t(60000)}), -5, 100000)) ==
          std::vector<uint16_t>{3, 60000});
    CHECK(vec<uint64_t>(masked_fill(u, tensor({false, false, true}), kU64Max)) ==
          std::vector<uint64_t>{kU64Max, k2to63, kU64Max});
    CHECK(vec<uint64_t>(where(tensor({true, false, true}), u, k2to63)) ==
          std::vector<uint64_t>{kU64Max, k2to63, 0});
    CHECK(max(u).item<uint64_t>() == kU64Max);
  }

  TEST_CASE("creation: literals, zeros, full, arange") {
    Tensor a = tensor({int16_t(-3), int16_t(4)});
    CHECK(a.dtype() == DType::int16);
    CHECK(vec<int16_t>(a) == std::vector<int16_t>{-3, 4});
    Tensor b = tensor({{uint16_t(1), uint16_t(2)}, {uint16_t(3), uint16_t(65535)}});
    CHECK(b.dtype() == DType::uint16);
    CHECK(b.shape() == Shape{2, 2});
    CHECK(vec<uint16_t>(b) == std::vector<uint16_t>{1, 2, 3, 65535});
    Tensor c = tensor({{{uint32_t(7)}}});
    CHECK(c.dtype() == DType::uint32);
    CHECK(c.shape() == Shape{1, 1, 1});
    CHECK(tensor({uint64_t(1)}, DType::int16).dtype() == DType::int16);
    for (DType d : {DType::int16, DType::uint16, DType::uint32, DType::uint64}) {
      CAPTURE(name(d));
      CHECK(zeros({3}, d).dtype() == d);
      CHECK(vec<int64_t>(zeros({3}, d)) == std::vector<int64_t>{0, 0, 0});
      CHECK(vec<int64_t>(ones({2}, d)) == std::vector<int64_t>{1, 1});
      CHECK(vec<int64_t>(arange(4, d)) == std::vector<int64_t>{0, 1, 2, 3});
      CHECK(vec<int64_t>(arange(1.0, 7.0, 2.0, d)) == std::vector<int64_t>{1, 3, 5});
      CHECK(vec<int64_t>(full({2}, 9, d)) == std::vector<int64_t>{9, 9});
    }
    // numpy 2.x: np.arange(65530, 65536, 3, dtype=np.uint16) is [65530, 65533]
    CHECK(vec<int64_t>(arange(65530.0, 65536.0, 3.0, DType::uint16)) == std::vector<int64_t>{65530, 65533});
    CHECK(vec<uint64_t>(arange(3, DType::uint64)) == std::vector<uint64_t>{0, 1, 2});
    // randint over each dtype's whole range; a range that does not fit raises
    for (DType d : {DType::int16, DType::uint16, DType::uint32, DType::uint64}) {
      CAPTURE(name(d));
      const Tensor r = random::randint(0, 50, {2000}, d);
      CHECK(r.dtype() == d);
      const std::vector<int64_t> v = vec<int64_t>(r);
      CHECK(*std::min_element(v.begin(), v.end()) == 0);
      CHECK(*std::max_element(v.begin(), v.end()) == 49);
    }
    const std::vector<int64_t> w = vec<int64_t>(random::randint(INT16_MIN, INT16_MAX + 1, {5000}, DType::int16));
    CHECK(*std::min_element(w.begin(), w.end()) >= INT16_MIN);
    CHECK(*std::max_element(w.begin(), w.end()) <= INT16_MAX);
    CHECK_THROWS_AS(random::randint(-1, 5, {2}, DType::uint32), ValueError);
    CHECK_THROWS_AS(random::randint(0, 65537, {2}, DType::uint16), ValueError);
  }

  TEST_CASE("casts to and from every dtype: integer wrap (numpy 2.x astype literals) and the float rule") {
    // numpy 2.x: np.array([...], int64).astype(t)
    const Tensor x = tensor({int64_t(-1), int64_t(70000), int64_t(-32769), int64_t(1) << 31,
                             std::numeric_limits<int64_t>::min(), std::numeric_limits<int64_t>::max(),
                             int64_t(65535), int64_t(40000)});
    CHECK(vec<int16_t>(cast(x, DType::int16)) == std::vector<int16_t>{-1, 4464, 32767, 0, 0, -1, -1, -25536});
    CHECK(vec<uint16_t>(cast(x, DType::uint16)) ==
          std::vector<uint16_t>{65535, 4464, 32767, 0, 0, 65535, 65535, 40000});
    CHECK(vec<uint32_t>(cast(x, DType::uint32)) ==
          std::vector<uint32_t>{4294967295u, 70000, 4294934527u, 2147483648u, 0, 4294967295u, 65535, 40000});
    CHECK(vec<uint64_t>(cast(x, DType::uint64)) ==
          std::vector<uint64_t>{kU64Max, 70000, 18446744073709518847ull, 2147483648ull, k2to63,
                                9223372036854775807ull, 65535, 40000});
    // numpy 2.x: np.array([2**64-1, 2**63, 65535, 40000], uint64).astype(t)
    const Tensor u = tensor({kU64Max, k2to63, uint64_t(65535), uint64_t(40000)});
    CHECK(vec<int64_t>(cast(u, DType::int8)) == std::vector<int64_t>{-1, 0, -1, 64});
    CHECK(vec<int64_t>(cast(u, DType::int16)) == std::vector<int64_t>{-1, 0, -1, -25536});
    CHECK(vec<int64_t>(cast(u, DType::int32)) == std::vector<int64_t>{-1, 0, 65535, 40000});
    CHECK(vec<int64_t>(cast(u, DType::int64)) ==
          std::vector<int64_t>{-1, std::numeric_limits<int64_t>::min(), 65535, 40000});
    CHECK(vec<int64_t>(cast(u, DType::uint8)) == std::vector<int64_t>{255, 0, 255, 64});
    CHECK(vec<int64_t>(cast(u, DType::uint16)) == std::vector<int64_t>{65535, 0, 65535, 40000});
    CHECK(vec<int64_t>(cast(u, DType::uint32)) == std::vector<int64_t>{4294967295ll, 0, 65535, 40000});
    CHECK(vec<double>(cast(u, DType::float64)) ==
          std::vector<double>{18446744073709551616.0, 9223372036854775808.0, 65535.0, 40000.0});
    CHECK(vec<float>(cast(u, DType::float32)) ==
          std::vector<float>{18446744073709551616.0f, 9223372036854775808.0f, 65535.0f, 40000.0f});
    CHECK(vec<int64_t>(cast(u, DType::bool_)) == std::vector<int64_t>{1, 1, 1, 1});

    // Every pair of dtypes, integer sources exactly against ref_cast_int, float
    // sources (with NaN, inf, out of range) against the float64 reference ref_cast.
    const std::vector<double> fv = {0.0,    -0.0,  1.5,      -1.5,    -3.7,   70000.5, 4294967301.0, -32768.9,
                                    1e19,   -1e19, 9223372036854775808.0, 18446744073709551616.0,
                                    std::numeric_limits<double>::quiet_NaN(), std::numeric_limits<double>::infinity(),
                                    -std::numeric_limits<double>::infinity()};
    const Tensor f = Tensor::from_vector(fv);
    for (DType to : kt::all_dtypes()) {
      CAPTURE(name(to));
      if (!is_integral(to)) continue;
      const std::vector<int64_t> got = vec<int64_t>(cast(f, to));
      for (size_t i = 0; i < fv.size(); ++i) {
        CAPTURE(fv[i]);
        const double want = ref_cast(fv[i], to);
        // compare as the dtype's value: uint64 via its bits
        const double g = to == DType::uint64 ? static_cast<double>(static_cast<uint64_t>(got[i])) : double(got[i]);
        CHECK(g == want);
      }
    }
    const std::vector<int64_t> iv = {0, 1, -1, 127, -128, 255, 32767, -32768, 65535, 65536, 2147483647,
                                     -2147483648ll, 4294967295ll, std::numeric_limits<int64_t>::max(),
                                     std::numeric_limits<int64_t>::min()};
    const Tensor it = Tensor::from_vector(iv);
    for (DType from : kt::all_dtypes()) {
      if (!is_integral(from)) continue;
      const Tensor src = cast(it, from);
      const std::vector<int64_t> sv = vec<int64_t>(src);
      for (size_t i = 0; i < iv.size(); ++i) CHECK(sv[i] == ref_cast_int(iv[i], from));
      for (DType to : kt::all_dtypes()) {
        CAPTURE(name(from));
        CAPTURE(name(to));
        const Tensor dst = cast(src, to);
        CHECK(dst.dtype() == to);
        if (is_floating(to)) {
          const std::vector<double> dv = vec<double>(dst);
          for (size_t i = 0; i < iv.size(); ++i) {
            const double v = from == DType::uint64 ? static_cast<double>(static_cast<uint64_t>(sv[i])) : double(sv[i]);
            CHECK(dv[i] == ref_cast(v, to));
          }
        } else {
          const std::vector<int64_t> dv = vec<int64_t>(dst);
          for (size_t i = 0; i < iv.size(); ++i) CHECK(dv[i] == ref_cast_int(sv[i], to));
        }
      }
    }
  }

  TEST_CASE("floor_divide and remainder follow Python's sign rules; unsigned arithmetic wraps (numpy 2.x literals)") {
    const Tensor a = tensor({int16_t(-7), int16_t(7), int16_t(-7), int16_t(7), int16_t(INT16_MIN), int16_t(0)});
    const Tensor b = tensor({int16_t(2), int16_t(-2), int16_t(-2), int16_t(2), int16_t(-1), int16_t(3)});
    CHECK(vec<int16_t>(floor_divide(a, b)) == std::vector<int16_t>{-4, -4, 3, 3, INT16_MIN, 0});
    CHECK(vec<int16_t>(remainder(a, b)) == std::vector<int16_t>{1, -1, -1, 1, 0, 0});
    CHECK(vec<int16_t>(fmod(a, b)) == std::vector<int16_t>{-1, 1, -1, 1, 0, 0});
    const Tensor p = tensor({uint16_t(7), uint16_t(0), uint16_t(65535), uint16_t(1)});
    const Tensor q = tensor({uint16_t(2), uint16_t(1), uint16_t(2), uint16_t(3)});
    CHECK(vec<uint16_t>(floor_divide(p, q)) == std::vector<uint16_t>{3, 0, 32767, 0});
    CHECK(vec<uint16_t>(remainder(p, q)) == std::vector<uint16_t>{1, 0, 1, 1});
    CHECK(vec<uint16_t>(p - q) == std::vector<uint16_t>{5, 65535, 65533, 65534});
    CHECK(vec<uint16_t>(p * q) == std::vector<uint16_t>{14, 0, 65534, 3});
    CHECK(vec<uint16_t>(-p) == std::vector<uint16_t>{65529, 0, 1, 65535});
    const Tensor u = tensor({kU64Max, k2to63, uint64_t(5)});
    const Tensor v = tensor({uint64_t(2), uint64_t(3), uint64_t(7)});
    CHECK(vec<uint64_t>(floor_divide(u, v)) == std::vector<uint64_t>{9223372036854775807ull, 3074457345618258602ull, 0});
    CHECK(vec<uint64_t>(remainder(u, v)) == std::vector<uint64_t>{1, 2, 5});
    CHECK(vec<uint64_t>(u + v) == std::vector<uint64_t>{1, 9223372036854775811ull, 12});
    CHECK(vec<uint64_t>(maximum(u, v)) == std::vector<uint64_t>{kU64Max, k2to63, 7});
    CHECK(vec<uint64_t>(minimum(u, v)) == std::vector<uint64_t>{2, 3, 5});
    CHECK(vec<bool>(u < v) == std::vector<bool>{false, false, true});
    CHECK(vec<uint64_t>(pow(v, tensor({uint64_t(64), uint64_t(2), uint64_t(0)}))) == std::vector<uint64_t>{0, 9, 1});
    CHECK(vec<uint64_t>(sign(u)) == std::vector<uint64_t>{1, 1, 1});
    CHECK(vec<uint32_t>(relu(tensor({uint32_t(0), UINT32_MAX}))) == std::vector<uint32_t>{0, UINT32_MAX});
    CHECK_THROWS_AS(floor_divide(u, tensor({uint64_t(0)})), ValueError);
    CHECK_THROWS_AS(remainder(a, tensor({int16_t(0)})), ValueError);
    // true division gives float32 (kiln's rule for integer operands)
    CHECK(div(p, q).dtype() == DType::float32);
  }

  TEST_CASE("reductions and scans: uint32 sums accumulate in uint64 like numpy, extremes compare unsigned") {
    const Tensor a = tensor({uint32_t(4000000000u), uint32_t(4000000000u), uint32_t(4000000000u)});
    CHECK(sum(a).item<uint64_t>() == 12000000000ull);  // numpy 2.x: 12000000000 (uint64)
    CHECK(vec<uint64_t>(cumsum(a, 0)) == std::vector<uint64_t>{4000000000ull, 8000000000ull, 12000000000ull});
    CHECK(prod(a).item<uint64_t>() == uint64_t(4000000000ull) * 4000000000ull * 4000000000ull);  // modulo 2^64
    const Tensor u = tensor({uint64_t(3), kU64Max, k2to63, uint64_t(0)});
    CHECK(max(u).item<uint64_t>() == kU64Max);
    CHECK(min(u).item<uint64_t>() == 0);
    CHECK(argmax(u).item<int64_t>() == 1);
    CHECK(argmin(u).item<int64_t>() == 3);
    CHECK(sum(u).item<uint64_t>() == 3 + kU64Max + k2to63);  // wraps modulo 2^64
    CHECK(vec<uint64_t>(cumprod(tensor({uint64_t(1) << 40, uint64_t(1) << 30}), 0)) ==
          std::vector<uint64_t>{uint64_t(1) << 40, 0});
    const Tensor s = tensor({int16_t(INT16_MAX), int16_t(INT16_MAX), int16_t(INT16_MIN)});
    CHECK(sum(s).item<int64_t>() == 32767 + 32767 - 32768);
    CHECK(max(s).item<int64_t>() == INT16_MAX);
    CHECK(argmin(s).item<int64_t>() == 2);
    CHECK(mean(tensor({uint16_t(65535), uint16_t(65535)})).item<double>() == 65535.0);
    CHECK(any(tensor({uint64_t(0), k2to63})).item<bool>());
    CHECK_FALSE(all(tensor({uint64_t(0), k2to63})).item<bool>());
    // per axis
    const Tensor m = tensor({{uint16_t(65535), uint16_t(1)}, {uint16_t(65535), uint16_t(2)}});
    CHECK(vec<uint64_t>(sum(m, {0})) == std::vector<uint64_t>{131070, 3});
    CHECK(vec<uint16_t>(max(m, {1})) == std::vector<uint16_t>{65535, 65535});
  }

  TEST_CASE("sort, argsort, topk, gather, index_select, concat, pad, tile") {
    const Tensor u = tensor({uint64_t(3), kU64Max, k2to63, uint64_t(0), k2to63 - 1});
    CHECK(vec<uint64_t>(sort(u)) == std::vector<uint64_t>{0, 3, k2to63 - 1, k2to63, kU64Max});
    CHECK(vec<int64_t>(argsort(u)) == std::vector<int64_t>{3, 0, 4, 2, 1});
    CHECK(vec<uint64_t>(sort(u, -1, true)) == std::vector<uint64_t>{kU64Max, k2to63, k2to63 - 1, 3, 0});
    TopK t = topk(u, 2);
    CHECK(vec<uint64_t>(t.values) == std::vector<uint64_t>{kU64Max, k2to63});
    CHECK(vec<int64_t>(t.indices) == std::vector<int64_t>{1, 2});
    const Tensor s = tensor({int16_t(5), int16_t(INT16_MIN), int16_t(INT16_MAX), int16_t(-1)});
    CHECK(vec<int16_t>(sort(s)) == std::vector<int16_t>{INT16_MIN, -1, 5, INT16_MAX});
    CHECK(vec<int16_t>(gather(s, 0, tensor({int64_t(2), int64_t(0)}))) == std::vector<int16_t>{INT16_MAX, 5});
    CHECK(vec<uint64_t>(index_select(u, 0, tensor({int64_t(1), int64_t(1)}))) == std::vector<uint64_t>{kU64Max, kU64Max});
    // concat promotes: int16 with uint16 -> int32 (numpy 2.x)
    const Tensor c = concat({s, tensor({uint16_t(65535)})});
    CHECK(c.dtype() == DType::int32);
    CHECK(vec<int32_t>(c) == std::vector<int32_t>{5, INT16_MIN, INT16_MAX, -1, 65535});
    CHECK(vec<uint64_t>(pad(tensor({kU64Max}), {{1, 1}}, 7)) == std::vector<uint64_t>{7, kU64Max, 7});
    CHECK(vec<uint64_t>(pad(tensor({uint64_t(1)}), {{1, 0}}, kU64Max - 1)) == std::vector<uint64_t>{kU64Max - 1, 1});
    CHECK(vec<uint32_t>(tile(tensor({uint32_t(1), UINT32_MAX}), {2})) ==
          std::vector<uint32_t>{1, UINT32_MAX, 1, UINT32_MAX});
    CHECK(vec<uint16_t>(flip(tensor({uint16_t(1), uint16_t(2)}), {0})) == std::vector<uint16_t>{2, 1});
  }

  TEST_CASE("printing as numpy 2.x's repr prints the elements") {
    // numpy 2.x: repr(np.array([2**64-1, 2**63, 0], np.uint64)) is
    // array([18446744073709551615,  9223372036854775808,                    0], dtype=uint64)
    std::ostringstream a, b, c;
    a << tensor({kU64Max, k2to63, uint64_t(0)});
    CHECK(a.str() == "[18446744073709551615,  9223372036854775808,                    0]");
    b << tensor({int16_t(INT16_MIN), int16_t(INT16_MAX), int16_t(0)});
    CHECK(b.str() == "[-32768,  32767,      0]");
    c << tensor({uint16_t(65535), uint16_t(7)});
    CHECK(c.str() == "[65535,     7]");
  }

  TEST_CASE(".npy and safetensors round trips with the range edges (I16 U16 U32 U64)") {
    const std::map<DType, std::string> npy_code = {
        {DType::int16, "<i2"}, {DType::uint16, "<u2"}, {DType::uint32, "<u4"}, {DType::uint64, "<u8"}};
    const std::map<DType, std::string> st_code = {
        {DType::int16, "I16"}, {DType::uint16, "U16"}, {DType::uint32, "U32"}, {DType::uint64, "U64"}};
    const Tensor edges = tensor({int64_t(0), int64_t(-1), std::numeric_limits<int64_t>::min(),
                                 std::numeric_limits<int64_t>::max(), int64_t(INT16_MIN), int64_t(INT16_MAX)});
    std::map<std::string, Tensor> m;
    for (auto [d, code] : npy_code) {
      CAPTURE(name(d));
      const Tensor t = reshape(cast(edges, d), {2, 3});
      const std::string bytes = encode_npy(t);
      CHECK(bytes.find("'descr': '" + code + "'") != std::string::npos);
      CHECK(kt::same_bits(parse_npy(bytes, "t"), t));
      CHECK(kt::same_bits(parse_npy(encode_npy(transpose(t)), "t"), transpose(t).contiguous()));
      m[std::string(name(d))] = t;
    }
    const std::string st = encode_safetensors(m);
    for (auto [d, code] : st_code) CHECK(st.find("\"dtype\":\"" + code + "\"") != std::string::npos);
    const auto back = parse_safetensors(st, "w");
    REQUIRE(back.size() == m.size());
    for (const auto& [k, v] : m) CHECK_MESSAGE(kt::same_bits(v, back.at(k)), k);
  }

  TEST_CASE("compiled equals eager bitwise, and MEF keeps the dtypes") {
    auto f = [](Tensor a, Tensor b) {
      Tensor s = a * b + a;
      return std::make_tuple(s, floor_divide(s, b), sum(s, {1}), cast(s, DType::float32) * 0.5f, maximum(a, b) > b);
    };
    for (DType d : {DType::int16, DType::uint16, DType::uint32, DType::uint64}) {
      CAPTURE(name(d));
      const Tensor a = kt::random_tensor({3, 5}, d, 11, false, 2.0, 0, 1000);
      const Tensor b = kt::random_tensor({3, 5}, d, 12, false, 2.0, 1, 1000);
      CompiledCallable run = compile(f)(TensorLayout(d, {3, 5}), TensorLayout(d, {3, 5}));
      const auto eager = f(a, b);
      const auto got = run(a, b).leaves;
      REQUIRE(got.size() == 5);
      CHECK(kt::same_bits(got[0], std::get<0>(eager)));
      CHECK(kt::same_bits(got[1], std::get<1>(eager)));
      CHECK(kt::same_bits(got[2], std::get<2>(eager)));
      CHECK(kt::same_bits(got[3], std::get<3>(eager)));
      CHECK(kt::same_bits(got[4], std::get<4>(eager)));
      CHECK(got[2].dtype() == (d == DType::int16 ? DType::int64 : DType::uint64));
      // the MEF file records the dtype codes; a reload computes the same bits
      const std::string path = (std::filesystem::temp_directory_path() /
                                ("kiln_int_dtypes_" + std::string(name(d)) + ".mef")).string();
      run.export_mef(path);
      CompiledCallable back = CompiledCallable::from_mef(path);
      const auto again = back(a, b).leaves;
      REQUIRE(again.size() == 5);
      for (size_t i = 0; i < 5; ++i) CHECK(kt::same_bits(again[i], got[i]));
      CHECK(back.signature() == run.signature());
      std::filesystem::remove(path);
    }
  }

  TEST_CASE("the CUDA registry has no kernels for the new dtypes: it raises DeviceError") {
    for (DType d : {DType::int16, DType::uint16, DType::uint32, DType::uint64}) {
      CHECK_FALSE(detail::has_kernel(OpId::Add, DeviceType::cuda, d));
      CHECK_FALSE(detail::has_kernel(OpId::Cast, DeviceType::cuda, d));
      CHECK_FALSE(detail::has_kernel(OpId::Concat, DeviceType::cuda, d));
      CHECK_THROWS_AS(detail::kernel_for(OpId::Add, Device::cuda(0), d), DeviceError);
      // every CPU row is registered for them
      CHECK(detail::has_kernel(OpId::Add, DeviceType::cpu, d));
    }
#if KILN_TEST_CUDA_BUILT
    CHECK(detail::has_kernel(OpId::Add, DeviceType::cuda, DType::int32));
#endif
  }

  TEST_CASE("tensor literals refuse values the requested integer dtype cannot hold (numpy 2: OverflowError)") {
    CHECK_THROWS_AS(tensor({-1, 2}, DType::uint16), ValueError);
    CHECK_THROWS_AS(tensor({70000}, DType::int16), ValueError);
    CHECK_THROWS_AS(tensor({int64_t(1) << 40}, DType::uint32), ValueError);
    CHECK_THROWS_AS(tensor({{1.0, std::nan("")}}, DType::int32), ValueError);
    CHECK_THROWS_WITH_AS(tensor({-1}, DType::uint64), doctest::Contains("tensor: the integer scalar -1 is out of range for uint64"),
                         ValueError);
    // In range: converted exactly; a float literal truncates toward zero as numpy's array(..., dtype=int) does.
    CHECK(tensor({65535, 0}, DType::uint16).to_vector<uint16_t>() == std::vector<uint16_t>{65535, 0});
    CHECK(tensor({-32768, 32767}, DType::int16).to_vector<int16_t>() == std::vector<int16_t>{-32768, 32767});
    CHECK(tensor({1.9f, -1.9f}, DType::int16).to_vector<int16_t>() == std::vector<int16_t>{1, -1});
    CHECK(tensor({5, 0}, DType::bool_).to_vector<bool>() == std::vector<bool>{true, false});
  }

  TEST_CASE("index_add refuses a float alpha for an integer tensor (torch.index_add does too)") {
    Tensor x = zeros({2}, DType::int64);
    Tensor idx = tensor({int64_t(0)});
    CHECK_THROWS_AS(index_add(x, 0, idx, tensor({int64_t(3)}), 0.5), DTypeError);
    CHECK(index_add(x, 0, idx, tensor({int64_t(3)}), 2).to_vector<int64_t>() == std::vector<int64_t>{6, 0});
    CHECK(index_add(zeros({2}), 0, idx, tensor({3.0f}), 0.5).to_vector<float>() == std::vector<float>{1.5f, 0.0f});
  }
}
