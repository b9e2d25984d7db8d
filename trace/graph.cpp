#include "graph.h"

#include <bit>
#include <cstring>
#include <ostream>
#include <sstream>

namespace kiln {

std::string TensorType::str() const { return std::string(name(dtype)) + shape_str(shape) + " " + device.str(); }

const TensorType& GraphValue::type() const {
  if (!graph) throw ValueError("GraphValue: null value");
  return graph->type(id);
}

Graph::Graph(std::string name, std::vector<TensorType> input_types) : name_(std::move(name)) {
  for (auto& t : input_types) add_input(t);
}

int32_t Graph::new_value(const TensorType& t, int32_t producer_node) {
  return new_value_of_type(add_type(t), producer_node);
}

uint32_t Graph::add_type(TensorType t) {
  if (type_table_.size() >= UINT32_MAX) throw ValueError("Graph: too many value types");
  type_table_.push_back(std::move(t));
  return static_cast<uint32_t>(type_table_.size() - 1);
}

int32_t Graph::new_value_of_type(uint32_t type_index, int32_t producer_node) {
  if (type_index >= type_table_.size()) throw ValueError("Graph::new_value_of_type: no type " + std::to_string(type_index));
  if (value_type_.size() >= static_cast<size_t>(INT32_MAX)) throw ValueError("Graph: too many values");
  value_type_.push_back(type_index);
  producer_.push_back(producer_node);
  return static_cast<int32_t>(value_type_.size() - 1);
}

void Graph::reserve_values(size_t n) {
  value_type_.reserve(n);
  producer_.reserve(n);
}

int32_t Graph::push_node(Node n, const std::vector<TensorType>& out_types) {
  const int32_t idx = static_cast<int32_t>(nodes_.size());
  n.outputs.clear();
  for (const auto& t : out_types) n.outputs.push_back(new_value(t, idx));
  nodes_.push_back(std::move(n));
  return idx;
}

GraphValue Graph::add_input(const TensorType& t) {
  Node n;
  n.kind = NodeKind::input;
  int32_t idx = push_node(std::move(n), {t});
  inputs_.push_back(nodes_[idx].outputs[0]);
  return {this, nodes_[idx].outputs[0]};
}

std::vector<GraphValue> Graph::inputs() const {
  std::vector<GraphValue> r;
  for (int32_t v : inputs_) r.push_back({const_cast<Graph*>(this), v});
  return r;
}

std::vector<GraphValue> Graph::outputs() const {
  std::vector<GraphValue> r;
  for (int32_t v : outputs_) r.push_back({const_cast<Graph*>(this), v});
  return r;
}

void Graph::output_values(const std::vector<GraphValue>& vs) {
  outputs_.clear();
  for (size_t i = 0; i < vs.size(); ++i) {
    if (vs[i].graph != this)
      throw ValueError("Graph::output: result " + std::to_string(i) + " is a value of another graph, not of '" +
                       name_ + "'");
    outputs_.push_back(vs[i].id);
  }
}

namespace {
void check_value(const Graph& g, const GraphValue& v, const std::string& what) {
  if (v.graph != &g)
    throw ValueError(what + ": operand is a value of " + (v.graph ? "graph '" + v.graph->name() + "'" : "no graph") +
                     ", not of graph '" + g.name() + "' (a body cannot read a value of its parent graph)");
}
}  // namespace

GraphValue Graph::add_op(OpId op, std::span<const GraphValue> in, const Attrs& attrs) {
  std::vector<TensorLayout> layouts;
  layouts.reserve(in.size());
  Node n;
  n.kind = NodeKind::op;
  n.op = op;
  n.attrs = attrs;
  for (const auto& v : in) {
    check_value(*this, v, std::string(op_name(op)));
    layouts.push_back(type(v.id).layout());
    n.inputs.push_back(v.id);
  }
  TensorType out(infer_layout(op, layouts, attrs));
  int32_t idx = push_node(std::move(n), {out});
  return {this, nodes_[idx].outputs[0]};
}

GraphValue Graph::add_constant(const Tensor& data, bool copy) {
  if (!data.is_realized()) throw ValueError("Graph::add_constant: the tensor must be realized");
  Node n;
  n.kind = NodeKind::constant;
  n.data = data.contiguous();
  if (copy && n.data.is_same(data)) n.data = data.clone();
  int32_t idx = push_node(std::move(n), {TensorType(data.dtype(), data.shape(), data.device())});
  return {this, nodes_[idx].outputs[0]};
}

GraphValue Graph::add_weight(const std::string& wname, const TensorType& t, bool placeholder) {
  if (wname.empty()) throw ValueError("Graph::add_weight: a weight needs a name");
  auto it = weights_.find(wname);
  if (it != weights_.end()) {
    if (!(type(it->second) == t))
      throw ValueError("Graph::add_weight: weight '" + wname + "' already has type " + type(it->second).str() +
                       ", not " + t.str());
    return {this, it->second};
  }
  Node n;
  n.kind = NodeKind::weight;
  n.name = wname;
  n.placeholder = placeholder;
  int32_t idx = push_node(std::move(n), {t});
  weights_[wname] = nodes_[idx].outputs[0];
  return {this, nodes_[idx].outputs[0]};
}

std::vector<GraphValue> Graph::add_call(const std::string& callee, std::span<const GraphValue> in,
                                        const std::string& prefix) {
  const Graph* body = root()->subgraph(callee);
  if (!body) throw ValueError("Graph::add_call: no subgraph named '" + callee + "'");
  if (body->inputs_.size() != in.size())
    throw ValueError("Graph::add_call: @" + callee + " takes " + std::to_string(body->inputs_.size()) +
                     " arguments, got " + std::to_string(in.size()));
  Node n;
  n.kind = NodeKind::call;
  n.name = callee;
  n.prefix = prefix;
  for (size_t i = 0; i < in.size(); ++i) {
    check_value(*this, in[i], "call @" + callee);
    if (!(type(in[i].id) == body->type(body->inputs_[i])))
      throw ValueError("Graph::add_call: argument " + std::to_string(i) + " of @" + callee + " has type " +
                       type(in[i].id).str() + ", expected " + body->type(body->inputs_[i]).str());
    n.inputs.push_back(in[i].id);
  }
  std::vector<TensorType> outs;
  for (int32_t o : body->outputs_) outs.push_back(body->type(o));
  int32_t idx = push_node(std::move(n), outs);
  std::vector<GraphValue> r;
  for (int32_t v : nodes_[idx].outputs) r.push_back({this, v});
  return r;
}

Graph& Graph::define_subgraph(const std::string& sname, std::vector<TensorType> input_types) {
  Graph* r = root();
  if (sname == r->name_ || r->subgraphs_.count(sname))
    throw ValueError("Graph::define_subgraph: the name '" + sname + "' is already taken");
  auto g = std::make_unique<Graph>(sname, std::move(input_types));
  g->root_ = r;
  Graph& ref = *g;
  r->subgraphs_[sname] = std::move(g);
  return ref;
}

std::string Graph::unique_subgraph_name(const std::string& base) const {
  const Graph* r = root();
  auto taken = [&](const std::string& s) { return s == r->name_ || r->subgraphs_.count(s); };
  if (!taken(base)) return base;
  for (int i = 1;; ++i)
    if (!taken(base + "_" + std::to_string(i))) return base + "_" + std::to_string(i);
}

const Graph* Graph::subgraph(const std::string& s) const {
  const Graph* r = root();
  auto it = r->subgraphs_.find(s);
  return it == r->subgraphs_.end() ? nullptr : it->second.get();
}
Graph* Graph::subgraph(const std::string& s) {
  Graph* r = root();
  auto it = r->subgraphs_.find(s);
  return it == r->subgraphs_.end() ? nullptr : it->second.get();
}
void Graph::remove_subgraph(const std::string& s) { root()->subgraphs_.erase(s); }

std::map<std::string, int> Graph::op_counts() const {
  std::map<std::string, int> c;
  for (const auto& n : nodes_) {
    if (n.kind == NodeKind::op) ++c[std::string(op_name(n.op))];
    else if (n.kind == NodeKind::call) ++c["call"];
  }
  return c;
}

void Graph::verify() const {
  auto fail = [&](size_t i, const std::string& msg) {
    throw ValueError("verify: graph '" + name_ + "' node " + std::to_string(i) + ": " + msg);
  };
  const size_t nv = value_type_.size();
  std::vector<char> defined(nv, 0);
  std::vector<TensorLayout> in;  // an op node's input layouts (reused: shapes keep their capacity)
  for (size_t i = 0; i < nodes_.size(); ++i) {
    const Node& n = nodes_[i];
    for (int32_t v : n.inputs) {
      if (v < 0 || static_cast<size_t>(v) >= nv) fail(i, "uses unknown value %" + std::to_string(v));
      if (!defined[v]) fail(i, "uses %" + std::to_string(v) + " before it is defined");
    }
    for (int32_t v : n.outputs) {
      if (v < 0 || static_cast<size_t>(v) >= nv) fail(i, "defines unknown value %" + std::to_string(v));
      if (defined[v]) fail(i, "defines %" + std::to_string(v) + " twice");
      if (producer_[v] != static_cast<int32_t>(i)) fail(i, "value %" + std::to_string(v) + " has a wrong producer");
      defined[v] = 1;
    }
    switch (n.kind) {
      case NodeKind::op: {
        if (n.outputs.size() != 1) fail(i, "an op node defines exactly one value");
        in.resize(n.inputs.size());
        for (size_t k = 0; k < n.inputs.size(); ++k) type(n.inputs[k]).layout_into(in[k]);
        TensorLayout want;
        try {
          want = infer_layout(n.op, in, n.attrs);
        } catch (const Error& e) {
          fail(i, std::string("invalid op: ") + e.what());
        }
        const TensorType& got = type(n.outputs[0]);
        if (want.dtype != got.dtype || want.shape != got.shape || !(want.device == got.device))
          fail(i, std::string(op_name(n.op)) + " result type " + got.str() + " but the op gives " +
                      TensorType(want).str());
        break;
      }
      case NodeKind::constant:
        if (!n.data.defined() || n.outputs.size() != 1) fail(i, "constant without data");
        if (!(TensorType(n.data.dtype(), n.data.shape(), n.data.device()) == type(n.outputs[0])))
          fail(i, "constant data does not match its type");
        break;
      case NodeKind::weight:
        if (n.name.empty() || n.outputs.size() != 1) fail(i, "weight without a name");
        break;
      case NodeKind::input:
        if (!n.inputs.empty() || n.outputs.size() != 1) fail(i, "malformed input node");
        break;
      case NodeKind::call: {
        const Graph* body = subgraph(n.name);
        if (!body) fail(i, "calls unknown subgraph @" + n.name);
        if (body->inputs_.size() != n.inputs.size() || body->outputs_.size() != n.outputs.size())
          fail(i, "call of @" + n.name + " does not match its signature");
        for (size_t k = 0; k < n.inputs.size(); ++k)
          if (!(type(n.inputs[k]) == body->type(body->inputs_[k]))) fail(i, "argument type mismatch calling @" + n.name);
        for (size_t k = 0; k < n.outputs.size(); ++k)
          if (!(type(n.outputs[k]) == body->type(body->outputs_[k]))) fail(i, "result type mismatch calling @" + n.name);
        break;
      }
    }
  }
  for (int32_t v : outputs_)
    if (v < 0 || static_cast<size_t>(v) >= nv || !defined[v])
      throw ValueError("verify: graph '" + name_ + "' returns undefined value %" + std::to_string(v));
  if (!root_)
    for (const auto& [k, g] : subgraphs_) g->verify();
}

namespace {
// Attrs equality with the scalar compared bit by bit: a NaN attribute equals
// itself (Attrs::operator== would say a graph with one differs from itself),
// and -0.0 differs from 0.0.
bool same_attrs_bits(const Attrs& a, const Attrs& b) {
  return a.ints == b.ints && a.axis == b.axis && std::bit_cast<uint64_t>(a.scalar) == std::bit_cast<uint64_t>(b.scalar) &&
         a.flag == b.flag && a.dtype == b.dtype;
}
}  // namespace

bool Graph::equals(const Graph& o) const {
  if (name_ != o.name_ || num_values() != o.num_values() || inputs_ != o.inputs_ || outputs_ != o.outputs_ ||
      nodes_.size() != o.nodes_.size() || subgraphs_.size() != o.subgraphs_.size())
    return false;
  for (size_t v = 0; v < num_values(); ++v)
    if (!(type(static_cast<int32_t>(v)) == o.type(static_cast<int32_t>(v)))) return false;
  for (size_t i = 0; i < nodes_.size(); ++i) {
    const Node &a = nodes_[i], &b = o.nodes_[i];
    if (a.kind != b.kind || a.inputs != b.inputs || a.outputs != b.outputs || a.name != b.name ||
        a.prefix != b.prefix || a.placeholder != b.placeholder)
      return false;
    if (a.kind == NodeKind::op && (a.op != b.op || !same_attrs_bits(a.attrs, b.attrs))) return false;
    if (a.kind == NodeKind::constant) {
      size_t nb = static_cast<size_t>(a.data.numel()) * a.data.itemsize();
      if (a.data.dtype() != b.data.dtype() || a.data.shape() != b.data.shape() ||
          std::memcmp(a.data.data_ptr(), b.data.data_ptr(), nb) != 0)
        return false;
    }
  }
  for (const auto& [k, g] : subgraphs_) {
    auto it = o.subgraphs_.find(k);
    if (it == o.subgraphs_.end() || !g->equals(*it->second)) return false;
  }
  return true;
}

void Graph::rebuild(std::vector<Node> nodes, std::vector<int32_t> outputs) {
  renumber(nodes, nullptr, std::move(outputs));
}

void Graph::remove_nodes(const std::vector<char>& removed, std::vector<int32_t> outputs) {
  if (removed.size() != nodes_.size()) throw ValueError("Graph::remove_nodes: one flag per node is needed");
  renumber(nodes_, &removed, std::move(outputs));
}

void Graph::renumber(std::vector<Node>& nodes, const std::vector<char>* removed, std::vector<int32_t> outputs) {
  // One walk drops the removed nodes (moving the others down), renumbers the
  // operands and records, per surviving value, its old id. The values' type
  // indices then move (the type table stays): in place when the old ids of
  // the survivors increase (always, for graphs built by add_* and edited by
  // the passes), else into a new array.
  const size_t nv = value_type_.size();
  std::vector<int32_t> remap(nv, -1);
  std::vector<int32_t> old_id;  // per new value
  old_id.reserve(nv);
  std::vector<int32_t> producer;
  producer.reserve(nv);
  std::vector<int32_t> new_inputs;
  std::vector<size_t> weight_nodes;
  bool increasing = true;
  size_t out = 0;  // the next kept node's index
  for (size_t i = 0; i < nodes.size(); ++i) {
    if (removed && (*removed)[i]) continue;
    if (out != i) nodes[out] = std::move(nodes[i]);
    Node& n = nodes[out];
    for (int32_t& v : n.inputs) {
      if (remap.at(v) < 0) throw ValueError("Graph::rebuild: node uses a value defined later or removed");
      v = remap[v];
    }
    for (int32_t& v : n.outputs) {
      (void)value_type_.at(v);  // range check, as before
      if (!old_id.empty() && v <= old_id.back()) increasing = false;
      old_id.push_back(v);
      producer.push_back(static_cast<int32_t>(out));
      remap[v] = static_cast<int32_t>(old_id.size() - 1);
      v = remap[v];
    }
    if (n.kind == NodeKind::input) new_inputs.push_back(n.outputs[0]);
    else if (n.kind == NodeKind::weight) weight_nodes.push_back(out);
    ++out;
  }
  for (int32_t& v : outputs) {
    if (remap.at(v) < 0) throw ValueError("Graph::rebuild: an output was removed");
    v = remap[v];
  }
  nodes.resize(out);  // frees the removed nodes
  const size_t kept = old_id.size();
  if (increasing) {
    // old_id[k] >= k and strictly increasing: slot old_id[k] is read before
    // any later write can reach it.
    for (size_t k = 0; k < kept; ++k) value_type_[k] = value_type_[static_cast<size_t>(old_id[k])];
    value_type_.resize(kept);
  } else {
    // A value defined twice (not a valid graph) shares its type entry.
    std::vector<uint32_t> types;
    types.reserve(kept);
    for (int32_t v : old_id) types.push_back(value_type_[static_cast<size_t>(v)]);
    value_type_ = std::move(types);
  }
  weights_.clear();
  for (size_t i : weight_nodes) weights_[nodes[i].name] = nodes[i].outputs[0];
  if (&nodes != &nodes_) nodes_ = std::move(nodes);
  producer_ = std::move(producer);
  inputs_ = std::move(new_inputs);
  outputs_ = std::move(outputs);
}

std::ostream& operator<<(std::ostream& os, const Graph& g) { return os << g.to_text(); }

}  // namespace kiln
