// kiln benchmarks: what bench_digits.cpp shares with its LibTorch peers
// (bench_digits_torch.cpp): the digits training step's starting point, as
// plain arrays so the peers need no kiln header.
#pragma once
#include <cstdint>
#include <string>
#include <utility>
#include <vector>

namespace kb::digits_bench {

/// One mini-batch and the initial weights of examples/digits_model.h's MLP
/// (row-major float32), plus the step's hyper-parameters.
struct Start {
  int64_t batch, inputs, hidden, classes;
  std::vector<float> x, y;           ///< [batch, inputs], one-hot [batch, classes]
  std::vector<float> w1, b1, w2, b2;  ///< [inputs, hidden], [hidden], [hidden, classes], [classes]
  float lr, momentum;
  bool real_data;  ///< x, y from data/digits.csv.gz (else random of the same shapes)
};

/// Defined in bench_digits.cpp.
const Start& start();

/// Final weights (w1|b1|w2|b2 concatenated) after `steps` steps from start()
/// (momenta zero), one entry per LibTorch implementation; empty without LibTorch.
std::vector<std::pair<std::string, std::vector<float>>> torch_runs(int steps);

}  // namespace kb::digits_bench
