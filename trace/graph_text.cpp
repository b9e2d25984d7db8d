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
#include <sstream>

#include "graph.h"

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
    if (s.substr(pos, t.size()) == t) {
      pos += t.size();
      return true;
    }
    return false;
  }
  void expect(std::string_view t) {
    if (!accept(t)) fail("expected '" + std::string(t) + "'");
  }
  std::string ident() {
    skip_ws();
    size_t b = pos;
    while (pos < s.size() && (std::isalnum(static_cast<unsigned char>(s[pos])) || s[pos] == '_' || s[pos] == '.' ||
                              s[pos] == ':' || s[pos] == '-'))
      ++pos;
    if (b == pos) fail("expected a name");
    return std::string(s.substr(b, pos - b));
  }
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
    while (pos < s.size() && (std::isalnum(static_cast<unsigned char>(s[pos])) || s[pos] == '.' || s[pos] == '-' ||
                              s[pos] == '+'))
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
    do r.push_back(integer());
    while (accept(","));
    expect("]");
    return r;
  }
  TensorType type() {
    std::string dt;
    skip_ws();
    size_t b = pos;
    while (pos < s.size() && std::isalnum(static_cast<unsigned char>(s[pos]))) ++pos;
    dt = std::string(s.substr(b, pos - b));
    TensorType t;
    try {
      t.dtype = dtype_from_name(dt);
    } catch (const Error&) {
      fail("unknown dtype '" + dt + "'");
    }
    t.shape = int_list();
    for (int64_t d : t.shape)
      if (d < 0) fail("negative dimension in a type");
    std::string dev = ident();
    try {
      t.device = Device::parse(dev);
    } catch (const Error&) {
      fail("unknown device '" + dev + "'");
    }
    return t;
  }
  int32_t value_ref(const std::map<int64_t, int32_t>& names) {
    expect("%");
    int64_t n = integer();
    auto it = names.find(n);
    if (it == names.end()) fail("use of undefined value %" + std::to_string(n));
    return it->second;
  }

  void parse_graph(Graph& g, const std::string& gname_check) {
    std::map<int64_t, int32_t> names;  // textual id -> value id in g
    (void)gname_check;
    expect("(");
    if (!accept(")")) {
      do {
        expect("%");
        int64_t n = integer();
        expect(":");
        TensorType t = type();
        if (names.count(n)) fail("value %" + std::to_string(n) + " defined twice");
        names[n] = g.add_input(t).id;
      } while (accept(","));
      expect(")");
    }
    expect("{");
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
      std::vector<int64_t> defs;
      do {
        expect("%");
        defs.push_back(integer());
      } while (accept(","));
      expect("=");
      std::string kind = ident();
      Node n;
      std::vector<TensorType> out_types;
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
        while (pos < s.size() && std::isxdigit(static_cast<unsigned char>(s[pos]))) ++pos;
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
          n.op = op_from_name(kind);
        } catch (const Error&) {
          fail("unknown op '" + kind + "'");
        }
        args();
        if (accept("{")) {
          do {
            std::string key = ident();
            expect("=");
            if (key == "ints") n.attrs.ints = int_list();
            else if (key == "axis") n.attrs.axis = integer();
            else if (key == "scalar") n.attrs.scalar = number();
            else if (key == "flag") n.attrs.flag = ident() == "true";
            else if (key == "dtype") {
              std::string d = ident();
              try {
                n.attrs.dtype = dtype_from_name(d);
              } catch (const Error&) {
                fail("unknown dtype '" + d + "'");
              }
            } else fail("unknown attribute '" + key + "'");
          } while (accept(","));
          expect("}");
        }
        expect(":");
        out_types.push_back(type());
      }
      if (out_types.size() != defs.size())
        fail("node defines " + std::to_string(defs.size()) + " values but lists " + std::to_string(out_types.size()) +
             " types");
      int32_t idx = g.push_node(std::move(n), out_types);
      for (size_t k = 0; k < defs.size(); ++k) {
        if (names.count(defs[k])) fail("value %" + std::to_string(defs[k]) + " defined twice");
        names[defs[k]] = g.nodes_[idx].outputs[k];
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
