#include "kernel_source.h"

#include "../tensor/error.h"

namespace kiln::codegen {

std::shared_ptr<ElementwiseKernel> KernelSource::get(const ElementwiseProgram& p, const std::string& text) {
  std::shared_ptr<ElementwiseKernel>& k = kernels_[text];
  if (k) return k;
  if (images_ && !dump_) {
    auto it = images_->find(text);
    if (it != images_->end()) {
      try {
        k = load_elementwise(it->second);
        return k;
      } catch (const Error&) {
        // a malformed image: generate the code instead
      }
    }
  }
  k = generate_elementwise(p, target_, dump_);
  return k;
}

}  // namespace kiln::codegen
