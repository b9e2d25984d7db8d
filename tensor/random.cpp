// kiln: Philox-4x32-10 and the uniform/normal draws built on it (random.h).
//
// Counter layout: one Philox block (four 32-bit words) per counter value. A
// draw starts at block b0 = ceil(offset / 4) of its generator and uses blocks
// b0, b0+1, ...; element i reads only block b0 + i / per_block, so any split
// of the loop over threads gives the same bits. Afterwards the offset moves
// past the last block used.
#include "random.h"

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <limits>
#include <mutex>
#include <string>

#include "allocation_error.h"
#include "creation.h"
#include "dispatch.h"
#include "num_str.h"
#include "ops.h"
#include "realize_hook.h"
#include "sorting.h"

namespace kiln::random {

namespace {

constexpr uint32_t kMul0 = 0xD2511F53u, kMul1 = 0xCD9E8D57u;  // Salmon et al., Table 2
constexpr uint32_t kWeyl0 = 0x9E3779B9u, kWeyl1 = 0xBB67AE85u; // golden ratio, sqrt(3) - 1
constexpr int64_t kGrainBlocks = 1 << 12;                      // blocks per thread at least

inline void mulhilo(uint32_t a, uint32_t b, uint32_t& hi, uint32_t& lo) {
  const uint64_t p = uint64_t(a) * b;
  hi = uint32_t(p >> 32);
  lo = uint32_t(p);
}

// uniform in [0, 1) from the top 24 bits of one word: exact in float32.
inline float u24(uint32_t w) { return float(w >> 8) * 0x1.0p-24f; }
// uniform in [0, 1) with 53 random bits from two words (27 + 26 bits).
inline double u53(uint32_t a, uint32_t b) { return (double(a >> 5) * 67108864.0 + double(b >> 6)) * 0x1.0p-53; }

template <class T>
inline constexpr bool is_float_v =
    std::is_floating_point_v<T> || std::is_same_v<T, float16_t> || std::is_same_v<T, bfloat16_t>;

using detail::num_str;

// A draw made while a graph records would be computed once, now, and baked
// into the graph as a constant: every call of the compiled function would
// return the same "random" numbers. Refuse instead.
void check_not_traced(const char* op) {
  if (detail::recording_graph())
    throw RealizationError(std::string(op) + ": random ops cannot be traced (the sample would be drawn once, while "
                           "tracing, and baked into the graph as a constant, so every call would return the same "
                           "numbers); sample outside the compiled function and pass the tensor in as an argument");
}

void check_float(DType dtype, const char* op) {
  if (!is_floating(dtype))
    throw DTypeError(std::string(op) + ": expected a floating dtype (float16, bfloat16, float32 or float64), got " +
                     std::string(name(dtype)));
}

// The largest value of T below `high` (for keeping uniform draws in
// [low, high) after rounding to T).
template <class T>
T largest_below(double high) {
  T t = detail::convert<T>(high);
  auto as_double = [](T x) { return static_cast<double>(static_cast<float>(x)); };
  if constexpr (std::is_same_v<T, float> || std::is_same_v<T, double>) {
    while (static_cast<double>(t) >= high) t = std::nextafter(t, -std::numeric_limits<T>::infinity());
  } else {
    // 16-bit floats: step the bit pattern one unit toward -inf.
    while (as_double(t) >= high) {
      const uint16_t mag = t.bits & 0x7fffu, sign = t.bits & 0x8000u;
      if (sign == 0 && mag != 0) t.bits = uint16_t(t.bits - 1);
      else if (sign == 0) t.bits = 0x8001u;
      else t.bits = uint16_t(t.bits + 1);
    }
  }
  return t;
}

struct Draw {
  uint64_t key;
  uint64_t b0;      // first block
  int64_t blocks;   // blocks used
};

// Reserves `blocks` blocks of gen (or the default generator, under a lock so
// that draws from several user threads get disjoint blocks).
Draw reserve(Generator* gen, int64_t blocks) {
  static std::mutex default_lock;
  std::unique_lock<std::mutex> lock(default_lock, std::defer_lock);
  if (!gen) lock.lock();
  Generator& g = gen ? *gen : default_generator();
  Draw d{g.seed, (g.offset + 3) / 4, blocks};
  g.offset = (d.b0 + static_cast<uint64_t>(blocks)) * 4;
  return d;
}

// Runs body(block_index, words, first_element) for each block of the draw,
// split over threads by blocks.
template <class Body>
void for_blocks(const Draw& d, Body&& body) {
#pragma omp parallel for schedule(static) if (d.blocks >= 2 * kGrainBlocks)
  for (int64_t b = 0; b < d.blocks; ++b) {
    uint32_t w[4];
    philox4x32(d.b0 + static_cast<uint64_t>(b), 0, d.key, w);
    body(b, w);
  }
}

// Fills `out` (contiguous, element type T) with `per` values per Philox
// block: make(words, vals) computes block b's values for elements
// b*per ... b*per + per - 1 (the last block may be cut short).
template <class T, int per, class Make>
void generate(Generator* gen, const Tensor& out, Make&& make) {
  const int64_t n = out.numel();
  const Draw d = reserve(gen, (n + per - 1) / per);
  if (n == 0) return;
  T* dst = static_cast<T*>(out.data_ptr());
  for_blocks(d, [&](int64_t b, const uint32_t* w) {
    const int64_t i0 = b * per;
    if (i0 + per <= n) return make(w, dst + i0);
    T tmp[per];
    make(w, tmp);
    for (int64_t k = 0; i0 + k < n; ++k) dst[i0 + k] = tmp[k];
  });
}

}  // namespace

Tensor randint(int64_t low, int64_t high, const Shape& shape, DType dtype, Generator* gen) {
  check_not_traced("randint");
  if (!is_integral(dtype))
    throw DTypeError("randint: expected an integer dtype, got " + std::string(name(dtype)));
  checked_numel(shape, "randint");
  if (!(low < high))
    throw ValueError("randint: expected low < high, got low=" + std::to_string(low) + ", high=" + std::to_string(high));
  Tensor out = detail::empty_for(shape, dtype, Device::cpu(), "randint");
  // The range as uint64 (high - low may exceed INT64_MAX).
  const uint64_t range = static_cast<uint64_t>(high) - static_cast<uint64_t>(low);
  detail::visit_dtype(dtype, [&](auto tag) {
    using T = typename decltype(tag)::type;
    if constexpr (std::is_integral_v<T> && !std::is_same_v<T, bool>) {
      // compared in 128 bits: uint64's maximum has no int64
      if (static_cast<__int128>(low) < static_cast<__int128>(std::numeric_limits<T>::min()) ||
          static_cast<__int128>(high) - 1 > static_cast<__int128>(std::numeric_limits<T>::max()))
        throw ValueError("randint: [" + std::to_string(low) + ", " + std::to_string(high) + ") does not fit " +
                         std::string(name(dtype)));
      generate<T, 2>(gen, out, [&](const uint32_t* w, T* v) {
        for (int k = 0; k < 2; ++k) {
          const uint64_t x = (uint64_t(w[2 * k]) << 32) | w[2 * k + 1];
          const uint64_t r = static_cast<uint64_t>((static_cast<unsigned __int128>(x) * range) >> 64);
          v[k] = static_cast<T>(static_cast<int64_t>(static_cast<uint64_t>(low) + r));
        }
      });
    }
  });
  return out;
}

Tensor bernoulli(double p, const Shape& shape, DType dtype, Generator* gen) {
  check_not_traced("bernoulli");
  if (!(p >= 0.0 && p <= 1.0)) throw ValueError("bernoulli: expected 0 <= p <= 1, got p=" + num_str(p));
  Tensor u = uniform(shape, 0.0, 1.0, DType::float64, gen);
  Tensor b = less(u, full({}, p, DType::float64));
  return dtype == DType::bool_ ? b : cast(b, dtype);
}

Tensor permutation(int64_t n, Generator* gen) {
  check_not_traced("permutation");
  if (n < 0) throw ValueError("permutation: expected n >= 0, got " + std::to_string(n));
  return argsort(uniform({n}, 0.0, 1.0, DType::float64, gen));
}

Generator& default_generator() {
  static Generator g(0);
  return g;
}

void seed(uint64_t s) { default_generator() = Generator(s); }

void philox4x32(uint64_t counter_lo, uint64_t counter_hi, uint64_t key, uint32_t out[4]) {
  uint32_t c0 = uint32_t(counter_lo), c1 = uint32_t(counter_lo >> 32);
  uint32_t c2 = uint32_t(counter_hi), c3 = uint32_t(counter_hi >> 32);
  uint32_t k0 = uint32_t(key), k1 = uint32_t(key >> 32);
  for (int r = 0; r < 10; ++r) {
    if (r > 0) {  // the key schedule: a Weyl sequence
      k0 += kWeyl0;
      k1 += kWeyl1;
    }
    uint32_t hi0, lo0, hi1, lo1;
    mulhilo(kMul0, c0, hi0, lo0);
    mulhilo(kMul1, c2, hi1, lo1);
    const uint32_t n0 = hi1 ^ c1 ^ k0, n2 = hi0 ^ c3 ^ k1;
    c0 = n0;
    c1 = lo1;
    c2 = n2;
    c3 = lo0;
  }
  out[0] = c0;
  out[1] = c1;
  out[2] = c2;
  out[3] = c3;
}

Tensor uniform(const Shape& shape, double low, double high, DType dtype, Generator* gen) {
  check_not_traced("uniform");
  check_float(dtype, "uniform");
  checked_numel(shape, "uniform");
  if (!std::isfinite(low) || !std::isfinite(high) || !std::isfinite(high - low))
    throw ValueError("uniform: low and high must be finite with a finite difference, got low=" + num_str(low) +
                     ", high=" + num_str(high));
  if (low > high)
    throw ValueError("uniform: expected low <= high, got low=" + num_str(low) + ", high=" + num_str(high));
  Tensor out = detail::empty_for(shape, dtype, Device::cpu(), "uniform");
  const double range = high - low;
  detail::visit_dtype(dtype, [&](auto tag) {
    using T = typename decltype(tag)::type;
    if constexpr (is_float_v<T>) {
      // Rounding low + range*u to T can reach `high`; clamp to the value below it.
      const T below = low < high ? largest_below<T>(high) : detail::convert<T>(low);
      const double cap = static_cast<double>(static_cast<detail::compute_t<T>>(below));
      auto clamp = [&](T v) {
        return low < high && static_cast<double>(static_cast<detail::compute_t<T>>(v)) > cap ? below : v;
      };
      if constexpr (std::is_same_v<T, double>) {
        generate<T, 2>(gen, out, [&](const uint32_t* w, T* v) {
          v[0] = clamp(low + range * u53(w[0], w[1]));
          v[1] = clamp(low + range * u53(w[2], w[3]));
        });
      } else {
        // 16-bit floats draw a float32 value and round it.
        generate<T, 4>(gen, out, [&](const uint32_t* w, T* v) {
          for (int k = 0; k < 4; ++k) v[k] = clamp(detail::convert<T>(low + range * double(u24(w[k]))));
        });
      }
    }
  });
  return out;
}

Tensor normal(const Shape& shape, double mean, double stddev, DType dtype, Generator* gen) {
  check_not_traced("normal");
  check_float(dtype, "normal");
  checked_numel(shape, "normal");
  if (!std::isfinite(mean) || !std::isfinite(stddev))
    throw ValueError("normal: mean and std must be finite, got mean=" + num_str(mean) + ", std=" + num_str(stddev));
  if (stddev < 0) throw ValueError("normal: expected std >= 0, got std=" + num_str(stddev));
  Tensor out = detail::empty_for(shape, dtype, Device::cpu(), "normal");
  constexpr double kTwoPi = 6.283185307179586476925286766559;
  // Box-Muller: (r cos t, r sin t), r = sqrt(-2 log u1), t = 2 pi u2, with
  // u1 in (0, 1] so log never sees 0. Element 2j takes cos, 2j+1 takes sin.
  detail::visit_dtype(dtype, [&](auto tag) {
    using T = typename decltype(tag)::type;
    if constexpr (is_float_v<T>) {
      if constexpr (std::is_same_v<T, double>) {
        // One block = two 53-bit uniforms = one pair.
        generate<T, 2>(gen, out, [&](const uint32_t* w, T* v) {
          const double r = std::sqrt(-2.0 * std::log(1.0 - u53(w[0], w[1]))), t = kTwoPi * u53(w[2], w[3]);
          v[0] = mean + stddev * (r * std::cos(t));
          v[1] = mean + stddev * (r * std::sin(t));
        });
      } else {
        // One block = four 24-bit uniforms = two pairs, in float arithmetic.
        generate<T, 4>(gen, out, [&](const uint32_t* w, T* v) {
          for (int pair = 0; pair < 2; ++pair) {
            const float r = std::sqrt(-2.0f * std::log(1.0f - u24(w[2 * pair])));
            const float t = float(kTwoPi) * u24(w[2 * pair + 1]);
            v[2 * pair] = detail::convert<T>(mean + stddev * double(r * std::cos(t)));
            v[2 * pair + 1] = detail::convert<T>(mean + stddev * double(r * std::sin(t)));
          }
        });
      }
    }
  });
  return out;
}

}  // namespace kiln::random
