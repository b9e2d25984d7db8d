// kiln: jit(model): a jit function of an nn::Module's call.
#pragma once
#include <functional>
#include <memory>
#include <type_traits>
#include <utility>

#include "../jit/jit_function.h"
#include "module.h"

namespace kiln {

/// jit(model)(x) runs `(*model)(x)` compiled, as jit([&](const Tensor& x) {
/// return (*model)(x); }) does, with the module's parameters as named
/// weights bound automatically: their names are model->state_dict()'s keys
/// (also when the module has other parents), and the compiled code reads the
/// parameters' memory on every call, so load_state_dict or an in-place
/// update of a parameter is seen by the next call. The result keeps `model`
/// alive. Options as for jit(fn); an entry of opts.compile.weights replaces
/// the parameter of that name.
template <class M>
  requires std::is_base_of_v<nn::Module, M>
auto jit(std::shared_ptr<M> model, JitOptions opts = {}) {
  if (!model) throw ValueError("jit: the module is null");
  return jit(
      [model](const Tensor& x) -> Tensor {
        nn::ParameterNaming names(*model);
        return (*model)(x);
      },
      std::move(opts));
}

/// jit(std::ref(model)): as above for a module the caller owns (it must
/// outlive the result). (A module cannot be passed by value: modules are not
/// copyable, and jit(fn) takes its function by value.)
template <class M>
  requires std::is_base_of_v<nn::Module, M>
auto jit(std::reference_wrapper<M> model, JitOptions opts = {}) {
  return jit(
      [m = &model.get()](const Tensor& x) -> Tensor {
        nn::ParameterNaming names(*m);
        return (*m)(x);
      },
      std::move(opts));
}

}  // namespace kiln
