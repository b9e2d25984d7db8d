// The GRPB section (format and checks in mef_graph.h).
#include "mef_graph.h"

#include <cstring>
#include <span>
#include <map>
#include <tuple>
#include <unordered_map>

#include "mef_io.h"

namespace kiln::mef {

using namespace io;

namespace {

enum : uint8_t { kOp = 1, kConstant = 2, kWeight = 3 };
enum : uint8_t { kInts = 1, kAxis = 2, kScalar = 4, kFlag = 8, kDType = 16 };

}  // namespace

std::string encode_graph_binary(const Graph& g) {
  if (!g.subgraphs().empty()) return {};
  // value ids as Graph::parse numbers them: the inputs, then one per node
  std::vector<int32_t> id(g.num_values(), -1);
  int32_t next = 0;
  for (int32_t v : g.input_ids()) id[static_cast<size_t>(v)] = next++;
  // the type table and the op-name table
  std::map<std::tuple<uint8_t, uint8_t, int, Shape>, uint32_t> type_index;
  std::string types;
  uint32_t ntypes = 0;
  auto type_of = [&](int32_t v) {
    const TensorType& t = g.type(v);
    auto [it, added] = type_index.emplace(
        std::make_tuple(static_cast<uint8_t>(t.dtype), static_cast<uint8_t>(t.device.type), t.device.index, t.shape),
        ntypes);
    if (added) {
      put_type(types, t.dtype, t.device, t.shape);
      ++ntypes;
    }
    return it->second;
  };
  std::unordered_map<int, uint32_t> op_index;
  std::string ops;
  uint32_t nops = 0;
  std::string inputs;
  put_u32(inputs, static_cast<uint32_t>(g.input_ids().size()));
  for (int32_t v : g.input_ids()) put_u32(inputs, type_of(v));
  std::string body;
  uint32_t nnodes = 0;
  const Attrs def;
  for (const Node& n : g.nodes()) {
    if (n.kind == NodeKind::input) continue;
    if (n.outputs.size() != 1) return {};
    switch (n.kind) {
      case NodeKind::op: {
        put_u8(body, kOp);
        auto [it, added] = op_index.emplace(static_cast<int>(n.op), nops);
        if (added) {
          put_str(ops, op_name(n.op));
          ++nops;
        }
        put_u32(body, it->second);
        put_u32(body, static_cast<uint32_t>(n.inputs.size()));
        for (int32_t v : n.inputs) {
          if (v < 0 || static_cast<size_t>(v) >= id.size() || id[static_cast<size_t>(v)] < 0) return {};
          put_u32(body, static_cast<uint32_t>(id[static_cast<size_t>(v)]));
        }
        const Attrs& a = n.attrs;
        const uint8_t mask = (a.ints.empty() ? 0 : kInts) | (a.axis != def.axis ? kAxis : 0) |
                             (std::memcmp(&a.scalar, &def.scalar, sizeof(double)) != 0 ? kScalar : 0) |
                             (a.flag != def.flag ? kFlag : 0) | (a.dtype != def.dtype ? kDType : 0);
        put_u8(body, mask);
        if (mask & kInts) {
          put_u32(body, static_cast<uint32_t>(a.ints.size()));
          for (int64_t x : a.ints) put_i64(body, x);
        }
        if (mask & kAxis) put_i64(body, a.axis);
        if (mask & kScalar) {
          uint64_t b;
          std::memcpy(&b, &a.scalar, 8);
          put_u64(body, b);
        }
        if (mask & kDType) put_u8(body, static_cast<uint8_t>(a.dtype));
        put_u32(body, type_of(n.outputs[0]));
        break;
      }
      case NodeKind::constant: {
        const TensorType& t = g.type(n.outputs[0]);
        if (!n.data.defined() || t.device.type != DeviceType::cpu || n.data.device().type != DeviceType::cpu) return {};
        put_u8(body, kConstant);
        put_u32(body, type_of(n.outputs[0]));
        const size_t nb = static_cast<size_t>(n.data.numel()) * n.data.itemsize();
        if (nb != static_cast<size_t>(t.layout().numel()) * size_of(t.dtype)) return {};
        body.append(static_cast<const char*>(n.data.data_ptr()), nb);
        break;
      }
      case NodeKind::weight:
        put_u8(body, kWeight);
        put_str(body, n.name);
        put_u8(body, n.placeholder ? 1 : 0);
        put_u32(body, type_of(n.outputs[0]));
        break;
      default:
        return {};  // a call: not a flat graph
    }
    id[static_cast<size_t>(n.outputs[0])] = next++;
    ++nnodes;
  }
  uint64_t pool = 0;  // the constants on cpu:0, each rounded up to 64 bytes
  for (const Node& n : g.nodes())
    if (n.kind == NodeKind::constant && g.type(n.outputs[0]).device == Device::cpu())
      pool += (static_cast<uint64_t>(n.data.numel()) * n.data.itemsize() + 63) / 64 * 64;
  std::string o;
  put_u32(o, kGraphLayoutVersion);
  put_str(o, g.name());
  put_u32(o, nops);
  o += ops;
  put_u32(o, ntypes);
  o += types;
  o += inputs;
  put_u32(o, nnodes);
  put_u64(o, pool);
  o += body;
  put_u32(o, static_cast<uint32_t>(g.output_ids().size()));
  for (int32_t v : g.output_ids()) {
    if (v < 0 || static_cast<size_t>(v) >= id.size() || id[static_cast<size_t>(v)] < 0) return {};
    put_u32(o, static_cast<uint32_t>(id[static_cast<size_t>(v)]));
  }
  return o;
}

uint32_t graph_binary_layout(std::string_view payload) {
  return payload.size() < 4 ? 0 : get_u32_at(payload, 0);
}

namespace {

// The type check of op nodes (Graph::verify's: the result type is what
// infer_layout gives for the operands' types), run once per distinct
// (op, attributes, operand types): infer_layout is a pure function of them,
// and a graph repeats few of them (a 1,000-node graph of 250 rounds has 4).
// The key is the op name index, the operand type indices and the
// attributes' encoded bytes (one canonical encoding per Attrs value).
class TypeCheck {
 public:
  // The result type index `result` of a node with this key is right (else
  // throws). `key` is padded with zero bytes to a multiple of 8 (its
  // length without them is `len`).
  template <class Fail>
  void check(std::string_view key, size_t len, OpId op, std::span<const uint32_t> operands, const Attrs& attrs,
             uint32_t result, const std::vector<TensorType>& types, Fail&& fail) {
    // the keys met last first (a graph repeats a few in a cycle), then the table
    int found = -1;
    for (int i = 0; i < kRecent && found < 0; ++i)
      if (recent_[i] > 0 && same(entries_[recent_[i] - 1], key, len)) found = static_cast<int>(recent_[i] - 1);
    uint64_t h = 0;
    if (found < 0) {
      h = hash(key);
      for (size_t slot = static_cast<size_t>(h) & mask_; !slots_.empty() && slots_[slot] != 0; slot = (slot + 1) & mask_)
        if (entries_[slots_[slot] - 1].hash == h && same(entries_[slots_[slot] - 1], key, len)) {
          found = static_cast<int>(slots_[slot] - 1);
          remember(slots_[slot]);
          break;
        }
    }
    if (found >= 0) {
      const uint32_t r = entries_[static_cast<size_t>(found)].result;
      if (r != result && !(types[r] == types[result]))
        fail(std::string(op_name(op)) + " result type " + types[result].str() + " but the op gives " + types[r].str());
      return;
    }
    in_.resize(operands.size());
    for (size_t k = 0; k < operands.size(); ++k) types[operands[k]].layout_into(in_[k]);
    TensorLayout want;
    try {
      want = infer_layout(op, in_, attrs);
    } catch (const Error& e) {
      fail(std::string("invalid op: ") + e.what());
    }
    const TensorType& got = types[result];
    if (want.dtype != got.dtype || want.shape != got.shape || !(want.device == got.device))
      fail(std::string(op_name(op)) + " result type " + got.str() + " but the op gives " + TensorType(want).str());
    insert(key, len, h, result);
  }

 private:
  // The keys seen, in an open-addressing table of entry indices (+1; 0 is
  // free) at most half full, and the last few met: a lookup compares a few
  // words, no string built or allocated per node.
  struct Entry {
    uint64_t hash;
    uint32_t off, len, result;
  };
  static constexpr int kRecent = 4;
  bool same(const Entry& e, std::string_view key, size_t len) const {
    if (e.len != len) return false;
    const char* a = keys_.data() + e.off;
    for (size_t i = 0; i < key.size(); i += 8) {
      uint64_t x, y;
      std::memcpy(&x, a + i, 8);
      std::memcpy(&y, key.data() + i, 8);
      if (x != y) return false;
    }
    return true;
  }
  static uint64_t hash(std::string_view k) {  // k.size() % 8 == 0
    uint64_t h = 0x9e3779b97f4a7c15ull;
    for (size_t i = 0; i < k.size(); i += 8) {
      uint64_t w;
      std::memcpy(&w, k.data() + i, 8);
      h = (h ^ w) * 0xff51afd7ed558ccdull;
      h ^= h >> 32;
    }
    return h;
  }
  void remember(uint32_t index) {
    for (int i = kRecent - 1; i > 0; --i) recent_[i] = recent_[i - 1];
    recent_[0] = index;
  }
  void insert(std::string_view key, size_t len, uint64_t h, uint32_t result) {
    if (keys_.size() + key.size() > UINT32_MAX) return;  // (not remembered: checked again when met again)
    if (2 * (entries_.size() + 1) > slots_.size()) {
      slots_.assign(slots_.empty() ? 16 : 2 * slots_.size(), 0);
      mask_ = slots_.size() - 1;
      for (size_t i = 0; i < entries_.size(); ++i) place(entries_[i].hash, static_cast<uint32_t>(i + 1));
    }
    entries_.push_back({h, static_cast<uint32_t>(keys_.size()), static_cast<uint32_t>(len), result});
    keys_.append(key);
    place(h, static_cast<uint32_t>(entries_.size()));
    remember(static_cast<uint32_t>(entries_.size()));
  }
  void place(uint64_t h, uint32_t index) {
    size_t slot = static_cast<size_t>(h) & mask_;
    while (slots_[slot] != 0) slot = (slot + 1) & mask_;
    slots_[slot] = index;
  }
  std::vector<TensorLayout> in_;
  std::vector<Entry> entries_;
  std::string keys_;
  std::vector<uint32_t> slots_;
  size_t mask_ = 0;
  uint32_t recent_[kRecent] = {};
};

}  // namespace

std::shared_ptr<Graph> decode_graph_binary(std::string_view payload, const std::string& what) {
  Cursor c{payload, 0, "GRPB", what};
  {
    const size_t at = c.pos;
    const uint32_t version = c.u32("the layout version");
    if (version != kGraphLayoutVersion)
      c.bad_at(at, "layout version " + std::to_string(version) + " (this kiln reads " +
                       std::to_string(kGraphLayoutVersion) + ")");
  }
  const size_t name_at = c.pos;
  std::string name(c.str_view("the graph name"));
  // what Graph::parse accepts as a name, so the text form reads back
  if (name.empty()) c.bad_at(name_at, "an empty graph name");
  for (char ch : name)
    if (!((ch >= '0' && ch <= '9') || (ch >= 'a' && ch <= 'z') || (ch >= 'A' && ch <= 'Z') || ch == '_' || ch == '.' ||
          ch == ':' || ch == '-'))
      c.bad_at(name_at, "the graph name has a character other than letters, digits and _ . : -");
  // op names
  const uint32_t nop = c.count("the op name count", 4);
  std::vector<OpId> ops(nop);
  for (OpId& op : ops) {
    const size_t at = c.pos;
    const std::string_view s = c.str_view("an op name");
    try {
      op = op_from_name(s);
    } catch (const Error&) {
      c.bad_at(at, "unknown op '" + std::string(s.substr(0, 40)) + "'");
    }
  }
  // types
  const uint32_t nt = c.count("the type count", 10);
  std::vector<TensorType> types(nt);
  for (TensorType& t : types) {
    t.dtype = c.dtype();
    t.device = c.device();
    t.shape = c.shape();
  }
  auto type_index = [&](const char* field) {
    const size_t at = c.pos;
    const uint32_t i = c.u32(field);
    if (i >= nt)
      c.bad_at(at, std::string(field) + " " + std::to_string(i) + " is out of range (" + std::to_string(nt) + " types)");
    return i;
  };
  // inputs
  const uint32_t ni = c.count("the input count", 4);
  std::vector<uint32_t> vtype;  // per value: its type's index in `types`
  std::vector<TensorType> in_types;
  in_types.reserve(ni);
  for (uint32_t i = 0; i < ni; ++i) {
    vtype.push_back(type_index("an input's type"));
    in_types.push_back(types[vtype.back()]);
  }
  auto g = std::make_shared<Graph>(std::move(name), std::move(in_types));
  // nodes: each defines the next value
  const uint32_t nn = c.count("the node count", 5);
  std::vector<Node>& nodes = g->mutable_nodes();
  nodes.reserve(static_cast<size_t>(ni) + nn);
  vtype.reserve(static_cast<size_t>(ni) + nn);
  g->reserve_values(static_cast<size_t>(ni) + nn);
  // The graph's values share the section's type table (one shape each, not
  // one per value): gtype[t] is type t's entry in the graph's table.
  std::vector<uint32_t> gtype(nt);
  for (uint32_t t = 0; t < nt; ++t) gtype[t] = g->add_type(types[t]);
  auto value = [&](const char* field) {
    const size_t at = c.pos;
    const uint32_t v = c.u32(field);
    if (v >= vtype.size())
      c.bad_at(at, std::string(field) + " %" + std::to_string(v) + " is not an earlier value (" +
                       std::to_string(vtype.size()) + " are defined)");
    return static_cast<int32_t>(v);
  };
  // One buffer for the constants on cpu:0 (each at a multiple of 64 bytes,
  // as Buffer::allocate aligns), instead of an allocation per constant.
  const size_t pool_at = c.pos;
  const uint64_t pool_bytes = c.u64("the constant pool size");
  if (pool_bytes > c.left() + 64 * static_cast<uint64_t>(nn))
    c.bad_at(pool_at, "a constant pool of " + std::to_string(pool_bytes) + " bytes for " + std::to_string(c.left()) +
                          " bytes of nodes");
  Buffer pool;
  if (pool_bytes) {
    try {
      pool = Buffer::allocate(static_cast<size_t>(pool_bytes));
    } catch (const Error& e) {
      c.bad_at(pool_at, "a constant pool of " + std::to_string(pool_bytes) + " bytes: " + e.what());
    }
  }
  uint64_t pool_used = 0;
  TypeCheck check;
  std::string key;                 // reused
  std::vector<uint32_t> operand_types;  // reused
  for (uint32_t k = 0; k < nn; ++k) {
    const size_t at = c.pos;
    const uint8_t kind = c.u8("a node's kind");
    if (kind == kWeight) {
      const size_t nat = c.pos;
      const std::string_view wname = c.str_view("a weight's name");
      if (wname.empty()) c.bad_at(nat, "a weight without a name");
      if (wname.find('\n') != std::string_view::npos) c.bad_at(nat, "a weight name with a line break");
      const size_t pat = c.pos;
      const uint8_t placeholder = c.u8("a weight's placeholder flag");
      if (placeholder > 1) c.bad_at(pat, "a weight's placeholder flag " + std::to_string(placeholder) + " is not 0 or 1");
      const uint32_t t = type_index("a weight's type");
      const std::string wn(wname);
      GraphValue gv;
      try {
        gv = g->add_weight(wn, types[t], placeholder != 0);
      } catch (const Error&) {
        c.bad_at(nat, "weight '" + wn.substr(0, 60) + "' is defined twice");
      }
      if (static_cast<size_t>(gv.id) != vtype.size()) c.bad_at(nat, "weight '" + wn.substr(0, 60) + "' is defined twice");
      vtype.push_back(t);
      continue;
    }
    // built in place (the node a failed read leaves goes with the graph)
    const int32_t idx = static_cast<int32_t>(nodes.size());
    Node& n = nodes.emplace_back();
    uint32_t t = 0;
    if (kind == kOp) {
      n.kind = NodeKind::op;
      const size_t oat = c.pos;
      const uint32_t oi = c.u32("an op node's op");
      if (oi >= nop) c.bad_at(oat, "op name " + std::to_string(oi) + " is out of range (" + std::to_string(nop) + " names)");
      n.op = ops[oi];
      const uint32_t m = c.count("an op node's operand count", 4);
      n.inputs.reserve(m);
      operand_types.clear();
      for (uint32_t j = 0; j < m; ++j) {
        n.inputs.push_back(value("an operand"));
        operand_types.push_back(vtype[static_cast<size_t>(n.inputs.back())]);
      }
      const size_t mat = c.pos;
      const uint8_t mask = c.u8("an op node's attribute mask");
      if (mask & ~(kInts | kAxis | kScalar | kFlag | kDType)) c.bad_at(mat, "attribute mask " + std::to_string(mask));
      Attrs& a = n.attrs;
      if (mask & kInts) {
        const uint32_t ints = c.count("an attribute's ints", 8);
        a.ints.resize(ints);
        for (int64_t& x : a.ints) x = c.i64("an attribute int");
      }
      if (mask & kAxis) a.axis = c.i64("an attribute's axis");
      if (mask & kScalar) {
        const uint64_t b = c.u64("an attribute's scalar");
        std::memcpy(&a.scalar, &b, 8);
      }
      a.flag = (mask & kFlag) != 0;
      if (mask & kDType) a.dtype = c.dtype();
      const std::string_view attr_bytes = payload.substr(mat, c.pos - mat);
      t = type_index("an op node's result type");
      // the check's key: op, operand count and types, attribute bytes (the
      // count first, so no two different nodes share a key)
      // (in this process's byte order: the key never leaves it)
      key.resize(8 + 4 * static_cast<size_t>(m));
      std::memcpy(key.data(), &oi, 4);
      std::memcpy(key.data() + 4, &m, 4);
      if (m) std::memcpy(key.data() + 8, operand_types.data(), 4 * static_cast<size_t>(m));
      key.append(attr_bytes);
      const size_t key_len = key.size();
      key.resize((key_len + 7) / 8 * 8, '\0');
      check.check(key, key_len, n.op, operand_types, a, t, types, [&](const std::string& msg) {
        fail(what, "section " + tag_str("GRPB") + " fails verification: node " + std::to_string(idx) + " (" +
                       std::string(op_name(n.op)) + ", at byte " + std::to_string(at) + "): " + msg);
      });
    } else if (kind == kConstant) {
      n.kind = NodeKind::constant;
      t = type_index("a constant's type");
      const TensorType& tt = types[t];
      if (tt.device.type != DeviceType::cpu) c.bad("a constant on " + tt.device.str() + " (constants are on the cpu)");
      const size_t nb = static_cast<size_t>(checked_numel(tt.shape)) * size_of(tt.dtype);  // numel checked by Cursor::shape
      c.need(nb, "a constant's bytes");
      Tensor d;
      if (tt.device == Device::cpu() && nb > 0) {
        const uint64_t padded = (static_cast<uint64_t>(nb) + 63) / 64 * 64;
        if (padded > pool_bytes - pool_used)
          c.bad_at(pool_at, "the constant pool of " + std::to_string(pool_bytes) + " bytes is too small for the constants");
        d = Tensor(pool, tt.dtype, tt.shape, contiguous_strides(tt.shape),
                   static_cast<int64_t>(pool_used / size_of(tt.dtype)));
        pool_used += padded;
      } else {
        try {
          d = Tensor::empty(tt.shape, tt.dtype, tt.device);
        } catch (const Error& e) {
          c.bad("a constant of type " + tt.str() + ": " + e.what());
        }
      }
      if (nb) std::memcpy(d.data_ptr(), payload.data() + c.pos, nb);
      if (tt.dtype == DType::bool_)
        for (size_t b = 0; b < nb; ++b)
          if (static_cast<unsigned char>(payload[c.pos + b]) > 1) c.bad_at(c.pos + b, "a bool constant byte is not 0 or 1");
      c.pos += nb;
      n.data = std::move(d);
    } else {
      c.bad_at(at, "unknown node kind " + std::to_string(kind));
    }
    n.outputs.push_back(g->new_value_of_type(gtype[t], idx));
    vtype.push_back(t);
  }
  if (pool_used != pool_bytes)
    c.bad_at(pool_at, "a constant pool of " + std::to_string(pool_bytes) + " bytes for constants of " +
                          std::to_string(pool_used));
  // results
  const uint32_t nr = c.count("the result count", 4);
  std::vector<GraphValue> outs;
  outs.reserve(nr);
  for (uint32_t i = 0; i < nr; ++i) outs.push_back({g.get(), value("a result")});
  c.end();
  g->output_values(outs);
  // Everything else Graph::verify checks holds by construction: each value
  // is defined once, by the node that produces it, before any use; op nodes
  // define one value, constants hold data of their type, weights have names.
  return g;
}

}  // namespace kiln::mef
