#include "module.h"

#include <cxxabi.h>

#include <cstdlib>
#include <typeinfo>

#include "../backends/cpu/copy.h"
#include "../trace/subgraph.h"

namespace kiln::nn {

Module::~Module() = default;

std::string Module::type_name() const {
  int status = 0;
  char* d = abi::__cxa_demangle(typeid(*this).name(), nullptr, nullptr, &status);
  std::string n = status == 0 && d ? d : typeid(*this).name();
  std::free(d);
  auto pos = n.rfind("::");
  return pos == std::string::npos ? n : n.substr(pos + 2);
}

void Module::register_parameter(const std::string& name, Tensor value) {
  if (name.empty() || name.find('.') != std::string::npos)
    throw ValueError("Module::register_parameter: name '" + name + "' must be non-empty and contain no '.'");
  if (!value.defined() || !value.is_realized())
    throw ValueError("Module::register_parameter: '" + name + "' must be a realized tensor");
  for (auto& [n, t] : params_)
    if (n == name) throw ValueError("Module::register_parameter: '" + name + "' is already registered");
  params_.emplace_back(name, std::move(value));
}

namespace {
// While a graph is traced, the modules whose calls are running (innermost
// last) with their paths from the first one: a module shared by several
// parents is named by where this trace reached it, not by one stored path.
struct TraceFrame {
  const Module* module;
  std::string path;
};
thread_local std::vector<TraceFrame> t_frames;
struct FrameScope {
  FrameScope(const Module* m, std::string path) { t_frames.push_back({m, std::move(path)}); }
  ~FrameScope() { t_frames.pop_back(); }
  FrameScope(const FrameScope&) = delete;
  FrameScope& operator=(const FrameScope&) = delete;
};
}  // namespace

bool Module::find_path(const Module* target, const std::string& prefix, std::string& out) const {
  for (const auto& [n, c] : children_) {
    const std::string p = prefix + n + ".";
    if (c.get() == target) {
      out = p;
      return true;
    }
    if (c->find_path(target, p, out)) return true;
  }
  return false;
}

std::string Module::trace_path() const {
  for (auto it = t_frames.rbegin(); it != t_frames.rend(); ++it) {
    if (it->module == this) return it->path;
    std::string p;
    if (it->module->find_path(this, it->path, p)) return p;
  }
  return path_;  // not reached from a running call: its path under its first parent
}

ParameterNaming::ParameterNaming(const Module& m) { t_frames.push_back({&m, ""}); }
ParameterNaming::~ParameterNaming() { t_frames.pop_back(); }

void Module::add_child(const std::string& name, std::shared_ptr<Module> m) {
  if (!m) throw ValueError("Module::register_module: '" + name + "' is null");
  std::string ignored;
  if (m.get() == this || m->find_path(this, "", ignored))
    throw ValueError("Module::register_module: '" + name + "' would make the module its own descendant");
  if (name.empty() || name.find('.') != std::string::npos)
    throw ValueError("Module::register_module: name '" + name + "' must be non-empty and contain no '.'");
  for (auto& [n, c] : children_)
    if (n == name) throw ValueError("Module::register_module: '" + name + "' is already registered");
  // path() keeps the first parent's; names (state_dict, traced weights)
  // are computed per walk from the module asked, so a second parent changes
  // neither the first parent's keys nor the module's own.
  if (!m->first_parent_) {
    m->first_parent_ = this;
    m->set_path(path_ + name + ".");
  }
  children_.emplace_back(name, std::move(m));
}

void Module::set_path(const std::string& p) {
  path_ = p;
  for (auto& [n, c] : children_)
    if (c->first_parent_ == this) c->set_path(p + n + ".");
}

void Module::collect(const std::string& prefix, std::vector<std::pair<std::string, Tensor*>>& out) const {
  for (const auto& [n, t] : params_) out.emplace_back(prefix + n, const_cast<Tensor*>(&t));
  for (const auto& [n, c] : children_) c->collect(prefix + n + ".", out);
}

std::vector<std::pair<std::string, Tensor>> Module::named_parameters() const {
  std::vector<std::pair<std::string, Tensor*>> slots;
  collect("", slots);
  std::vector<std::pair<std::string, Tensor>> out;
  out.reserve(slots.size());
  for (auto& [n, t] : slots) out.emplace_back(n, *t);
  return out;
}

std::map<std::string, Tensor> Module::state_dict() const {
  auto v = named_parameters();
  return {v.begin(), v.end()};
}

void Module::load_state_dict(const std::map<std::string, Tensor>& sd, bool strict) {
  std::vector<std::pair<std::string, Tensor*>> walked;
  collect("", walked);
  const std::map<std::string, Tensor*> slots(walked.begin(), walked.end());
  // Every entry is checked before any parameter changes. Keys that name no
  // parameter (always an error) and, with `strict`, parameters `sd` lacks
  // are all listed in one message, both ways at once: a misspelt key shows
  // up as one unexpected and one missing name (both maps are sorted).
  std::string missing, unexpected;
  size_t n_missing = 0, n_unexpected = 0;
  for (const auto& [k, p] : slots)
    if (!sd.count(k)) missing += (n_missing++ ? ", '" : "'") + k + "'";
  for (const auto& [k, v] : sd)
    if (!slots.count(k)) unexpected += (n_unexpected++ ? ", '" : "'") + k + "'";
  if (n_unexpected || (strict && n_missing))
    throw ValueError("load_state_dict: the state dict's keys do not match the module's parameters" +
                     (n_unexpected ? "; " + std::to_string(n_unexpected) + " unexpected (no parameter of that name): " +
                                         unexpected
                                   : std::string()) +
                     (n_missing ? "; " + std::to_string(n_missing) + " missing" +
                                      (strict ? "" : " (not an error with strict = false: kept as they are)") + ": " +
                                      missing
                                : std::string()) +
                     " (the module has " + std::to_string(slots.size()) + " parameter(s), named by state_dict())");
  for (const auto& [k, v] : sd) {
    auto it = slots.find(k);
    if (!v.defined()) throw ValueError("load_state_dict: '" + k + "' is an undefined tensor");
    if (v.dtype() != it->second->dtype() || v.shape() != it->second->shape())
      throw ValueError("load_state_dict: '" + k + "' expects " + std::string(name(it->second->dtype())) +
                       shape_str(it->second->shape()) + ", got " + std::string(name(v.dtype())) + shape_str(v.shape()));
  }
  for (const auto& [k, v] : sd) {
    Tensor& p = *slots.at(k);
    // Values are copied into the parameter's memory (as torch's
    // load_state_dict does), so everything holding the parameter -- a
    // compiled callable bound to it, say -- sees them; a parameter without
    // memory of its own yet (lazy) takes the new tensor.
    if (p.is_realized() && p.device().is_cpu() && v.device().is_cpu() && p.buffer() != v.buffer()) {
      Tensor src = v;
      src.realize();
      cpu::copy_into(src, p);
    } else {
      p = v;
    }
  }
}

Tensor Module::param(const std::string& name) const {
  const Tensor* t = nullptr;
  for (const auto& [n, p] : params_)
    if (n == name) t = &p;
  if (!t) throw ValueError(type_name() + ": no parameter named '" + name + "'");
  auto* g = dynamic_cast<GraphRealizationContext*>(&current_realization_context());
  if (!g) return *t;
  std::string full = trace_path() + name;
  const std::string& pre = g->prefix();
  if (full.compare(0, pre.size(), pre) != 0)
    throw ValueError(type_name() + ": parameter '" + full + "' is not under the enclosing call's prefix '" + pre + "'");
  // compile() binds it by this name (no registry needed). Two modules named
  // alike from different roots (two jit(model)s inlined into one trace) get
  // distinct names: "fc.weight", "fc.weight_1", ...
  if (pre.empty())
    for (int k = 1; !g->weight_name_free(full, *t); ++k) full = trace_path() + name + "_" + std::to_string(k);
  g->bind_weight(full, *t);
  // Inside a shared body the name is relative and resolved per call (placeholder).
  GraphValue v = g->graph().add_weight(full.substr(pre.size()), TensorType(t->dtype(), t->shape(), t->device()),
                                       !pre.empty());
  return g->create_unrealized({v});
}

Tensor Module::operator()(const Tensor& x) {
  return call_module({x}, [this](const std::vector<Tensor>& a) { return forward(a[0]); });
}

Tensor Module::call_module(const std::vector<Tensor>& args,
                           const std::function<Tensor(const std::vector<Tensor>&)>& body) {
  if (!in_graph_context()) return body(args);
  const std::string path = trace_path();
  FrameScope frame(this, path);
  GraphRealizationContext* ctx = subgraph_ && !path.empty() ? detail::armed_context() : nullptr;
  if (!ctx) return body(args);
  // A call of a body traced for another call reads these parameters through
  // its prefix without running param(): bind them all here.
  for (const auto& [n, t] : named_parameters()) ctx->bind_weight(path + n, t);
  // Key: the module's type, its parameters' names and types, the operand
  // type, and that a prefix is used; layers that differ only in weight values share a body.
  std::string key = "module:" + type_name() + "|";
  for (const auto& [n, t] : named_parameters()) key += n + "=" + TensorType(t.dtype(), t.shape(), t.device()).str() + ";";
  key += "|" + detail::types_key(args) + "|1";
  TreeDef out_tree;
  auto outs = detail::call_subgraph(
      *ctx, type_name(), key, args, path,
      [&](const std::vector<Tensor>& body_args, TreeDef& ot) {
        ot = TreeDef{};
        return std::vector<Tensor>{body(body_args)};
      },
      out_tree);
  return outs.at(0);
}

}  // namespace kiln::nn
