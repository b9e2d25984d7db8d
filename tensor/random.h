// kiln: counter-based random numbers (Philox-4x32-10; Salmon et al.,
// "Parallel random numbers: as easy as 1, 2, 3", SC'11). Element i of a
// draw depends only on (seed, the draw's counter offset, i), so results do
// not depend on the thread count or on how a loop is split.
#pragma once
#include <cstdint>

#include "tensor.h"

namespace kiln::random {

// Every draw below throws RealizationError naming the op when called while a
// function is traced into a graph (stage, jit, compile): the sample would be
// drawn once and baked into the graph as a constant. Draw outside the
// compiled function and pass the tensor in. Eager and lazy (kiln::lazy())
// code draws as usual.

/// A Philox key and a running counter offset. Each draw advances the offset
/// by the number of 32-bit words it used, so consecutive draws differ.
struct Generator {
  uint64_t seed = 0;
  uint64_t offset = 0;
  explicit Generator(uint64_t seed = 0) : seed(seed) {}
};

/// The process-wide generator used when none is passed (seed 0 at start).
Generator& default_generator();
/// Reseeds the default generator (and resets its offset).
void seed(uint64_t s);

/// Philox-4x32-10 block for `counter` under `key`: four 32-bit words.
void philox4x32(uint64_t counter_lo, uint64_t counter_hi, uint64_t key, uint32_t out[4]);

/// Uniform in [low, high). Float dtypes only (DTypeError otherwise).
Tensor uniform(const Shape& shape, double low = 0.0, double high = 1.0, DType dtype = DType::float32,
               Generator* gen = nullptr);
/// Normal(mean, std) by the Box-Muller transform. Float dtypes only.
Tensor normal(const Shape& shape, double mean = 0.0, double std = 1.0, DType dtype = DType::float32,
              Generator* gen = nullptr);

/// Integers uniform in [low, high) (numpy.random.Generator.integers):
/// integer dtypes (int64 by default; DTypeError otherwise), ValueError
/// unless low < high and both fit the dtype. Each value is the high 64 bits
/// of a 64-bit word times the range (Lemire's multiply-shift): no draw is
/// rejected, so element i stays a function of (seed, offset, i); the bias is
/// below range / 2^64.
Tensor randint(int64_t low, int64_t high, const Shape& shape, DType dtype = DType::int64, Generator* gen = nullptr);
/// True with probability p (0 <= p <= 1, ValueError otherwise): uniform
/// float64 draws compared with p. Bool by default; any dtype (0/1) allowed.
Tensor bernoulli(double p, const Shape& shape, DType dtype = DType::bool_, Generator* gen = nullptr);
/// A random permutation of 0..n-1 (int64): argsort of n float64 uniform draws.
Tensor permutation(int64_t n, Generator* gen = nullptr);

}  // namespace kiln::random
