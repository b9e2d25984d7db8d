// The graph's text form and its parser. Format (one node per line):
//   graph @main(%0: float32[3, 4] cpu, %1: float32[4] cpu) {
//     %2 = add(%0, %1) : float32[3, 4] cpu
//     %3 = sum(%2) {ints=[1], flag=true} : float32[3] cpu
//     %4 = constant 0x0000803f : float32[] cpu
//     %5 = weight "layers.0.weight" placeholder : float32[4, 4] cpu
//     %6, %7 = call @block(%2) {prefix="layers.0."} : float32[3, 4] cpu, float32[3] cpu
//     return %3, %6
//   }
// Subgraph definitions are printed before the root graph. Constants are
// the raw little-endian bytes in hex, so the round trip is exact.
#include <bit>
#include <cctype>
#include <charconv>
#include <cmath>
#include <cstdint>
#include <cstdio>
#include <cstring>
#include <algorithm>
#include <map>
#include <sstream>
#include <unordered_map>

#include "graph.h"
#include "../tensor/op_table.h"

namespace kiln {

namespace {

// The quiet NaN std::nan("") and NAN give, printed as plain "nan".
constexpr uint64_t kPlainNanBits = 0x7ff8000000000000ULL;

// Exact for every bit pattern: a finite value in %.17g (which strtod reads
// back to the same double, -0 included), "inf"/"-inf", "nan" for the plain
// quiet NaN, and any other NaN (sign, signalling bit, payload) as its 64 bits
// in hex: "nan:0x7ff8000000000001".
std::string fmt_double(double v) {
  if (std::isnan(v)) {
    const uint64_t bits = std::bit_cast<uint64_t>(v);
    if (bits == kPlainNanBits) return "nan";
    char buf[32];
    std::snprintf(buf, sizeof buf, "nan:0x%016llx", static_cast<unsigned long long>(bits));
    return buf;
  }
  if (std::isinf(v)) return v > 0 ? "inf" : "-inf";
  char buf[40];
  std::snprintf(buf, sizeof buf, "%.17g", v);
  return buf;
}

std::string quote(const std::string& s) {
  std::string r = "\"";
  for (char c : s) {
    if (c == '"' || c == '\\') r += '\\';
    r += c;
  }
  return r + "\"";
}

std::string attrs_text(const Attrs& a) {
  const Attrs def;
  std::string r;
  auto add = [&](const std::string& s) { r += (r.empty() ? "" : ", ") + s; };
  if (!a.ints.empty()) add("ints=" + shape_str(a.ints));
  if (a.axis != def.axis) add("axis=" + std::to_string(a.axis));
  if (std::memcmp(&a.scalar, &def.scalar, sizeof(double)) != 0) add("scalar=" + fmt_double(a.scalar));
  if (a.flag != def.flag) add("flag=true");
  if (a.dtype != def.dtype) add("dtype=" + std::string(name(a.dtype)));
  return r.empty() ? r : " {" + r + "}";
}

void print_graph(const Graph& g, std::ostringstream& os) {
  os << "graph @" << g.name() << "(";
  const auto& ins = g.input_ids();
  for (size_t i = 0; i < ins.size(); ++i) os << (i ? ", " : "") << "%" << ins[i] << ": " << g.type(ins[i]).str();
  os << ") {\n";
  for (const Node& n : g.nodes()) {
    if (n.kind == NodeKind::input) continue;
    os << "  ";
    for (size_t k = 0; k < n.outputs.size(); ++k) os << (k ? ", " : "") << "%" << n.outputs[k];
    os << " = ";
    auto args = [&] {
      os << "(";
      for (size_t k = 0; k < n.inputs.size(); ++k) os << (k ? ", " : "") << "%" << n.inputs[k];
      os << ")";
    };
    switch (n.kind) {
      case NodeKind::op: os << op_name(n.op); args(); os << attrs_text(n.attrs); break;
      case NodeKind::constant: {
        os << "constant 0x";
        const auto* p = static_cast<const unsigned char*>(n.data.data_ptr());
        size_t nb = static_cast<size_t>(n.data.numel()) * n.data.itemsize();
        static const char* hex = "0123456789abcdef";
        for (size_t b = 0; b < nb; ++b) os << hex[p[b] >> 4] << hex[p[b] & 15];
        break;
      }
      case NodeKind::weight: os << "weight " << quote(n.name) << (n.placeholder ? " placeholder" : ""); break;
      case NodeKind::call:
        os << "call @" << n.name;
        args();
        if (!n.prefix.empty()) os << " {prefix=" << quote(n.prefix) << "}";
        break;
      default: break;
    }
    os << " : ";
    for (size_t k = 0; k < n.outputs.size(); ++k) os << (k ? ", " : "") << g.type(n.outputs[k]).str();
    os << "\n";
  }
  os << "  return";
  for (size_t k = 0; k < g.output_ids().size(); ++k) os << (k ? ", %" : " %") << g.output_ids()[k];
  os << "\n}\n";
}

}  // namespace

std::string Graph::to_text() const {
  std::ostringstream os;
  if (!root_)
    for (const auto& [k, sg] : subgraphs_) print_graph(*sg, os);
  print_graph(*this, os);
  return os.str();
}

// ---- parser -------------------------------------------------------------------

namespace {
// ASCII only (the text form is ASCII; no locale lookups on the hot path).
inline bool is_alnum(char c) {
  return (c >= '0' && c <= '9') || (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z');
}
inline bool is_ident(char c) { return is_alnum(c) || c == '_' || c == '.' || c == ':' || c == '-'; }

// op_from_name through a hash table built once (a MEF read parses one name per node).
OpId op_by_name(std::string_view s) {
  static const auto* table = [] {
    auto* m = new std::unordered_map<std::string_view, OpId>();  // never destroyed
    for (int i = 0; i < kNumOps; ++i) m->emplace(op_name(static_cast<OpId>(i)), static_cast<OpId>(i));
    return m;
  }();
  auto it = table->find(s);
  if (it == table->end()) return op_from_name(s);  // throws its ValueError
  return it->second;
}

// Textual value ids -> value ids: dense ids (the printer numbers values
// 0, 1, ...) in a vector, any others in a map.
struct ValueNames {
  static constexpr int64_t kDense = int64_t(1) << 22;
  std::vector<int32_t> dense;
  std::map<int64_t, int32_t> sparse;
  const int32_t* find(int64_t n) const {
    if (n >= 0 && n < kDense) return static_cast<size_t>(n) < dense.size() && dense[static_cast<size_t>(n)] >= 0 ? &dense[static_cast<size_t>(n)] : nullptr;
    auto it = sparse.find(n);
    return it == sparse.end() ? nullptr : &it->second;
  }
  void set(int64_t n, int32_t v) {
    if (n >= 0 && n < kDense) {
      if (static_cast<size_t>(n) >= dense.size()) dense.resize(std::max<size_t>(static_cast<size_t>(n) + 1, 2 * dense.size()), -1);
      dense[static_cast<size_t>(n)] = v;
    } else {
      sparse[n] = v;
    }
  }
};
}  // namespace

struct GraphParser {
  std::string_view s;
  size_t pos = 0;
  int line = 1;

  [[noreturn]] void fail(const std::string& msg) {
    throw ValueError("Graph::parse: line " + std::to_string(line) + ": " + msg);
  }
  void skip_ws(bool newlines = true) {
    while (pos < s.size() && (s[pos] == ' ' || s[pos] == '\t' || s[pos] == '\r' || (newlines && s[pos] == '\n'))) {
      if (s[pos] == '\n') ++line;
      ++pos;
    }
  }
  bool peek(char c) {
    skip_ws();
    return pos < s.size() && s[pos] == c;
  }
  bool accept(std::string_view t) {
    skip_ws();
    if (s.size() - pos < t.size()) return false;
    for (size_t i = 0; i < t.size(); ++i)  // short tokens: no memcmp call
      if (s[pos + i] != t[i]) return false;
    pos += t.size();
    return true;
  }
  void expect(std::string_view t) {
    if (!accept(t)) fail("expected '" + std::string(t) + "'");
  }
  std::string_view ident_view() {
    skip_ws();
    size_t b = pos;
    while (pos < s.size() && is_ident(s[pos])) ++pos;
    if (b == pos) fail("expected a name");
    return s.substr(b, pos - b);
  }
  std::string ident() { return std::string(ident_view()); }
  int64_t integer() {
    skip_ws();
    int64_t v = 0;
    auto r = std::from_chars(s.data() + pos, s.data() + s.size(), v);
    if (r.ec != std::errc()) fail("expected an integer");
    pos = static_cast<size_t>(r.ptr - s.data());
    return v;
  }
  double number() {
    skip_ws();
    if (s.substr(pos, 6) == "nan:0x") {  // a NaN's exact bits (see fmt_double)
      pos += 6;
      uint64_t bits = 0;
      auto r = std::from_chars(s.data() + pos, s.data() + s.size(), bits, 16);
      if (r.ec != std::errc() || r.ptr - (s.data() + pos) != 16) fail("expected 16 hex digits after 'nan:0x'");
      pos = static_cast<size_t>(r.ptr - s.data());
      const double v = std::bit_cast<double>(bits);
      if (!std::isnan(v)) fail("'nan:0x' bits that are not a NaN");
      return v;
    }
    size_t b = pos;
    while (pos < s.size() && (is_alnum(s[pos]) || s[pos] == '.' || s[pos] == '-' || s[pos] == '+'))
      ++pos;
    std::string t(s.substr(b, pos - b));
    char* end = nullptr;
    double v = std::strtod(t.c_str(), &end);
    if (t.empty() || *end) fail("expected a number, got '" + t + "'");
    return v;
  }
  std::string quoted() {
    skip_ws();
    if (pos >= s.size() || s[pos] != '"') fail("expected a quoted string");
    ++pos;
    std::string r;
    while (pos < s.size() && s[pos] != '"') {
      if (s[pos] == '\\' && pos + 1 < s.size()) ++pos;
      if (s[pos] == '\n') fail("unterminated string");
      r += s[pos++];
    }
    if (pos >= s.size()) fail("unterminated string");
    ++pos;
    return r;
  }
  std::vector<int64_t> int_list() {
    expect("[");
    std::vector<int64_t> r;
    if (accept("]")) return r;
    r.reserve(4);  // one allocation for the usual rank
    do r.push_back(integer());
    while (accept(","));
    expect("]");
    return r;
  }
  TensorType type() {
    skip_ws();
    size_t b = pos;
    while (pos < s.size() && is_alnum(s[pos])) ++pos;
    const std::string_view dt = s.substr(b, pos - b);
    TensorType t;
    if (dt == "float32") {
      t.dtype = DType::float32;  // the common case without a table walk
    } else {
      try {
        t.dtype = dtype_from_name(dt);
      } catch (const Error&) {
        fail("unknown dtype '" + std::string(dt) + "'");
      }
    }
    t.shape = int_list();
    for (int64_t d : t.shape)
      if (d < 0) fail("negative dimension in a type");
    const std::string_view dev = ident_view();
    if (dev == "cpu") return t;  // Device::parse("cpu"), the common case, without a string
    try {
      t.device = Device::parse(std::string(dev));
    } catch (const Error&) {
      fail("unknown device '" + std::string(dev) + "'");
    }
    return t;
  }
  int32_t value_ref(const ValueNames& names) {
    expect("%");
    int64_t n = integer();
    const int32_t* v = names.find(n);
    if (!v) fail("use of undefined value %" + std::to_string(n));
    return *v;
  }

  void parse_graph(Graph& g, const std::string& gname_check) {
    ValueNames names;  // textual id -> value id in g
    (void)gname_check;
    {
      // One node per line up to the closing brace (at the start of a line):
      // room for them all up front.
      const size_t end = std::min(s.find("\n}", pos), s.size());
      const size_t lines = static_cast<size_t>(std::count(s.begin() + static_cast<std::ptrdiff_t>(pos),
                                                          s.begin() + static_cast<std::ptrdiff_t>(end), '\n'));
      g.nodes_.reserve(lines + 8);
      g.type_table_.reserve(lines + 8);
      g.reserve_values(lines + 8);
      names.dense.reserve(lines + 8);
    }
    expect("(");
    if (!accept(")")) {
      do {
        expect("%");
        int64_t n = integer();
        expect(":");
        TensorType t = type();
        if (names.find(n)) fail("value %" + std::to_string(n) + " defined twice");
        names.set(n, g.add_input(t).id);
      } while (accept(","));
      expect(")");
    }
    expect("{");
    std::vector<int64_t> defs;          // per node, reused
    std::vector<TensorType> out_types;  // per node, reused
    while (true) {
      if (accept("return")) {
        std::vector<GraphValue> outs;
        skip_ws(false);
        if (pos < s.size() && s[pos] == '%') {
          do outs.push_back({&g, value_ref(names)});
          while (accept(","));
        }
        g.output_values(outs);
        expect("}");
        return;
      }
      // %a, %b = kind ...
      defs.clear();
      do {
        expect("%");
        defs.push_back(integer());
      } while (accept(","));
      expect("=");
      const std::string_view kind = ident_view();
      Node n;
      out_types.clear();
      auto args = [&] {
        expect("(");
        if (accept(")")) return;
        do n.inputs.push_back(value_ref(names));
        while (accept(","));
        expect(")");
      };
      if (kind == "constant") {
        n.kind = NodeKind::constant;
        expect("0x");
        size_t b = pos;
        while (pos < s.size() && (is_alnum(s[pos]) && ((s[pos] | 32) <= 'f' || s[pos] <= '9'))) ++pos;
        std::string_view hex = s.substr(b, pos - b);
        expect(":");
        out_types.push_back(type());
        const TensorType& t = out_types[0];
        int64_t numel = checked_numel(t.shape, "Graph::parse");
        size_t nb = static_cast<size_t>(numel) * size_of(t.dtype);
        if (hex.size() != 2 * nb) fail("constant has " + std::to_string(hex.size() / 2) + " bytes, its type needs " +
                                      std::to_string(nb));
        Tensor d = Tensor::empty(t.shape, t.dtype, t.device);
        auto* p = static_cast<unsigned char*>(d.data_ptr());
        auto nib = [](char c) { return c <= '9' ? c - '0' : (c | 32) - 'a' + 10; };
        for (size_t k = 0; k < nb; ++k) p[k] = static_cast<unsigned char>(nib(hex[2 * k]) * 16 + nib(hex[2 * k + 1]));
        if (t.dtype == DType::bool_)
          for (size_t k = 0; k < nb; ++k)
            if (p[k] > 1) fail("bool constant byte is not 0 or 1");
        n.data = d;
      } else if (kind == "weight") {
        n.kind = NodeKind::weight;
        n.name = quoted();
        n.placeholder = accept("placeholder");
        expect(":");
        out_types.push_back(type());
      } else if (kind == "call") {
        n.kind = NodeKind::call;
        expect("@");
        n.name = ident();
        args();
        if (accept("{")) {
          expect("prefix");
          expect("=");
          n.prefix = quoted();
          expect("}");
        }
        expect(":");
        do out_types.push_back(type());
        while (accept(","));
      } else {
        n.kind = NodeKind::op;
        try {
          n.op = op_by_name(kind);
        } catch (const Error&) {
          fail("unknown op '" + std::string(kind) + "'");
        }
        args();
        if (accept("{")) {
          do {
            const std::string_view key = ident_view();
            expect("=");
            if (key == "ints") n.attrs.ints = int_list();
            else if (key == "axis") n.attrs.axis = integer();
            else if (key == "scalar") n.attrs.scalar = number();
            else if (key == "flag") n.attrs.flag = ident_view() == "true";
            else if (key == "dtype") {
              const std::string_view d = ident_view();
              try {
                n.attrs.dtype = dtype_from_name(d);
              } catch (const Error&) {
                fail("unknown dtype '" + std::string(d) + "'");
              }
            } else fail("unknown attribute '" + std::string(key) + "'");
          } while (accept(","));
          expect("}");
        }
        expect(":");
        out_types.push_back(type());
      }
      if (out_types.size() != defs.size())
        fail("node defines " + std::to_string(defs.size()) + " values but lists " + std::to_string(out_types.size()) +
             " types");
      // Graph::push_node, moving the types in (no copy of their shapes)
      const int32_t idx = static_cast<int32_t>(g.nodes_.size());
      n.outputs.clear();
      for (TensorType& t : out_types) n.outputs.push_back(g.new_value_of_type(g.add_type(std::move(t)), idx));
      g.nodes_.push_back(std::move(n));
      for (size_t k = 0; k < defs.size(); ++k) {
        if (names.find(defs[k])) fail("value %" + std::to_string(defs[k]) + " defined twice");
        names.set(defs[k], g.nodes_[idx].outputs[k]);
      }
      const Node& added = g.nodes_[idx];
      if (added.kind == NodeKind::weight) g.weights_[added.name] = added.outputs[0];
    }
  }
};

std::unique_ptr<Graph> Graph::parse(std::string_view text) {
  GraphParser p{text};
  // Subgraphs come first; the last graph in the text is the root.
  std::vector<std::unique_ptr<Graph>> graphs;
  while (true) {
    p.skip_ws();
    if (p.pos >= text.size()) break;
    p.expect("graph");
    p.expect("@");
    auto g = std::make_unique<Graph>(p.ident());
    p.parse_graph(*g, g->name());
    graphs.push_back(std::move(g));
  }
  if (graphs.empty()) p.fail("no graph in the text");
  std::unique_ptr<Graph> root = std::move(graphs.back());
  graphs.pop_back();
  for (auto& sg : graphs) {
    if (sg->name() == root->name() || root->subgraphs_.count(sg->name()))
      throw ValueError("Graph::parse: graph @" + sg->name() + " is defined twice");
    sg->root_ = root.get();
    root->subgraphs_[sg->name()] = std::move(sg);
  }
  root->verify();
  return root;
}

}  // namespace kiln
