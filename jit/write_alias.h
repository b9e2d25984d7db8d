// kiln (internal): the aliasing guard of compiled calls that write in place.
//
// A traced function reads each tensor argument, captured constant and weight
// as a separate value, so when the function writes one of them in place (an
// argument, or a captured tensor it writes: a mutable weight) and another one
// shares that memory, the compiled call would read the old value where an
// eager call reads the new one. Every compiled entry point that writes (the
// checked call, execute_raw, a callable read back from MEF, an inlined call,
// and engine::Model::execute and capture where the artifact's signature
// records the writes: one read from MEF) looks for such an overlap first and
// throws ValueError. (An artifact compiled in this process carries no
// signature; the engine never writes its inputs, the write-backs being
// outputs that the callable copies, so the engine alone computes the graph
// as if its inputs were separate.) jit(fn) instead recompiles for identical arguments
// (StageOptions::same_as) and runs other overlaps eagerly. Calls of
// functions that write nothing never get here.
#pragma once
#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <map>
#include <optional>
#include <span>
#include <string>
#include <vector>

#include "../trace/stage.h"
#include "tensor_refs.h"

namespace kiln::detail {

/// The byte spans of a set of tensors, sorted by memory, so that the tensors
/// that may share memory with a given one are found in O(log n) (plus the
/// ones found) instead of by testing each: a call writing n tensors in place
/// with n others bound (50 captured tensors each written) tests n pairs, not
/// n^2. Every added tensor that may_share_memory with the query is reported;
/// a few that do not may be too (tensors of two buffers wrapping the same
/// memory), so callers apply their own test to each candidate.
class MemoryOverlaps {
 public:
  /// Above this many (destination, tensor) pairs to test, sorting the
  /// tensors first (a few microseconds) costs less than a test per pair
  /// (a few nanoseconds each).
  static constexpr size_t kWorthwhilePairs = 64;
  /// Room for `n` tensors (no reallocation while they are added).
  void reserve(size_t n) { spans_.reserve(n); }
  /// Adds `t` under `tag` (an undefined, unrealized or empty tensor shares
  /// memory with nothing and is left out).
  void add(const Tensor& t, int32_t tag);
  /// Sorts the spans; call once after the adds, before the queries.
  void build();
  /// Calls f(tag) for each added tensor whose memory may overlap t's.
  template <class F>
  void for_each_candidate(const Tensor& t, F&& f) const {
    Span q;
    if (!span_of(t, q)) return;
    // The spans of q's memory starting before q ends, from the last back
    // while one of them (the running maximum of their ends) reaches q.
    auto it = std::lower_bound(spans_.begin(), spans_.end(), q, [](const Span& a, const Span& b) {
      return a.base != b.base ? a.base < b.base : a.lo < b.hi;
    });
    for (size_t j = static_cast<size_t>(it - spans_.begin()); j-- > 0;) {
      const Span& s = spans_[j];
      if (s.base != q.base || s.max_hi <= q.lo) break;
      if (s.hi > q.lo) f(s.tag);
    }
  }

 private:
  struct Span {
    uintptr_t base = 0;          // the buffer's memory
    int64_t lo = 0, hi = 0;      // bytes [lo, hi) from base
    int64_t max_hi = 0;          // the largest hi of the spans of base up to this one (sorted)
    int32_t tag = -1;
  };
  static bool span_of(const Tensor& t, Span& s);
  std::vector<Span> spans_;
};

/// A written tensor sharing memory with another tensor the call reads.
struct WriteAlias {
  enum class Other : uint8_t { argument, captured, weight };
  int32_t written = -1;        ///< the argument written, or -1: the mutable weight `written_weight`
  std::string written_weight;
  Other other = Other::argument;
  int32_t other_argument = -1;  ///< Other::argument
  size_t other_captured = 0;    ///< Other::captured: index into StagedGraph::captured
  std::string other_weight;     ///< Other::weight
  bool other_written = false;   ///< Other::weight: a weight the function writes too (a write-back weight)
  /// For a written mutable weight that overlaps another weight or a captured
  /// constant: the types of the tensors (for the message).
  std::string written_type, other_type;
};

/// The first overlap (numpy's may_share_memory, byte ranges) between a write
/// destination and another tensor the function reads after that write (per
/// `reads`, StagedGraph::write_reads; every tensor when `reads` is empty):
/// for a written argument, the other arguments (except those traced as the
/// same tensor, `same_as`), the captured constants and the weights; for a
/// written mutable weight, the arguments, the other weights (two captured
/// handles or views of one buffer; two MEF write-back weights bound to one
/// tensor) and the captured constants. nullopt when none; `writes` empty
/// costs nothing.
std::optional<WriteAlias> find_write_alias(TensorRefs args, const std::vector<WriteBack>& writes,
                                           const std::vector<WriteReads>& reads, const std::vector<int32_t>& same_as,
                                           const std::map<std::string, Tensor>& weights,
                                           const std::vector<CapturedConstant>& captured);

/// The ValueError text: `who` (e.g. "compiled call of 'main'"), both
/// positions (argument paths from `in_tree` when it has them), that they
/// overlap and which is written, and what to do (pass x.clone(), or jit).
/// Tensors are named as the user knows them: arguments by path, captured
/// tensors by type and order of first use, a captured tensor the function
/// writes by its type. `from_mef`: the callable was read from a MEF file
/// (no function to run eagerly): written weights are named as the file
/// names them and the advice is about what to bind to from_mef's weights.
std::string write_alias_message(const std::string& who, const WriteAlias& a, const TreeDef& in_tree,
                                const std::vector<CapturedConstant>& captured, bool from_mef = false);

/// Same memory, dtype, shape and strides.
bool identical_tensors(const Tensor& a, const Tensor& b);

/// For jit: when every pair of arguments that may share memory is identical,
/// StageOptions::same_as for them (each leaf -> the first identical earlier
/// leaf, or -1); nullopt when some overlap is partial (or of different layouts).
std::optional<std::vector<int32_t>> identical_alias_groups(std::span<const Tensor> args);

}  // namespace kiln::detail
