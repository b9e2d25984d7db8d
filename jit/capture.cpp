// engine::Model::capture / replay / release on the CPU: capture runs the plan
// once, keeping every buffer, and records what each replay must redo.
#include "capture.h"

#include <cstring>

#include "../backends/cpu/copy.h"
#include "../backends/cuda/graph_capture.h"
#include "../tensor/realize_hook.h"
#include "cuda_executable.h"

namespace kiln::engine {

namespace {

using detail::Capture;
using detail::CapturedStep;

std::string key_str(uint64_t key) { return std::to_string(key); }

void check_capture_inputs(const Graph& g, std::span<const Tensor> inputs, uint64_t key) {
  const std::string who = "capture(" + key_str(key) + "): ";
  if (inputs.empty())
    throw ValueError(who + "no input buffers given; a capture records a run on specific input buffers");
  const auto& ids = g.input_ids();
  if (inputs.size() != ids.size())
    throw ValueError(who + "expected " + std::to_string(ids.size()) + " input buffers, got " +
                     std::to_string(inputs.size()));
  for (size_t i = 0; i < ids.size(); ++i) {
    const Tensor& t = inputs[i];
    const std::string arg = who + "argument " + std::to_string(i) + ": ";
    if (!t.defined()) throw ValueError(arg + "an undefined tensor");
    if (!t.is_realized()) {
      // A lazy result is read like any other: realized first (in its own
      // open scope too, as a compiled call's arguments are). A traced value
      // has no buffer: realize_for's RealizationError names capture.
      kiln::detail::EagerGuard eager;
      kiln::detail::realize_for(t, ("capture(" + key_str(key) + ") argument " + std::to_string(i)).c_str());
    }
    TensorType got(t.dtype(), t.shape(), t.device());
    if (!(got == g.type(ids[i]))) throw ValueError(arg + "expected " + g.type(ids[i]).str() + ", got " + got.str());
    if (!t.is_contiguous()) throw ValueError(arg + "must be contiguous (pass .contiguous() and capture that buffer)");
  }
}

// dst = src, with a plain memcpy when both are contiguous of one dtype.
void copy_values(const Tensor& src, const Tensor& dst) {
  if (src.dtype() == dst.dtype() && src.is_contiguous() && dst.is_contiguous() && src.shape() == dst.shape()) {
    std::memcpy(dst.data_ptr(), src.data_ptr(), static_cast<size_t>(dst.numel()) * dst.itemsize());
    return;
  }
  cpu::copy_into(src, dst);
}

bool aliases_an_input(const Tensor& r, std::span<const Tensor> args) {
  for (const Tensor& a : args)
    if (a.buffer() == r.buffer()) return true;
  return false;
}

std::string where(const Tensor& t) {
  char buf[32];
  std::snprintf(buf, sizeof buf, "%p", t.data_ptr());
  return TensorType(t.dtype(), t.shape(), t.device()).str() + " at " + buf;
}

}  // namespace

std::vector<Tensor> Model::capture(uint64_t key, std::span<const Tensor> inputs) const {
  const codegen::ExecutionPlan& plan = artifact_->plan();
  const Graph& g = plan.graph();
  check_capture_inputs(g, inputs, key);
  detail::check_input_write_alias(*artifact_, inputs, ("capture(" + key_str(key) + ")").c_str());
  auto cap = std::make_shared<Capture>();
  cap->inputs.assign(inputs.begin(), inputs.end());
  if (const codegen::CudaExecutable* cx = artifact_->cuda_plan()) {
    // One CUDA Graph of the whole call. The constants go to the device
    // first and an ordinary run loads the module and creates cuBLASLt's
    // handle (neither may happen inside a capture); then the recorded run,
    // launched once to fill the outputs.
    const std::vector<Tensor> in(inputs.begin(), inputs.end());
    cap->keep = cx->upload_constants();
    (void)cx->run(in, bound_, &cap->keep);
    std::vector<Tensor> outs;
    cap->graph = cuda::record_graph(cx->device(), [&] { outs = cx->run(in, bound_, &cap->keep); });
    cap->graph->launch();
    cap->outputs = outs;
    std::lock_guard<std::mutex> lock(captures_->mu);
    captures_->map[key] = cap;
    return outs;
  }

  std::vector<Tensor> vals(g.num_values());
  for (size_t i = 0; i < g.input_ids().size(); ++i) vals[g.input_ids()[i]] = inputs[i];
  size_t w = 0;
  for (const Node& n : g.nodes()) {
    if (n.kind == NodeKind::weight) vals[n.outputs[0]] = bound_.at(w++);
    else if (n.kind == NodeKind::constant) vals[n.outputs[0]] = n.data;
  }
  for (size_t k = 0; k < plan.steps().size(); ++k) {
    const codegen::PlanStep& s = plan.steps()[k];
    if (codegen::runs_eager_kernel(s, vals)) {
      CapturedStep c;
      c.kind = CapturedStep::Kind::op;
      c.op = s.op;
      c.attrs = &s.attrs;
      for (int32_t v : s.inputs) c.args.push_back(vals[v]);
      Tensor r = kiln::detail::eager_execute(s.op, c.args, s.attrs);
      vals[s.output] = r;
      if (aliases_an_input(r, c.args)) continue;
      c.dst = r;
      cap->keep.push_back(r);
      cap->steps.push_back(std::move(c));
      continue;
    }
    // Generated code reads contiguous inputs: a strided view (of a value a
    // replay recomputes) is copied on each replay.
    for (int32_t v : codegen::step_reads(s)) {
      Tensor& t = vals[v];
      if (t.is_contiguous()) continue;
      CapturedStep cp;
      cp.kind = CapturedStep::Kind::copy;
      cp.src = t;
      cp.dst = t.contiguous();
      cap->keep.push_back(cp.dst);
      t = cp.dst;
      cap->steps.push_back(std::move(cp));
    }
    CapturedStep c;
    c.kind = CapturedStep::Kind::bound;
    c.bound = plan.bind(k, vals, [&](int32_t v) {
      const TensorType& t = g.type(v);
      Tensor out = Tensor::empty(t.shape, t.dtype, t.device);
      cap->keep.push_back(out);
      return out;
    });
    codegen::ExecutionPlan::execute(c.bound);
    cap->steps.push_back(std::move(c));
  }
  for (int32_t v : g.output_ids()) {
    if (g.node(g.producer(v)).kind == NodeKind::constant) {
      // Never hand out the plan's constant storage; restore it each replay.
      CapturedStep cp;
      cp.kind = CapturedStep::Kind::copy;
      cp.src = vals[v];
      cp.dst = vals[v].clone();
      cap->outputs.push_back(cp.dst);
      cap->steps.push_back(std::move(cp));
    } else {
      cap->outputs.push_back(vals[v]);
    }
  }
  std::vector<Tensor> outs = cap->outputs;
  std::lock_guard<std::mutex> lock(captures_->mu);
  captures_->map[key] = std::move(cap);
  return outs;
}

void Model::replay(uint64_t key, std::span<const Tensor> inputs) const {
  std::shared_ptr<const Capture> cap;
  {
    std::lock_guard<std::mutex> lock(captures_->mu);
    auto it = captures_->map.find(key);
    if (it != captures_->map.end()) cap = it->second;
  }
  if (!cap)
    throw ValueError("replay(" + key_str(key) + "): no capture under this key (capture it first; released keys are gone)");
  if (inputs.size() != cap->inputs.size()) {
    if (inputs.empty())
      throw ValueError("replay(" + key_str(key) + "): no input buffers given; pass the " +
                       std::to_string(cap->inputs.size()) + " buffers it was captured with");
    throw ValueError("replay(" + key_str(key) + "): captured with " + std::to_string(cap->inputs.size()) +
                     " input buffers, got " + std::to_string(inputs.size()));
  }
  for (size_t i = 0; i < inputs.size(); ++i) {
    const Tensor& a = inputs[i];
    const Tensor& c = cap->inputs[i];
    if (a.impl_ptr() == c.impl_ptr()) continue;
    if (!a.defined() || !a.is_realized() || a.data_ptr() != c.data_ptr() || a.dtype() != c.dtype() ||
        a.shape() != c.shape() || a.strides() != c.strides() || !(a.device() == c.device()))
      throw ValueError("replay(" + key_str(key) + "): argument " + std::to_string(i) +
                       " is not the buffer captured under this key (captured " + where(c) + ", got " +
                       (a.defined() && a.is_realized() ? where(a) : std::string("an undefined or unrealized tensor")) +
                       "); capture again for new buffers");
  }
  if (cap->graph) {
    cap->graph->launch();  // stream-ordered: reading the outputs waits for it
    return;
  }
  for (const CapturedStep& s : cap->steps) {
    switch (s.kind) {
      case CapturedStep::Kind::bound: codegen::ExecutionPlan::execute(s.bound); break;
      case CapturedStep::Kind::op: {
        // The kernel writes into the captured buffer (no allocation, no
        // copy); one that makes its result elsewhere is copied there.
        Tensor r;
        {
          kiln::detail::ScopedOutput into(s.dst);
          r = kiln::detail::eager_execute(s.op, s.args, *s.attrs);
        }
        if (r.data_ptr() != s.dst.data_ptr() || r.strides() != s.dst.strides()) copy_values(r, s.dst);
        break;
      }
      case CapturedStep::Kind::copy: copy_values(s.src, s.dst); break;
    }
  }
}

std::vector<Tensor> Model::captured_outputs(uint64_t key) const {
  std::lock_guard<std::mutex> lock(captures_->mu);
  auto it = captures_->map.find(key);
  if (it == captures_->map.end())
    throw ValueError("captured_outputs(" + key_str(key) + "): no capture under this key");
  return it->second->outputs;
}

void Model::release(uint64_t key) const {
  std::shared_ptr<const Capture> dropped;  // freed outside the lock
  std::lock_guard<std::mutex> lock(captures_->mu);
  auto it = captures_->map.find(key);
  if (it == captures_->map.end()) return;
  dropped = std::move(it->second);
  captures_->map.erase(it);
}

size_t Model::num_captures() const {
  std::lock_guard<std::mutex> lock(captures_->mu);
  return captures_->map.size();
}

uint64_t parse_capture_key(std::string_view text) {
  std::string_view s = text;
  std::string shown = "'";  // appended (GCC 12 warns, falsely, -Wrestrict, on "'" + std::string&&)
  shown.append(text).push_back('\'');
  if (s.empty()) throw ValueError("capture key: an empty string is not a key (keys are integers 0..2^64-1)");
  if (s[0] == '-')
    throw ValueError("capture key " + shown + " is negative; keys are integers 0..18446744073709551615 (2^64-1)");
  if (s[0] == '+') s.remove_prefix(1);
  int base = 10;
  if (s.size() > 2 && s[0] == '0' && (s[1] == 'x' || s[1] == 'X')) {
    base = 16;
    s.remove_prefix(2);
  }
  if (s.empty()) throw ValueError("capture key " + shown + " is not an integer");
  uint64_t v = 0;
  for (char ch : s) {
    int d;
    if (ch >= '0' && ch <= '9') d = ch - '0';
    else if (base == 16 && ch >= 'a' && ch <= 'f') d = ch - 'a' + 10;
    else if (base == 16 && ch >= 'A' && ch <= 'F') d = ch - 'A' + 10;
    else throw ValueError("capture key " + shown + " is not an integer");
    if (v > (UINT64_MAX - static_cast<uint64_t>(d)) / static_cast<uint64_t>(base))
      throw ValueError("capture key " + shown + " is out of range: keys are integers 0..18446744073709551615 (2^64-1)");
    v = v * static_cast<uint64_t>(base) + static_cast<uint64_t>(d);
  }
  return v;
}

}  // namespace kiln::engine
