// kiln (internal): the first line where two texts (graph IR) differ, for the
// messages of the capture checks (jit's check_captures, subgraph bodies).
#pragma once
#include <algorithm>
#include <sstream>
#include <string>

namespace kiln::detail {

/// "line N was `...`, is now `...`" for the first line past the first `skip`
/// where `a` and `b` differ ("(end of graph)" for a text that ended); lines
/// are counted from 1 and shown without their indentation.
inline std::string first_differing_line(const std::string& a, const std::string& b, int skip = 0) {
  std::istringstream sa(a), sb(b);
  std::string la, lb;
  int line = 0;
  for (; line < skip; ++line) {
    std::getline(sa, la);
    std::getline(sb, lb);
  }
  while (true) {
    const bool ga = static_cast<bool>(std::getline(sa, la)), gb = static_cast<bool>(std::getline(sb, lb));
    ++line;
    if (!ga || !gb || la != lb) {
      if (!ga) la = "(end of graph)";
      if (!gb) lb = "(end of graph)";
      break;
    }
  }
  auto trim = [](const std::string& s) { return s.substr(std::min(s.find_first_not_of(' '), s.size())); };
  return "line " + std::to_string(line) + " was `" + trim(la) + "`, is now `" + trim(lb) + "`";
}

}  // namespace kiln::detail
