// kiln: the engine layer under CompiledCallable. A CompiledModel is a
// compiled artifact (the optimised graph and its generated code, no weights);
// a Model is a CompiledModel with weights bound, ready to run.
#pragma once
#include <memory>
#include <span>
#include <string>
#include <vector>

#include "../trace/graph.h"
#include "inference_session.h"

namespace kiln::codegen {
class ExecutionPlan;
}

namespace kiln::engine {

/// A compiled artifact: the optimised, flat graph and its execution plan.
class CompiledModel {
 public:
  CompiledModel(std::shared_ptr<const Graph> source, std::shared_ptr<const Graph> optimized,
                std::shared_ptr<const codegen::ExecutionPlan> plan);
  const std::string& name() const { return optimized_->name(); }
  /// The graph as staged (kept so its address identifies this artifact).
  const Graph& source_graph() const { return *source_; }
  /// The optimised graph the plan runs.
  const Graph& graph() const { return *optimized_; }
  const codegen::ExecutionPlan& plan() const { return *plan_; }
  /// Weights the graph expects: (name, type), in binding order.
  const std::vector<std::pair<std::string, TensorType>>& weight_slots() const;

 private:
  std::shared_ptr<const Graph> source_, optimized_;
  std::shared_ptr<const codegen::ExecutionPlan> plan_;
};

/// Compiles `staged_graph` (inline calls, optimise, fuse, generate code),
/// reusing an artifact the session already built for the same graph object.
std::shared_ptr<const CompiledModel> compile_graph(const std::shared_ptr<const Graph>& staged_graph,
                                                   InferenceSession& session);

/// A CompiledModel with weights bound.
class Model {
 public:
  /// Binds `weights` (name -> contiguous tensor). Throws ValueError naming a
  /// weight that is missing, mis-typed or not contiguous.
  Model(std::shared_ptr<const CompiledModel> artifact, const std::map<std::string, Tensor>& weights);
  /// Runs on contiguous tensors in graph-input order, with no checks.
  std::vector<Tensor> execute(std::span<const Tensor> inputs) const;
  const CompiledModel& artifact() const { return *artifact_; }
  const std::shared_ptr<const CompiledModel>& artifact_ptr() const { return artifact_; }

 private:
  std::shared_ptr<const CompiledModel> artifact_;
  std::vector<Tensor> bound_;
};

}  // namespace kiln::engine
