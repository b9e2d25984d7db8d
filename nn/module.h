// kiln: a minimal nn::Module: named parameters with dotted paths
// ("layers.3.weight") and child modules. While a graph is being traced a
// parameter is a named weight of the graph (bound when compiling) instead
// of a constant; a module marked with set_subgraph(true) is traced once per
// key and called (see trace/subgraph.h), its weights resolved through the
// call's prefix.
#pragma once
#include <functional>
#include <map>
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "../tensor/tensor.h"

namespace kiln::nn {

class Module {
 public:
  Module() = default;
  virtual ~Module();
  Module(const Module&) = delete;
  Module& operator=(const Module&) = delete;

  /// The computation. Use param("name") for parameters inside it.
  virtual Tensor forward(const Tensor& x) = 0;
  /// A short type name for subgraph bodies ("Linear"); default: the demangled class name.
  virtual std::string type_name() const;

  /// Runs forward, as a deduplicated subgraph call when this module is
  /// marked (set_subgraph) and a root trace is active.
  Tensor operator()(const Tensor& x);

  /// (dotted path, tensor) for every parameter, depth first in registration order.
  std::vector<std::pair<std::string, Tensor>> named_parameters() const;
  /// named_parameters() as a map (the weights registry for compile()).
  std::map<std::string, Tensor> state_dict() const;
  /// Sets parameters by path: the values are copied into each parameter's
  /// memory (torch's semantics), so a compiled callable bound to the
  /// parameters sees them. An unknown path or a shape/dtype mismatch throws
  /// ValueError before any parameter changes; with `strict`, so does a
  /// parameter that `sd` lacks (the message names every missing path).
  void load_state_dict(const std::map<std::string, Tensor>& sd, bool strict = false);
  /// This module's prefix under the first parent it was registered with
  /// ("" for a root, "layers.3." for a child). A module may have several
  /// parents: state_dict(), named_parameters() and the weights a trace names
  /// are always relative to the module asked (or traced), so registering a
  /// module under a second parent changes neither parent's keys nor its own.
  const std::string& path() const { return path_; }
  /// Marks the module to be traced as one shared subgraph body per key.
  Module& set_subgraph(bool on = true) {
    subgraph_ = on;
    return *this;
  }

 protected:
  /// Runs `body(args)`, this module's computation on several tensors, the
  /// way operator() runs forward: as one shared subgraph call (keyed by the
  /// module's type, parameter types and the arguments' types) when the module
  /// is marked with set_subgraph and a root trace is active, else directly.
  /// For modules whose forward takes more than one tensor (an attention
  /// block's hidden states and mask).
  Tensor call_module(const std::vector<Tensor>& args, const std::function<Tensor(const std::vector<Tensor>&)>& body);
  /// Adds a parameter (a realized tensor) named `name`.
  void register_parameter(const std::string& name, Tensor value);
  /// Adds a child module reachable as `name.` in paths.
  template <class M>
  std::shared_ptr<M> register_module(const std::string& name, std::shared_ptr<M> m) {
    add_child(name, m);
    return m;
  }
  /// The parameter as the current context sees it: the tensor itself when
  /// running eagerly or lazily; a weight node named by its path (relative to
  /// the enclosing call's prefix) while tracing a graph.
  Tensor param(const std::string& name) const;

 private:
  void add_child(const std::string& name, std::shared_ptr<Module> m);
  void set_path(const std::string& p);
  void collect(const std::string& prefix, std::vector<std::pair<std::string, Tensor*>>& out) const;
  // Path of `target` below this module ("a.b."), found depth first.
  bool find_path(const Module* target, const std::string& prefix, std::string& out) const;
  // While tracing: this module's path from the first module the trace entered.
  std::string trace_path() const;
  std::string path_;
  const Module* first_parent_ = nullptr;  // the parent path_ is relative to
  bool subgraph_ = false;
  std::vector<std::pair<std::string, Tensor>> params_;
  std::vector<std::pair<std::string, std::shared_ptr<Module>>> children_;
};

/// While alive on this thread, a trace names the parameters of `m` and of
/// the modules below it by their path from `m`, i.e. m.state_dict()'s keys
/// (jit(model) uses it). Without it a module called first in a trace is
/// named by its path under its first parent (its state_dict keys when it
/// has none).
class ParameterNaming {
 public:
  explicit ParameterNaming(const Module& m);
  ~ParameterNaming();
  ParameterNaming(const ParameterNaming&) = delete;
  ParameterNaming& operator=(const ParameterNaming&) = delete;
};

}  // namespace kiln::nn
