#include "engine.h"

#include <iostream>
#include <map>
#include <mutex>

#include "../trace/passes/passes.h"
#include "plan.h"

namespace kiln::engine {

CompiledModel::CompiledModel(std::shared_ptr<const Graph> source, std::shared_ptr<const Graph> optimized,
                             std::shared_ptr<const codegen::ExecutionPlan> plan)
    : source_(std::move(source)), optimized_(std::move(optimized)), plan_(std::move(plan)) {}

const std::vector<std::pair<std::string, TensorType>>& CompiledModel::weight_slots() const {
  return plan_->weight_slots();
}

namespace {
std::mutex g_artifacts_mu;
// Artifacts by staged graph: binding other weights to the same staged graph
// reuses the generated code. The artifact holds its source graph, so a live
// entry's key cannot be a reused address.
std::map<std::pair<const Graph*, const InferenceSession*>, std::weak_ptr<const CompiledModel>> g_artifacts;
}  // namespace

std::shared_ptr<const CompiledModel> compile_graph(const std::shared_ptr<const Graph>& staged, InferenceSession& session) {
  const auto key = std::make_pair(staged.get(), &session);
  {
    std::lock_guard<std::mutex> lock(g_artifacts_mu);
    auto it = g_artifacts.find(key);
    if (it != g_artifacts.end())
      if (auto a = it->second.lock()) return a;
  }
  staged->verify();
  std::shared_ptr<Graph> flat = codegen::inline_calls(*staged);
  optimize(*flat);
  flat->verify();
  auto plan = std::make_shared<codegen::ExecutionPlan>(flat, session.options());
  if (session.options().dump)
    std::cerr << "[kiln jit] optimised graph:\n" << flat->to_text() << "[kiln jit] plan:\n" << plan->describe(true);
  auto art = std::make_shared<const CompiledModel>(staged, flat, plan);
  std::lock_guard<std::mutex> lock(g_artifacts_mu);
  for (auto it = g_artifacts.begin(); it != g_artifacts.end();)  // drop expired entries
    it = it->second.expired() ? g_artifacts.erase(it) : std::next(it);
  g_artifacts[key] = art;
  return art;
}

Model::Model(std::shared_ptr<const CompiledModel> artifact, const std::map<std::string, Tensor>& weights)
    : artifact_(std::move(artifact)) {
  for (const auto& [name, type] : artifact_->weight_slots()) {
    auto it = weights.find(name);
    if (it == weights.end())
      throw ValueError("compile: weight '" + name + "' (" + type.str() + ") is missing from the weights registry");
    const Tensor& w = it->second;
    if (!w.defined()) throw ValueError("compile: weight '" + name + "' is an undefined tensor");
    TensorType got(w.dtype(), w.shape(), w.device());
    if (!(got == type))
      throw ValueError("compile: weight '" + name + "' expects " + type.str() + ", got " + got.str());
    if (!w.is_contiguous())
      throw ValueError("compile: weight '" + name + "' must be contiguous (pass .contiguous())");
    bound_.push_back(w);
  }
}

std::vector<Tensor> Model::execute(std::span<const Tensor> inputs) const {
  std::vector<Tensor> out;
  artifact_->plan().run(inputs, bound_, out);
  return out;
}

}  // namespace kiln::engine
