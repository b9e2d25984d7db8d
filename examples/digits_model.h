// The digits classifier of examples/digits.cpp, shared with
// tests/test_digits.cpp so the test exercises the example's own code.
//
// Model: a 64-128-10 multilayer perceptron, tanh hidden layer, softmax
// cross-entropy loss. No autograd exists yet, so the gradients are derived by
// hand (see sgd_step). Optimiser: SGD with (PyTorch-style) momentum.
//
// Eager vs compiled (the numerics contract in jit/compiled_callable.h): the
// matmuls, sums and row ops (softmax, log_softmax) run the same kernels' arithmetic
// (dz2 W2^T may go through another OpenBLAS kernel: the same dot products), so
// differences come from the fused elementwise code: a*b+c may contract
// to one FMA (<= 1 ulp) and tanh is within 4 ulp. One step therefore differs
// by a few ulp of each weight; over training the differences are carried
// forward (and mildly amplified) by later steps, so the tolerance that
// tests/test_digits.cpp checks after one epoch on a 256-example slice is
// kEagerCompiledTolerance (absolute, on every weight). With
// KernelOptions::strict the two runs are bitwise equal.
#pragma once
#include <kiln/kiln.h>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdint>
#include <cstring>
#include <functional>
#include <memory>
#include <numeric>
#include <tuple>
#include <vector>

namespace digits {

/// The MLP's parameters (also the shape of its momentum buffers).
struct Mlp {
  kiln::Tensor w1;  ///< float32 [64, 128]
  kiln::Tensor b1;  ///< float32 [128]
  kiln::Tensor w2;  ///< float32 [128, 10]
  kiln::Tensor b2;  ///< float32 [10]
};

}  // namespace digits

// Lets compile()/jit() take and return an Mlp (its tensors become leaves).
KILN_PYTREE(digits::Mlp, w1, b1, w2, b2);

namespace digits {

inline constexpr int64_t kInputs = 64, kHidden = 128, kClasses = 10;
/// Pixels are grey levels 0..16; features are divided by this to lie in [0, 1].
inline constexpr float kMaxPixel = 16.0f;
/// Largest |eager - compiled| weight difference allowed after one epoch on
/// the test's slice in the default (non-strict) mode; see the file comment.
/// Measured (AVX-512 machine): ~1e-7 after one full epoch, 7e-7 after 30.
inline constexpr double kEagerCompiledTolerance = 1e-5;

/// SGD hyper-parameters: v = momentum * v + grad; w = w - lr * v.
struct Hyper {
  float lr = 0.1f;
  float momentum = 0.9f;
};

/// New parameters, new momenta, and the mini-batch's mean loss (a 0-d tensor).
using StepResult = std::tuple<Mlp, Mlp, kiln::Tensor>;

/// Fresh parameters from a fixed seed: weights ~ N(0, 1 / fan_in) (LeCun
/// initialisation, suited to tanh), biases 0.
inline Mlp init_mlp(uint64_t seed) {
  kiln::random::Generator gen(seed);
  auto weight = [&](int64_t in, int64_t out) {
    return kiln::random::normal({in, out}, 0.0, 1.0 / std::sqrt(static_cast<double>(in)), kiln::DType::float32, &gen);
  };
  Mlp p;
  p.w1 = weight(kInputs, kHidden);
  p.b1 = kiln::zeros({kHidden});
  p.w2 = weight(kHidden, kClasses);
  p.b2 = kiln::zeros({kClasses});
  return p;
}

/// Zero momentum buffers shaped like `p`.
inline Mlp zeros_like(const Mlp& p) {
  return {kiln::zeros_like(p.w1), kiln::zeros_like(p.b1), kiln::zeros_like(p.w2), kiln::zeros_like(p.b2)};
}

/// Logits [batch, 10] for features x [batch, 64].
inline kiln::Tensor forward(const Mlp& p, const kiln::Tensor& x) {
  return kiln::matmul(kiln::tanh(kiln::matmul(x, p.w1) + p.b1), p.w2) + p.b2;
}

/// Mean softmax cross-entropy of `logits` against one-hot targets y (0-d).
inline kiln::Tensor cross_entropy(const kiln::Tensor& logits, const kiln::Tensor& y) {
  const float inv_batch = 1.0f / static_cast<float>(logits.size(0));
  return kiln::neg(kiln::sum(y * kiln::log_softmax(logits, -1))) * inv_batch;
}

/// One training step on the mini-batch x [B, 64] (float32), y [B, 10]
/// (one-hot float32): forward, loss, hand-derived gradients, momentum SGD.
/// Written once; run eagerly or traced by compile()/jit().
///
/// Gradients (L = -(1/B) sum_i sum_k y_ik log softmax(z2)_ik):
///   dL/dz2 = (softmax(z2) - y) / B
///   dL/dW2 = h^T dz2,             dL/db2 = sum_rows(dz2)
///   dL/dh  = dz2 W2^T,            dL/dz1 = dL/dh * (1 - h^2)   (tanh' = 1 - tanh^2)
///   dL/dW1 = x^T dz1,             dL/db1 = sum_rows(dz1)
inline StepResult sgd_step(const Mlp& p, const Mlp& v, const kiln::Tensor& x, const kiln::Tensor& y, Hyper hp) {
  using namespace kiln;
  const float inv_batch = 1.0f / static_cast<float>(x.size(0));
  // forward
  Tensor h = tanh(matmul(x, p.w1) + p.b1);
  Tensor z2 = matmul(h, p.w2) + p.b2;
  Tensor loss = cross_entropy(z2, y);
  // backward
  Tensor dz2 = (softmax(z2, -1) - y) * inv_batch;
  Tensor dw2 = matmul(transpose(h), dz2);
  Tensor db2 = sum(dz2, {0});
  Tensor dz1 = matmul(dz2, transpose(p.w2)) * (1.0f - h * h);
  Tensor dw1 = matmul(transpose(x), dz1);
  Tensor db1 = sum(dz1, {0});
  // momentum SGD
  auto update = [&](const Tensor& w, const Tensor& m, const Tensor& g) {
    Tensor m2 = m * hp.momentum + g;
    return std::make_pair(w - m2 * hp.lr, m2);
  };
  auto [w1, m1] = update(p.w1, v.w1, dw1);
  auto [b1, mb1] = update(p.b1, v.b1, db1);
  auto [w2, m2] = update(p.w2, v.w2, dw2);
  auto [b2, mb2] = update(p.b2, v.b2, db2);
  return {Mlp{w1, b1, w2, b2}, Mlp{m1, mb1, m2, mb2}, loss};
}

/// Fraction of rows of x whose arg-max logit equals `labels` (int64 [n]).
inline double accuracy(const Mlp& p, const kiln::Tensor& x, const kiln::Tensor& labels) {
  return kiln::mean(kiln::cast(kiln::equal(kiln::argmax(forward(p, x), 1), labels), kiln::DType::float32)).item();
}

/// Largest |a - b| over all four parameter tensors, and whether every
/// element is bitwise equal.
inline std::pair<double, bool> compare(const Mlp& a, const Mlp& b) {
  double worst = 0;
  bool bitwise = true;
  auto one = [&](const kiln::Tensor& x, const kiln::Tensor& y) {
    std::vector<float> u = x.to_vector<float>(), w = y.to_vector<float>();
    for (size_t i = 0; i < u.size(); ++i) {
      worst = std::max(worst, std::fabs(static_cast<double>(u[i]) - w[i]));
      bitwise = bitwise && std::memcmp(&u[i], &w[i], sizeof(float)) == 0;
    }
  };
  one(a.w1, b.w1);
  one(a.b1, b.b1);
  one(a.w2, b.w2);
  one(a.b2, b.b2);
  return {worst, bitwise};
}

// ---- data ---------------------------------------------------------------------

/// A permutation of 0..n-1 from `seed`: Fisher-Yates driven by splitmix64
/// (Steele et al. 2014), so it is the same on every platform and standard
/// library (std::shuffle's algorithm is unspecified).
inline std::vector<int64_t> permutation(int64_t n, uint64_t seed) {
  std::vector<int64_t> idx(static_cast<size_t>(n));
  std::iota(idx.begin(), idx.end(), int64_t{0});
  uint64_t state = seed;
  auto next = [&] {
    uint64_t z = (state += 0x9e3779b97f4a7c15ull);
    z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
    z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
    return z ^ (z >> 31);
  };
  for (int64_t i = n - 1; i > 0; --i) {
    // Modulo bias is < 2^-50 here (n is tiny next to 2^64): irrelevant.
    auto j = static_cast<int64_t>(next() % static_cast<uint64_t>(i + 1));
    std::swap(idx[static_cast<size_t>(i)], idx[static_cast<size_t>(j)]);
  }
  return idx;
}

/// A train/test split of a labelled set, features scaled to [0, 1].
struct Split {
  kiln::Tensor x_train, y_train;  ///< float32 [n_train, 64], int64 [n_train]
  kiln::Tensor x_test, y_test;
};

/// Shuffles the rows with `seed` and puts the first round(n * test_fraction)
/// of them in the test set. Features are divided by kMaxPixel.
inline Split split_dataset(const kiln::CsvTable& data, double test_fraction, uint64_t seed) {
  const int64_t n = data.labels.size(0);
  const auto n_test = static_cast<int64_t>(std::llround(static_cast<double>(n) * test_fraction));
  std::vector<int64_t> perm = permutation(n, seed);
  kiln::Tensor order = kiln::Tensor::from_vector(perm);
  kiln::Tensor x = kiln::index_select(data.features, 0, order) / kMaxPixel;
  kiln::Tensor y = kiln::index_select(data.labels, 0, order);
  return {kiln::slice(x, 0, n_test, n).contiguous(), kiln::slice(y, 0, n_test, n).contiguous(),
          kiln::slice(x, 0, 0, n_test).contiguous(), kiln::slice(y, 0, 0, n_test).contiguous()};
}

// ---- training -------------------------------------------------------------------

/// What one epoch did.
struct EpochStats {
  double mean_loss = 0;    ///< mean of the steps' mini-batch losses
  int64_t steps = 0;
  double step_seconds = 0; ///< wall time inside the step function only
  std::vector<double> step_times;  ///< the same, per step (seconds)
};

/// The step as a callable on (params, momenta, x, y): eager sgd_step, or a
/// compiled callable wrapped the same way.
using StepFn = std::function<StepResult(const Mlp&, const Mlp&, const kiln::Tensor&, const kiln::Tensor&)>;

/// sgd_step run eagerly.
inline StepFn eager_step(Hyper hp) {
  return [hp](const Mlp& p, const Mlp& v, const kiln::Tensor& x, const kiln::Tensor& y) {
    return sgd_step(p, v, x, y, hp);
  };
}

/// sgd_step compiled once for the layouts of (p, v, xb, yb) with `session`
/// (null: the default session), weights and momenta passed in and out as
/// arguments. `compile_seconds` (when given) receives the compile time.
inline StepFn compiled_step(Hyper hp, const Mlp& p, const Mlp& v, const kiln::Tensor& xb, const kiln::Tensor& yb,
                            std::shared_ptr<kiln::InferenceSession> session = nullptr,
                            double* compile_seconds = nullptr) {
  kiln::CompileOptions opts;
  opts.name = "digits_step";
  opts.session = std::move(session);
  auto fn = [hp](Mlp p, Mlp v, kiln::Tensor x, kiln::Tensor y) { return sgd_step(p, v, x, y, hp); };
  auto t0 = std::chrono::steady_clock::now();
  auto run = std::make_shared<kiln::CompiledCallable>(kiln::compile(fn, opts)(p, v, xb, yb));
  if (compile_seconds)
    *compile_seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  return [run](const Mlp& p, const Mlp& v, const kiln::Tensor& x, const kiln::Tensor& y) {
    return (*run)(p, v, x, y).as<StepResult>();
  };
}

/// One epoch of mini-batch training on (x [n, 64], y_onehot [n, 10]), rows
/// visited in the order of permutation(n, shuffle_seed). Only full batches
/// run: the last n % batch rows of the shuffled order are skipped this epoch
/// (every batch has the same shape, so one compiled step serves them all;
/// the order changes each epoch, so no row is left out for good).
/// `on_batch(done, total)` is called after each step (progress display).
inline EpochStats train_epoch(const StepFn& step, Mlp& params, Mlp& momenta, const kiln::Tensor& x,
                              const kiln::Tensor& y_onehot, int64_t batch, uint64_t shuffle_seed,
                              const std::function<void(int64_t, int64_t)>& on_batch = {}) {
  const int64_t n = x.size(0), steps = n / batch;
  kiln::Tensor order = kiln::Tensor::from_vector(permutation(n, shuffle_seed));
  EpochStats st;
  double loss_sum = 0;
  for (int64_t s = 0; s < steps; ++s) {
    kiln::Tensor idx = kiln::slice(order, 0, s * batch, (s + 1) * batch);
    kiln::Tensor xb = kiln::index_select(x, 0, idx), yb = kiln::index_select(y_onehot, 0, idx);
    auto t0 = std::chrono::steady_clock::now();
    auto [p, m, loss] = step(params, momenta, xb, yb);
    loss.realize();
    const double dt = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
    st.step_seconds += dt;
    st.step_times.push_back(dt);
    params = p;
    momenta = m;
    loss_sum += loss.item();
    if (on_batch) on_batch(s + 1, steps);
  }
  st.steps = steps;
  st.mean_loss = steps > 0 ? loss_sum / static_cast<double>(steps) : 0.0;
  return st;
}

/// One-hot float32 targets [n, 10] for int64 labels [n].
inline kiln::Tensor one_hot_targets(const kiln::Tensor& labels) {
  return kiln::one_hot(labels, kClasses, kiln::DType::float32);
}

}  // namespace digits
