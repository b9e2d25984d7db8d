// kiln benchmarks: the hand-written Eigen peer of the digits training step
// (the same math as examples/digits_model.h's digits::sgd_step: 64-128-10
// MLP, tanh hidden layer, softmax cross-entropy, hand-derived gradients,
// momentum SGD), buffers allocated once. Included by bench_digits.cpp (Eigen
// built for this CPU, BM_eigen_digits_step) and by eigen_avx2_peers.cpp
// (Eigen built for AVX2+FMA only, BM_eigen_avx2_digits_step): one source for
// both. The anonymous namespace gives each translation unit its own copy, so
// the two builds (different instruction sets) are never merged by the linker.
#pragma once
#include <Eigen/Core>
#include <cstdint>
#include <vector>

#include "bench_digits.h"

namespace kb::digits_bench {
namespace {

struct EigenStep {
  using M = Eigen::Matrix<float, Eigen::Dynamic, Eigen::Dynamic, Eigen::RowMajor>;
  using R = Eigen::RowVectorXf;
  M x, y, w1, w2, v1, v2, z1, h, z2, p, dz2, dw2, dz1, dw1;
  R b1, b2, vb1, vb2;
  Eigen::VectorXf mx, se;
  float lr, mom, loss = 0;

  /// Weights, batch and hyper-parameters from `s`; momenta zero.
  explicit EigenStep(const Start& s) {
    auto mat = [](const std::vector<float>& d, int64_t r, int64_t c) { return M(Eigen::Map<const M>(d.data(), r, c)); };
    auto row = [](const std::vector<float>& d) { return R(Eigen::Map<const R>(d.data(), static_cast<int64_t>(d.size()))); };
    x = mat(s.x, s.batch, s.inputs);
    y = mat(s.y, s.batch, s.classes);
    w1 = mat(s.w1, s.inputs, s.hidden);
    w2 = mat(s.w2, s.hidden, s.classes);
    b1 = row(s.b1);
    b2 = row(s.b2);
    v1 = M::Zero(s.inputs, s.hidden);
    v2 = M::Zero(s.hidden, s.classes);
    vb1 = R::Zero(s.hidden);
    vb2 = R::Zero(s.classes);
    lr = s.lr;
    mom = s.momentum;
  }
  /// One training step (forward, loss, gradients, momentum update).
  void step() {
    const float inv_b = 1.0f / static_cast<float>(x.rows());
    z1.noalias() = x * w1;
    z1.rowwise() += b1;
    h = z1.array().tanh();
    z2.noalias() = h * w2;
    z2.rowwise() += b2;
    mx = z2.rowwise().maxCoeff();
    p = (z2.colwise() - mx).array().exp();  // softmax numerators
    se = p.rowwise().sum();
    // loss = -(1/B) sum y * log_softmax(z2), log_softmax = z2 - max - log(sum exp)
    loss = -((y.array() * ((z2.colwise() - mx).array().colwise() - se.array().log())).sum()) * inv_b;
    dz2 = (p.array().colwise() / se.array() - y.array()) * inv_b;
    dw2.noalias() = h.transpose() * dz2;
    dz1.noalias() = dz2 * w2.transpose();
    dz1.array() *= 1.0f - h.array().square();
    dw1.noalias() = x.transpose() * dz1;
    v1 = v1 * mom + dw1;
    w1 -= v1 * lr;
    vb1 = vb1 * mom + dz1.colwise().sum();
    b1 -= vb1 * lr;
    v2 = v2 * mom + dw2;
    w2 -= v2 * lr;
    vb2 = vb2 * mom + dz2.colwise().sum();
    b2 -= vb2 * lr;
  }
  /// w1 | b1 | w2 | b2, row-major, concatenated.
  std::vector<float> weights() const {
    std::vector<float> out;
    auto put = [&](const float* d, int64_t n) { out.insert(out.end(), d, d + n); };
    put(w1.data(), w1.size());
    put(b1.data(), b1.size());
    put(w2.data(), w2.size());
    put(b2.data(), b2.size());
    return out;
  }
};

}  // namespace
}  // namespace kb::digits_bench
