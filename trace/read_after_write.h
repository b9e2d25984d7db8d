// kiln (internal): reads after an in-place write that a trace's nodes do not show.
//
// StagedGraph::write_reads (trace/stage.h) finds what a traced function reads
// after it writes a destination from the graph's node order: the nodes
// recorded after the destination's value was superseded. A compiled callable
// inlined into a trace (CompiledCallable::inline_call) records its nodes
// first and its write-backs after them, so the reads its own graph made after
// its writes would look like reads before them; it notes them here instead,
// in the outer trace's values, and stage() adds them to write_reads.
#pragma once
#include <cstdint>
#include <vector>

namespace kiln {
class GraphRealizationContext;
}

namespace kiln::detail {

/// Records that, in `ctx`'s graph, the function reads value `read` (or the
/// memory it is a view of) after writing the destination whose value before
/// the write is `written` (a view root: an input, a weight, or an op result).
/// Kept by the context (GraphRealizationContext::note_read_after_write), so
/// it is forgotten with it.
void note_read_after_write(GraphRealizationContext& ctx, int32_t written, int32_t read);
/// The values noted for `written` in `ctx` (empty when none).
std::vector<int32_t> reads_after_write(const GraphRealizationContext& ctx, int32_t written);

}  // namespace kiln::detail
