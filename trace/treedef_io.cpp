#include "treedef_io.h"

namespace kiln {

namespace {

constexpr int kMaxDepth = 256;

void put_quoted(std::string& out, const std::string& s) {
  out += '"';
  for (char c : s) {
    if (c == '"' || c == '\\') out += '\\';
    out += c;
  }
  out += '"';
}

void put(std::string& out, const TreeDef& t) {
  using K = TreeDef::Kind;
  auto keyed = [&] {
    out += '{';
    for (size_t i = 0; i < t.children.size(); ++i) {
      if (i) out += ',';
      put_quoted(out, i < t.keys.size() ? t.keys[i] : std::string());
      out += ':';
      put(out, t.children[i]);
    }
    out += '}';
  };
  auto seq = [&](char open, char close) {
    out += open;
    for (size_t i = 0; i < t.children.size(); ++i) {
      if (i) out += ',';
      put(out, t.children[i]);
    }
    out += close;
  };
  switch (t.kind) {
    case K::leaf: out += 'T'; break;
    case K::none: out += 'N'; break;
    case K::static_leaf: out += 'S'; put_quoted(out, t.value); break;
    case K::tuple: seq('(', ')'); break;
    case K::list: seq('[', ']'); break;
    case K::dict: keyed(); break;
    case K::record: out += 'R'; put_quoted(out, t.value); keyed(); break;
  }
}

struct Parser {
  std::string_view s;
  size_t pos = 0;

  [[noreturn]] void fail(const std::string& what) const {
    throw ValueError("parse_treedef: at offset " + std::to_string(pos) + ": " + what);
  }
  bool at(char c) const { return pos < s.size() && s[pos] == c; }
  void expect(char c) {
    if (!at(c)) fail(std::string("expected '") + c + "'" + (pos < s.size() ? "" : ", got the end of the text"));
    ++pos;
  }
  std::string quoted() {
    expect('"');
    std::string r;
    while (pos < s.size() && s[pos] != '"') {
      if (s[pos] == '\\') {
        if (++pos >= s.size()) break;
      }
      r += s[pos++];
    }
    if (pos >= s.size()) fail("unterminated string");
    ++pos;
    return r;
  }
  void children(TreeDef& t, char close, bool keyed, int depth) {
    if (at(close)) {
      ++pos;
      return;
    }
    while (true) {
      if (keyed) {
        t.keys.push_back(quoted());
        expect(':');
      }
      t.children.push_back(node(depth + 1));
      if (at(',')) {
        ++pos;
        continue;
      }
      expect(close);
      return;
    }
  }
  TreeDef node(int depth) {
    if (depth > kMaxDepth) fail("nesting deeper than " + std::to_string(kMaxDepth) + " levels");
    if (pos >= s.size()) fail("expected a tree node, got the end of the text");
    using K = TreeDef::Kind;
    TreeDef t;
    const char c = s[pos++];
    switch (c) {
      case 'T': t.kind = K::leaf; break;
      case 'N': t.kind = K::none; break;
      case 'S': t.kind = K::static_leaf; t.value = quoted(); break;
      case '(': t.kind = K::tuple; children(t, ')', false, depth); break;
      case '[': t.kind = K::list; children(t, ']', false, depth); break;
      case '{': t.kind = K::dict; children(t, '}', true, depth); break;
      case 'R':
        t.kind = K::record;
        t.value = quoted();
        expect('{');
        children(t, '}', true, depth);
        break;
      default:
        --pos;
        fail(std::string("expected one of T N S ( [ { R, got '") + c + "'");
    }
    return t;
  }
};

}  // namespace

std::string serialize(const TreeDef& t) {
  std::string out;
  put(out, t);
  return out;
}

TreeDef parse_treedef(std::string_view text) {
  Parser p{text};
  TreeDef t = p.node(0);
  if (p.pos != text.size()) p.fail("unexpected characters after the tree");
  return t;
}

}  // namespace kiln
