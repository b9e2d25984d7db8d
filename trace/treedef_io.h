// kiln: a TreeDef's serialized form, for files (MEF signatures). Unlike
// TreeDef::str(), which is for people, this form reads back exactly:
//   T                 a tensor leaf
//   N                 None (an empty std::optional)
//   S"3"              a static value (its printed form, quoted)
//   (c,c)  [c,c]      tuple, list
//   {"k":c,"l":c}     dict (keys in order)
//   R"Name"{"k":c}    a KILN_PYTREE record: type name, then fields
// Strings are double-quoted with `\"` and `\\` escaped; any other byte is
// kept as is.
#pragma once
#include <string>
#include <string_view>

#include "pytree.h"

namespace kiln {

/// The serialized form of `t` (see above).
std::string serialize(const TreeDef& t);

/// Parses serialize()'s output. Throws ValueError "parse_treedef: at offset
/// N: <what was expected>" on malformed text, on trailing characters, and on
/// nesting deeper than 256 levels (so hostile input cannot exhaust the stack).
TreeDef parse_treedef(std::string_view text);

}  // namespace kiln
