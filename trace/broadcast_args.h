// kiln (internal): arguments a trace receives with a broadcast layout
// (trace/stage.cpp registers them; in-place writes in
// trace/realization_context.cpp refuse to write into them).
#pragma once
#include <cstdint>
#include <map>

namespace kiln {
class Graph;
namespace detail {
/// Registers, for the graph `g` being traced, its input values whose
/// arguments have a broadcast layout (value id -> argument index); an
/// in-place write into one of them (or a view of one) then throws
/// ValueError naming the writing op, as eagerly. An empty map unregisters g.
void set_broadcast_arguments(const Graph& g, std::map<int32_t, int> args);
}  // namespace detail
}  // namespace kiln
