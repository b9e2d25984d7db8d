// kiln: standard layers built on nn::Module.
#pragma once
#include <cstdint>
#include <memory>
#include <vector>

#include "module.h"

namespace kiln::nn {

/// y = x @ weight^T + bias; weight [out, in], bias [out] (PyTorch's layout).
/// Initialised uniform(-1/sqrt(in), 1/sqrt(in)) from kiln's default generator.
class Linear : public Module {
 public:
  Linear(int64_t in_features, int64_t out_features, bool bias = true, DType dtype = DType::float32);
  Tensor forward(const Tensor& x) override;
  std::string type_name() const override { return "Linear"; }

 private:
  bool has_bias_;
};

/// layer_norm over the last axis with weight (ones) and bias (zeros) of [dim].
class LayerNorm : public Module {
 public:
  explicit LayerNorm(int64_t dim, double eps = 1e-5, DType dtype = DType::float32);
  Tensor forward(const Tensor& x) override;
  std::string type_name() const override { return "LayerNorm"; }

 private:
  double eps_;
};

/// Lookup table weight [num_embeddings, dim] (normal(0, 1)); forward(ids) =
/// weight[ids], ids int32/int64 of any shape.
class Embedding : public Module {
 public:
  Embedding(int64_t num_embeddings, int64_t dim, DType dtype = DType::float32);
  Tensor forward(const Tensor& ids) override;
  std::string type_name() const override { return "Embedding"; }
};

/// A list of modules, named "0", "1", ... (paths "layers.0.").
class ModuleList : public Module {
 public:
  ModuleList() = default;
  explicit ModuleList(std::vector<std::shared_ptr<Module>> mods);
  void push_back(std::shared_ptr<Module> m);
  Module& operator[](size_t i);
  size_t size() const { return mods_.size(); }
  /// Throws Error: a ModuleList has no forward of its own (index it).
  Tensor forward(const Tensor& x) override;
  std::string type_name() const override { return "ModuleList"; }

 protected:
  std::vector<std::shared_ptr<Module>> mods_;
};

/// Applies its modules in order.
class Sequential : public ModuleList {
 public:
  using ModuleList::ModuleList;
  Tensor forward(const Tensor& x) override;
  std::string type_name() const override { return "Sequential"; }
};

}  // namespace kiln::nn
