#include "compiled.h"

#include <algorithm>
#include <filesystem>
#include <cstring>
#include <fstream>
#include <set>
#include <sstream>

#include "plan_file.h"
#include "redistribute_step.h"

namespace kiln::distributed {

std::string shard_weight_name(const std::string& name, int64_t i) {
  return i == 0 ? name : name + ".shard." + std::to_string(i);
}

std::map<std::string, Tensor> shard_weights(const std::string& name, const DistributedTensor& t) {
  if (!t.defined()) throw ValueError("shard_weights('" + name + "'): undefined DistributedTensor");
  std::map<std::string, Tensor> m;
  for (int64_t i : t.local_shards()) m[shard_weight_name(name, i)] = t.shard(i).contiguous();
  return m;
}

DistributedTensor weight(const std::string& name, const DistributedLayout& layout) {
  detail::ShardTrace* tr = detail::current_shard_trace();
  if (!tr)
    throw ValueError("distributed::weight('" + name +
                     "'): only inside a function traced by distributed::compile or distributed::jit");
  if (!(layout.mapping.mesh() == *tr->mesh))
    throw ValueError("distributed::weight('" + name + "'): its mesh " + layout.mapping.mesh().str() +
                     " is not the mesh being compiled for, " + tr->mesh->str());
  const int64_t d = tr->device;
  const GraphValue v = tr->ctx->graph().add_weight(
      shard_weight_name(name, d), TensorType(layout.dtype, layout.shard_shape(d), layout.mapping.mesh().devices()[d]));
  return DistributedTensor::from_shards(layout, {tr->ctx->create_unrealized({v})});
}

std::string jit_key(const std::vector<DistributedLayout>& layouts) {
  std::string k;
  for (const auto& l : layouts) k += l.str() + "|";
  return k;
}

// ---- the device programs ---------------------------------------------------------------

struct DistributedCallable::Segment {
  std::shared_ptr<CompiledCallable> fn;  // null: nothing to compute
  std::vector<int32_t> inputs, outputs;  // value ids of the device program
};

struct DistributedCallable::DeviceProgram {
  int64_t device = 0;
  int64_t num_values = 0;
  std::shared_ptr<Graph> graph;  // the traced program (null when read from a plan file)
  std::vector<int32_t> args, results, coll_src, coll_dst;
  std::vector<Segment> segments;  // num_collectives + 1
};

struct DistributedCallable::Captured {
  std::vector<std::vector<Tensor>> vals;  // per local device: its value table
  std::vector<std::vector<Tensor>> args;  // per local device: the captured argument shards
};

namespace {

// `t` labelled as living on `d` (CPU devices of one process share memory).
Tensor on_device(const Tensor& t, Device d) {
  if (t.device() == d) return t;
  const Tensor c = t.contiguous();
  // The whole buffer, relabelled, and the view's offset into it: the
  // wrapped address stays the allocation's (aligned), not an element inside it.
  auto keep = std::make_shared<Buffer>(c.buffer());
  Buffer b = Buffer::wrap(c.buffer().data(), c.buffer().nbytes(), d, keep);
  return Tensor(b, c.dtype(), c.shape(), contiguous_strides(c.shape()), c.offset());
}

TreeDef flat_tree(size_t n) {
  TreeDef t;
  t.kind = TreeDef::Kind::list;
  t.children.resize(n);
  return t;
}

const char* how(const DistributedLayout& from, const DistributedLayout& to) {
  if (from.mapping.mesh().ndim() != 1) return "gather and cut";
  const Placement f = from.mapping.placements()[0], t = to.mapping.placements()[0];
  if (t.is_replicated()) return f.is_partial() ? "all-reduce" : f.is_sharded() ? "all-gather" : "copy";
  if (t.is_sharded()) return f.is_replicated() ? "local slice" : f.is_partial() ? "reduce-scatter" : "all-to-all";
  return "local";
}


struct Cut {
  std::vector<std::vector<int32_t>> seg_nodes;  // per segment: op node indices
  std::vector<std::vector<int32_t>> inputs, outputs;
};

// Segment s = the op nodes whose inputs depend on collective results up to
// s - 1 (stage s). A value crosses segments as a result of the segment that
// computes it and an input of each later one that reads it. Constants and
// weights are copied into every segment that reads them.
Cut cut_program(const Graph& g, const std::vector<int32_t>& coll_src, const std::vector<int32_t>& coll_dst,
                const std::vector<int32_t>& results) {
  const size_t K = coll_dst.size(), nv = g.num_values();
  std::vector<int> stage(nv, 0);
  std::vector<char> is_free(nv, 0), by_op(nv, 0), needed(nv, 0);
  for (size_t j = 0; j < K; ++j) stage[coll_dst[j]] = static_cast<int>(j) + 1;
  Cut c;
  c.seg_nodes.resize(K + 1);
  c.inputs.resize(K + 1);
  c.outputs.resize(K + 1);
  for (size_t i = 0; i < g.num_nodes(); ++i) {
    const Node& n = g.node(i);
    switch (n.kind) {
      case NodeKind::input: break;
      case NodeKind::constant:
      case NodeKind::weight:
        for (int32_t v : n.outputs) is_free[v] = 1;
        break;
      case NodeKind::call:
        throw ValueError("distributed::compile: the traced program calls subgraph '" + n.name +
                         "'; device programs are traced flat");
      case NodeKind::op: {
        int s = 0;
        for (int32_t v : n.inputs) s = std::max(s, stage[v]);
        for (int32_t v : n.outputs) stage[v] = s, by_op[v] = 1;
        c.seg_nodes[s].push_back(static_cast<int32_t>(i));
        for (int32_t v : n.inputs)
          if (by_op[v] && stage[v] < s) needed[v] = 1;
        break;
      }
    }
  }
  for (size_t j = 0; j < K; ++j)
    if (stage[coll_src[j]] > static_cast<int>(j))
      throw ValueError("distributed::compile: collective " + std::to_string(j) +
                       " reads a value computed after it (internal error)");
  for (int32_t v : coll_src) needed[v] = 1;
  for (int32_t v : results) needed[v] = 1;
  for (size_t s = 0; s <= K; ++s) {
    std::set<int32_t> seen_in;
    for (int32_t i : c.seg_nodes[s])
      for (int32_t v : g.node(i).inputs)
        if (!is_free[v] && !(by_op[v] && stage[v] == static_cast<int>(s)) && seen_in.insert(v).second)
          c.inputs[s].push_back(v);
    for (int32_t i : c.seg_nodes[s])
      for (int32_t v : g.node(i).outputs)
        if (needed[v]) c.outputs[s].push_back(v);
  }
  // A constant or weight that is itself a result or a collective's source
  // comes out of segment 0.
  for (int32_t v = 0; v < static_cast<int32_t>(nv); ++v)
    if (is_free[v] && needed[v]) c.outputs[0].push_back(v);
  return c;
}

// The graph of segment s: its inputs, its op nodes (and the constants and
// weights they read), its outputs.
std::shared_ptr<Graph> segment_graph(const Graph& g, const Cut& c, size_t s, const std::string& name) {
  std::vector<TensorType> in_types;
  for (int32_t v : c.inputs[s]) in_types.push_back(g.type(v));
  auto sg = std::make_shared<Graph>(name, in_types);
  std::map<int32_t, GraphValue> map;
  const auto sin = sg->inputs();
  for (size_t i = 0; i < c.inputs[s].size(); ++i) map[c.inputs[s][i]] = sin[i];
  auto value = [&](int32_t v) {
    auto it = map.find(v);
    if (it != map.end()) return it->second;
    const Node& p = g.node(static_cast<size_t>(g.producer(v)));  // a constant or weight
    GraphValue nv = p.kind == NodeKind::constant ? sg->add_constant(p.data, false) : sg->add_weight(p.name, g.type(v));
    return map[v] = nv;
  };
  for (int32_t i : c.seg_nodes[s]) {
    const Node& n = g.node(static_cast<size_t>(i));
    if (n.outputs.size() != 1)
      throw ValueError("distributed::compile: op node with " + std::to_string(n.outputs.size()) + " results");
    std::vector<GraphValue> in;
    for (int32_t v : n.inputs) in.push_back(value(v));
    map[n.outputs[0]] = sg->add_op(n.op, in, n.attrs);
  }
  std::vector<GraphValue> outs;
  for (int32_t v : c.outputs[s]) outs.push_back(value(v));
  sg->output_values(outs);
  return sg;
}

std::vector<Buffer> shared_signal_buffers(const DeviceMesh& mesh, const std::vector<int64_t>& local) {
  if (mesh.size() == 1) return {};
  static std::mutex mu;
  static std::map<std::string, std::vector<Buffer>> by_devices;
  std::string key;
  for (int64_t i : local) key += device_name(mesh.devices()[i]) + ",";
  std::lock_guard<std::mutex> lk(mu);
  auto& b = by_devices[key];
  if (b.empty())
    for (int64_t i : local) {
      b.push_back(Buffer::allocate(64, mesh.devices()[i]));
      std::memset(b.back().data(), 0, 64);
    }
  return b;
}

}  // namespace

DistributedCallable::DistributedCallable(const Fn& fn, std::vector<DistributedLayout> layouts,
                                         DistributedCompileOptions options)
    : in_(std::move(layouts)), name_(options.name) {
  if (in_.empty()) throw ValueError("distributed::compile: the function takes no DistributedTensor argument");
  for (size_t i = 1; i < in_.size(); ++i)
    if (!(in_[i].mapping.mesh() == in_[0].mapping.mesh()))
      throw ValueError("distributed::compile: argument " + std::to_string(i) + " is on " +
                       in_[i].mapping.mesh().str() + ", argument 0 on " + in_[0].mapping.mesh().str() +
                       "; every argument must be on one mesh");
  const DeviceMesh& m = mesh();
  local_ = detail::group_for(m)->local;
  std::vector<std::vector<Collective>> colls;
  for (int64_t d : local_) {
    auto p = std::make_shared<DeviceProgram>();
    p->device = d;
    p->graph = std::make_shared<Graph>(name_ + ".d" + std::to_string(d));
    for (const auto& l : in_) p->graph->add_input(TensorType(l.dtype, l.shard_shape(d), m.devices()[d]));
    std::map<std::string, Tensor> bound;
    detail::ShardTrace tr;
    tr.device = d;
    tr.mesh = &m;
    std::vector<DistributedLayout> outs;
    {
      GraphRealizationContext ctx(*p->graph);
      tr.ctx = &ctx;
      detail::ShardTraceScope scope(tr);
      std::vector<DistributedTensor> args;
      const auto gin = p->graph->inputs();
      for (size_t i = 0; i < in_.size(); ++i) {
        args.push_back(DistributedTensor::from_shards(in_[i], {ctx.create_unrealized({gin[i]})}));
        p->args.push_back(gin[i].id);
      }
      const std::vector<DistributedTensor> res = fn(args);
      if (res.empty()) throw ValueError("distributed::compile: the function returned no DistributedTensor");
      for (size_t j = 0; j < res.size(); ++j) {
        if (!res[j].defined() || !(res[j].mesh() == m))
          throw ValueError("distributed::compile: result " + std::to_string(j) +
                           " is not a DistributedTensor on the arguments' mesh " + m.str());
        outs.push_back(res[j].layout());
        p->results.push_back(ctx.value_of(res[j].shard(d)).id);
      }
      bound = *ctx.bound_weights;
    }
    p->num_values = static_cast<int64_t>(p->graph->num_values());
    std::vector<Collective> cs;
    for (const auto& c : tr.collectives) {
      cs.push_back({c.from, c.to});
      p->coll_src.push_back(c.src);
      p->coll_dst.push_back(c.dst);
    }
    if (out_.empty()) out_ = outs;
    if (!(outs == out_) || (!colls.empty() && !(colls.front().size() == cs.size())))
      throw ValueError("distributed::compile: device " + std::to_string(d) +
                       "'s program has other results or collectives than device " + std::to_string(local_[0]) +
                       "'s (the function must make the same calls on every device)");
    colls.push_back(cs);
    // Cut at the collectives and compile the segments.
    const Cut cut = cut_program(*p->graph, p->coll_src, p->coll_dst, p->results);
    std::map<std::string, Tensor> weights = options.weights;
    for (const auto& [n, t] : bound) weights.emplace(n, t);
    for (size_t s = 0; s < cut.seg_nodes.size(); ++s) {
      Segment seg;
      seg.inputs = cut.inputs[s];
      seg.outputs = cut.outputs[s];
      if (!seg.outputs.empty()) {
        StagedGraph st;
        st.graph = segment_graph(*p->graph, cut, s, name_ + ".d" + std::to_string(d) + ".s" + std::to_string(s));
        for (int32_t v : seg.inputs) st.in_layouts.push_back(p->graph->type(v).layout());
        for (int32_t v : seg.outputs) st.out_layouts.push_back(p->graph->type(v).layout());
        st.in_tree = flat_tree(seg.inputs.size());
        st.out_tree = flat_tree(seg.outputs.size());
        for (const Node& n : st.graph->nodes())
          if (n.kind == NodeKind::weight && !weights.count(n.name))
            throw ValueError("distributed::compile: weight '" + n.name + "' (" + st.graph->type(n.outputs[0]).str() +
                             ", read by device " + std::to_string(d) +
                             ") is missing from the weights registry; a distributed weight takes one entry per "
                             "shard: 'name' for shard 0, 'name.shard.<i>' for shard i (shard_weights())");
        seg.fn = std::make_shared<CompiledCallable>(std::move(st), weights, options.session);
      }
      p->segments.push_back(std::move(seg));
    }
    programs_.push_back(std::move(p));
  }
  for (const auto& cs : colls)
    for (size_t j = 0; j < cs.size(); ++j)
      if (!(cs[j].from == colls[0][j].from) || !(cs[j].to == colls[0][j].to))
        throw ValueError("distributed::compile: the device programs disagree on collective " + std::to_string(j));
  collectives_ = colls.front();
  signal_ = shared_signal_buffers(m, local_);
}

int64_t DistributedCallable::num_segments(int64_t local_index) const {
  if (local_index < 0 || local_index >= static_cast<int64_t>(programs_.size()))
    throw IndexError("DistributedCallable::num_segments: local device index " + std::to_string(local_index) +
                     " is outside [0, " + std::to_string(programs_.size()) + ")");
  int64_t n = 0;
  for (const auto& s : programs_[local_index]->segments) n += s.fn != nullptr;
  return n;
}

std::string DistributedCallable::describe() const {
  std::ostringstream os;
  for (size_t j = 0; j < collectives_.size(); ++j)
    os << "collective " << j << ": " << how(collectives_[j].from, collectives_[j].to) << " "
       << collectives_[j].from.str() << " -> " << collectives_[j].to.str() << "\n";
  return os.str();
}

// ---- running --------------------------------------------------------------------------

std::vector<Tensor> DistributedCallable::run_device(size_t k, Communicator& comm, const std::vector<Tensor>& shards,
                                                    const Buffer& signal, const RunMode& m) const {
  const DeviceProgram& p = *programs_[k];
  const int64_t d = p.device;
  const Device dev = mesh().devices()[d];
  uint64_t* sig = signal ? static_cast<uint64_t*>(signal.data()) : nullptr;
  if (sig) ++sig[0], sig[2] = 0;
  std::vector<Tensor> local_vals;
  std::vector<Tensor>& vals = m.cap ? m.cap->vals[k] : local_vals;
  if (m.kind != RunMode::replay) {
    vals.assign(static_cast<size_t>(p.num_values), Tensor());
    for (size_t i = 0; i < p.args.size(); ++i) vals[p.args[i]] = shards[i].contiguous();
  }
  std::vector<Tensor> ins;
  for (size_t s = 0; s < p.segments.size(); ++s) {
    const Segment& seg = p.segments[s];
    if (seg.fn) {
      ins.clear();
      for (int32_t v : seg.inputs) ins.push_back(vals[v]);
      if (m.kind == RunMode::run) {
        std::vector<Tensor> outs = seg.fn->execute_raw(ins);
        for (size_t j = 0; j < outs.size(); ++j) vals[seg.outputs[j]] = on_device(outs[j], dev);
      } else if (m.kind == RunMode::capture) {
        // A segment that reads no value (weights and constants only) has
        // nothing to capture: it runs once here and replay keeps its results.
        std::vector<Tensor> outs =
            ins.empty() ? seg.fn->execute_raw(ins) : seg.fn->engine_model().capture(m.key, ins);
        for (size_t j = 0; j < outs.size(); ++j) vals[seg.outputs[j]] = on_device(outs[j], dev);
      } else if (!ins.empty()) {
        seg.fn->engine_model().replay(m.key, ins);  // rewrites the captured outputs in place
      }
    }
    if (s + 1 == p.segments.size()) break;
    // Collective s: d's shard of its source into d's shard of its target.
    const Collective& c = collectives_[s];
    const Tensor x = vals[p.coll_src[s]].contiguous();
    Tensor& y = vals[p.coll_dst[s]];
    if (m.kind != RunMode::replay) y = Tensor::empty(c.to.shard_shape(d), c.to.dtype, dev);
    detail::step(comm, d, c.from, x.data_ptr(), c.to, y.data_ptr());
    if (sig) ++sig[2];
  }
  std::vector<Tensor> res;
  for (int32_t v : p.results) res.push_back(vals[v]);
  if (sig) ++sig[1];
  return res;
}

std::vector<std::vector<Tensor>> DistributedCallable::run_all(const std::vector<std::vector<Tensor>>& shards,
                                                              const std::vector<Buffer>& signals,
                                                              const RunMode& m) const {
  const auto group = detail::group_for(mesh());
  if (group->local != local_)
    throw ValueError("DistributedCallable: this process now holds other devices of the mesh than when compiled");
  std::vector<std::vector<Tensor>> res(local_.size());
  try {
    detail::for_each_local(*group, [&](size_t k) {
      res[k] = run_device(k, *group->comms[k], shards[k], k < signals.size() ? signals[k] : Buffer(), m);
    });
  } catch (const CollectiveError& e) {
    if (local_.size() > 1) detail::drop_group(mesh(), group);  // the next call gets a fresh group
    std::string where;
    for (size_t k = 0; k < signals.size(); ++k)
      if (signals[k])
        where += (k ? ", " : "") + device_name(mesh().devices()[local_[k]]) + " completed " +
                 std::to_string(static_cast<const uint64_t*>(signals[k].data())[2]) + " of " +
                 std::to_string(collectives_.size());
    throw CollectiveError(std::string(e.what()) + (where.empty() ? "" : " (collectives: " + where + ")"));
  }
  return res;
}

std::vector<std::vector<Tensor>> DistributedCallable::shards_of(const std::vector<DistributedTensor>& args) const {
  if (args.size() != in_.size())
    throw ValueError("DistributedCallable: expected " + std::to_string(in_.size()) + " arguments, got " +
                     std::to_string(args.size()));
  for (size_t i = 0; i < args.size(); ++i)
    if (!args[i].defined() || !(args[i].layout() == in_[i]))
      throw ValueError("DistributedCallable: argument " + std::to_string(i) + ": expected " + in_[i].str() + ", got " +
                       (args[i].defined() ? args[i].layout().str() : std::string("an undefined tensor")));
  std::vector<std::vector<Tensor>> s(local_.size());
  for (size_t k = 0; k < local_.size(); ++k)
    for (const auto& a : args) s[k].push_back(a.shard(local_[k]));
  return s;
}

std::vector<DistributedTensor> DistributedCallable::wrap_results(std::vector<std::vector<Tensor>> per_device) const {
  std::vector<DistributedTensor> out;
  for (size_t j = 0; j < out_.size(); ++j) {
    std::vector<Tensor> shards;
    for (size_t k = 0; k < local_.size(); ++k) shards.push_back(std::move(per_device[k][j]));
    out.push_back(DistributedTensor::from_shards(out_[j], std::move(shards)));
  }
  return out;
}

std::vector<DistributedTensor> DistributedCallable::call(const std::vector<DistributedTensor>& args) const {
  return wrap_results(run_all(shards_of(args), signal_, RunMode{}));
}

std::vector<Buffer> DistributedCallable::execute_raw(const std::vector<Buffer>& buffers) const {
  const size_t L = local_.size(), want = in_.size() * L + signal_.size();
  if (buffers.size() != want)
    throw ValueError("DistributedCallable::execute_raw: expected " + std::to_string(want) + " buffers (" +
                     std::to_string(in_.size()) + " argument(s) x " + std::to_string(L) + " local shard(s), then " +
                     std::to_string(signal_.size()) + " signal buffer(s)), got " + std::to_string(buffers.size()));
  std::vector<std::vector<Tensor>> shards(L);
  for (size_t i = 0; i < in_.size(); ++i)
    for (size_t k = 0; k < L; ++k) {
      const Shape sh = in_[i].shard_shape(local_[k]);
      shards[k].emplace_back(buffers[i * L + k], in_[i].dtype, sh, contiguous_strides(sh), 0);
    }
  const std::vector<Buffer> sig(buffers.end() - static_cast<std::ptrdiff_t>(signal_.size()), buffers.end());
  for (const Buffer& b : sig)
    if (b.nbytes() < 3 * sizeof(uint64_t))
      throw ValueError("DistributedCallable::execute_raw: a signal buffer of " + std::to_string(b.nbytes()) +
                       " bytes; expected at least 24 (use signal_buffers())");
  const auto res = run_all(shards, sig, RunMode{});
  std::vector<Buffer> out;
  for (size_t j = 0; j < out_.size(); ++j)
    for (size_t k = 0; k < L; ++k) {
      Tensor c = res[k][j].contiguous();
      if (c.offset() != 0 || c.buffer().nbytes() != static_cast<size_t>(c.numel()) * c.itemsize()) c = c.clone();
      out.push_back(c.buffer());
    }
  return out;
}

std::vector<DistributedTensor> DistributedCallable::capture(uint64_t key,
                                                            const std::vector<DistributedTensor>& args) const {
  auto shards = shards_of(args);
  auto cap = std::make_shared<Captured>();
  cap->vals.resize(local_.size());
  for (auto& s : shards)
    for (auto& t : s) t = t.contiguous();  // the buffers replay must be given again
  cap->args = shards;
  auto res = run_all(shards, signal_, RunMode{RunMode::capture, key, cap.get()});
  {
    std::lock_guard<std::mutex> lk(cap_mu_);
    captures_[key] = cap;
  }
  return wrap_results(std::move(res));
}

std::vector<DistributedTensor> DistributedCallable::replay(uint64_t key,
                                                           const std::vector<DistributedTensor>& args) const {
  std::shared_ptr<Captured> cap;
  {
    std::lock_guard<std::mutex> lk(cap_mu_);
    auto it = captures_.find(key);
    if (it == captures_.end())
      throw ValueError("DistributedCallable::replay: no capture under key " + std::to_string(key));
    cap = it->second;
  }
  const auto shards = shards_of(args);
  for (size_t k = 0; k < shards.size(); ++k)
    for (size_t i = 0; i < shards[k].size(); ++i)
      if (shards[k][i].data_ptr() != cap->args[k][i].data_ptr())
        throw ValueError("DistributedCallable::replay: argument " + std::to_string(i) + " shard " +
                         std::to_string(local_[k]) + " is not the buffer captured under key " + std::to_string(key));
  auto res = run_all(shards, signal_, RunMode{RunMode::replay, key, cap.get()});
  return wrap_results(std::move(res));
}

std::vector<std::string> DistributedCallable::export_mef(const std::string& prefix) const {
  const std::string base = prefix.substr(prefix.find_last_of('/') + 1);
  auto device_file = [&](int64_t d) { return base + ".d" + std::to_string(d) + ".plan"; };
  detail::PlanFile plan;
  plan.name = name_;
  plan.mesh = mesh();
  plan.in = in_;
  plan.out = out_;
  for (const auto& c : collectives_) plan.collectives.push_back({c.from, c.to, how(c.from, c.to)});
  for (int64_t d = 0; d < mesh().size(); ++d) plan.device_files.push_back(device_file(d));
  uint32_t crc = 0;
  const std::string text = detail::plan_text(plan, &crc);
  std::vector<std::string> paths{prefix + ".plan"};
  for (const auto& p : programs_) {
    detail::DevicePlanFile dp;
    dp.plan_checksum = crc;
    dp.device = p->device;
    dp.num_values = p->num_values;
    dp.args = p->args;
    dp.results = p->results;
    dp.coll_src = p->coll_src;
    dp.coll_dst = p->coll_dst;
    for (size_t s = 0; s < p->segments.size(); ++s) {
      const Segment& seg = p->segments[s];
      detail::PlanSegment ps{"", seg.inputs, seg.outputs};
      if (seg.fn) {
        ps.file = base + ".d" + std::to_string(p->device) + ".s" + std::to_string(s) + ".mef";
        const std::string path = prefix + ".d" + std::to_string(p->device) + ".s" + std::to_string(s) + ".mef";
        seg.fn->export_mef(path);
        paths.push_back(path);
      }
      dp.segments.push_back(std::move(ps));
    }
    const std::string dpath = prefix + ".d" + std::to_string(p->device) + ".plan";
    detail::write_text_file(dpath, detail::device_plan_text(dp));
    paths.push_back(dpath);
  }
  detail::write_text_file(paths.front(), text);  // last: a complete .plan means complete device files
  return paths;
}

// ---- reading an exported program --------------------------------------------------------

DistributedCallable DistributedCallable::from_mef(const std::string& prefix, std::map<std::string, Tensor> weights,
                                                  std::shared_ptr<InferenceSession> session) {
  return DistributedCallable(FromPlan{}, prefix, weights, session);
}

DistributedCallable::DistributedCallable(FromPlan, const std::string& prefix,
                                         const std::map<std::string, Tensor>& weights,
                                         const std::shared_ptr<InferenceSession>& session) {
  const std::string ppath = prefix + ".plan";
  const detail::PlanFile plan = detail::read_plan(ppath);
  const std::filesystem::path dir = std::filesystem::path(ppath).parent_path();
  auto in_dir = [&](const std::string& f) { return (dir / f).string(); };
  name_ = plan.name;
  in_ = plan.in;
  out_ = plan.out;
  for (const auto& c : plan.collectives) collectives_.push_back({c.from, c.to});
  const DeviceMesh& m = plan.mesh;
  local_ = detail::group_for(m)->local;
  const size_t K = collectives_.size();
  for (int64_t d : local_) {
    const std::string dpath = in_dir(plan.device_files[static_cast<size_t>(d)]);
    const detail::DevicePlanFile dp = detail::read_device_plan(dpath, plan, d);
    auto bad = [&](const std::string& what) {
      throw ValueError("distributed::read: '" + dpath + "': " + what);
    };
    auto p = std::make_shared<DeviceProgram>();
    p->device = d;
    p->num_values = dp.num_values;
    p->args = dp.args;
    p->results = dp.results;
    p->coll_src = dp.coll_src;
    p->coll_dst = dp.coll_dst;
    // Each value's dtype and shard shape, as the program defines them in order.
    std::vector<char> defined(static_cast<size_t>(dp.num_values), 0);
    std::vector<std::pair<DType, Shape>> type(static_cast<size_t>(dp.num_values));
    auto define = [&](int32_t v, DType dt, const Shape& sh, const std::string& what) {
      if (defined[v]) bad(what + " writes value " + std::to_string(v) + ", which is already defined");
      defined[v] = 1;
      type[v] = {dt, sh};
    };
    auto use = [&](int32_t v, DType dt, const Shape& sh, const std::string& what) {
      if (!defined[v]) bad(what + " reads value " + std::to_string(v) + " before anything defines it");
      if (type[v].first != dt || type[v].second != sh)
        bad(what + " reads value " + std::to_string(v) + " as " + std::string(kiln::name(dt)) + " " +
            shape_str(sh) + ", but it is " + std::string(kiln::name(type[v].first)) + " " + shape_str(type[v].second));
    };
    for (size_t i = 0; i < in_.size(); ++i)
      define(dp.args[i], in_[i].dtype, in_[i].shard_shape(d), "argument " + std::to_string(i));
    for (size_t s = 0; s <= K; ++s) {
      const detail::PlanSegment& ps = dp.segments[s];
      Segment seg;
      seg.inputs = ps.inputs;
      seg.outputs = ps.outputs;
      if (!ps.file.empty()) {
        const std::string seg_what = "segment " + std::to_string(s) + " ('" + ps.file + "')";
        // Each segment reads some of the program's weights: it gets those
        // its file lists (CompiledCallable::from_mef refuses names a file
        // does not list).
        std::map<std::string, Tensor> mine;
        const auto art = engine::read(in_dir(ps.file), session);
        for (const auto& [name, type] : art->weight_slots())
          if (auto w = weights.find(name); w != weights.end()) mine.emplace(name, w->second);
        seg.fn = std::make_shared<CompiledCallable>(CompiledCallable::from_mef(in_dir(ps.file), mine, session));
        const auto& il = seg.fn->in_layouts();
        const auto& ol = seg.fn->out_layouts();
        if (il.size() != ps.inputs.size() || ol.size() != ps.outputs.size())
          bad(seg_what + " takes " + std::to_string(il.size()) + " input(s) and gives " + std::to_string(ol.size()) +
              " result(s); the plan wires " + std::to_string(ps.inputs.size()) + " and " +
              std::to_string(ps.outputs.size()));
        for (size_t i = 0; i < il.size(); ++i) use(ps.inputs[i], il[i].dtype, il[i].shape, seg_what + " input " + std::to_string(i));
        for (size_t j = 0; j < ol.size(); ++j) define(ps.outputs[j], ol[j].dtype, ol[j].shape, seg_what);
      }
      p->segments.push_back(std::move(seg));
      if (s == K) break;
      const Collective& c = collectives_[s];
      use(dp.coll_src[s], c.from.dtype, c.from.shard_shape(d), "collective " + std::to_string(s));
      define(dp.coll_dst[s], c.to.dtype, c.to.shard_shape(d), "collective " + std::to_string(s));
    }
    for (size_t j = 0; j < out_.size(); ++j)
      use(dp.results[j], out_[j].dtype, out_[j].shard_shape(d), "result " + std::to_string(j));
    programs_.push_back(std::move(p));
  }
  signal_ = shared_signal_buffers(m, local_);
}

}  // namespace kiln::distributed
