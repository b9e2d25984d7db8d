#include "layers.h"

#include <cmath>

#include "../tensor/creation.h"
#include "../tensor/ops.h"
#include "../tensor/random.h"

namespace kiln::nn {

Linear::Linear(int64_t in_features, int64_t out_features, bool bias, DType dtype) : has_bias_(bias) {
  if (in_features <= 0 || out_features <= 0)
    throw ValueError("Linear: features must be positive, got in=" + std::to_string(in_features) +
                     " out=" + std::to_string(out_features));
  const double k = 1.0 / std::sqrt(static_cast<double>(in_features));
  register_parameter("weight", random::uniform({out_features, in_features}, -k, k, dtype));
  if (bias) register_parameter("bias", random::uniform({out_features}, -k, k, dtype));
}

Tensor Linear::forward(const Tensor& x) {
  const Tensor& w = param("weight");  // [out_features, in_features]
  if (!x.defined()) throw ValueError("Linear: the input is an undefined tensor");
  if (x.ndim() == 0)
    throw ShapeError("Linear: expected an input whose last extent is in_features = " + std::to_string(w.shape()[1]) +
                     ", got a 0-d tensor");
  if (x.shape().back() != w.shape()[1])
    throw ShapeError("Linear: expected an input whose last extent is in_features = " + std::to_string(w.shape()[1]) +
                     ", got shape " + shape_str(x.shape()) + " (last extent " + std::to_string(x.shape().back()) + ")");
  Tensor y = matmul(x, transpose(w, 0, 1));
  return has_bias_ ? y + param("bias") : y;
}

LayerNorm::LayerNorm(int64_t dim, double eps, DType dtype) : eps_(eps) {
  if (dim <= 0) throw ValueError("LayerNorm: dim must be positive, got " + std::to_string(dim));
  register_parameter("weight", ones({dim}, dtype));
  register_parameter("bias", zeros({dim}, dtype));
}

Tensor LayerNorm::forward(const Tensor& x) { return layer_norm(x, param("weight"), param("bias"), eps_); }

Embedding::Embedding(int64_t num_embeddings, int64_t dim, DType dtype) {
  if (num_embeddings <= 0 || dim <= 0)
    throw ValueError("Embedding: sizes must be positive, got " + std::to_string(num_embeddings) + " x " +
                     std::to_string(dim));
  register_parameter("weight", random::normal({num_embeddings, dim}, 0.0, 1.0, dtype));
}

Tensor Embedding::forward(const Tensor& ids) { return embedding(param("weight"), ids); }

ModuleList::ModuleList(std::vector<std::shared_ptr<Module>> mods) {
  for (auto& m : mods) push_back(std::move(m));
}

void ModuleList::push_back(std::shared_ptr<Module> m) {
  register_module(std::to_string(mods_.size()), m);
  mods_.push_back(std::move(m));
}

Module& ModuleList::operator[](size_t i) {
  if (i >= mods_.size())
    throw IndexError("ModuleList: index " + std::to_string(i) + " out of range for " + std::to_string(mods_.size()) +
                     " modules");
  return *mods_[i];
}

Tensor ModuleList::forward(const Tensor&) {
  throw Error("ModuleList: has no forward of its own; call its modules (list[i](x)) or use Sequential");
}

Tensor Sequential::forward(const Tensor& x) {
  Tensor h = x;
  for (auto& m : mods_) h = (*m)(h);
  return h;
}

}  // namespace kiln::nn
