#include "write_alias.h"

#include <algorithm>

#include "../tensor/mutation.h"

namespace kiln::detail {

bool identical_tensors(const Tensor& a, const Tensor& b) {
  return a.is_realized() && b.is_realized() && a.buffer() == b.buffer() && a.offset() == b.offset() &&
         a.dtype() == b.dtype() && a.shape() == b.shape() && a.strides() == b.strides();
}

namespace {
std::string type_str(const Tensor& t) { return TensorType(t.dtype(), t.shape(), t.device()).str(); }
}  // namespace

bool MemoryOverlaps::span_of(const Tensor& t, Span& s) {
  if (!t.defined() || !t.is_realized()) return false;
  const TensorImpl& i = t.impl();
  // may_share_memory's byte span: [offset + the negative strides' reach,
  // offset + the positive ones' reach + 1 element), in bytes.
  int64_t lo = i.offset, hi = i.offset;
  for (size_t d = 0; d < i.shape.size(); ++d) {
    if (i.shape[d] == 0) return false;
    const int64_t r = i.strides[d] * (i.shape[d] - 1);
    (r < 0 ? lo : hi) += r;
  }
  const int64_t w = static_cast<int64_t>(size_of(i.dtype));
  s.base = reinterpret_cast<uintptr_t>(i.storage.data());
  s.lo = lo * w;
  s.hi = (hi + 1) * w;
  return true;
}

void MemoryOverlaps::add(const Tensor& t, int32_t tag) {
  Span s;
  if (!span_of(t, s)) return;
  s.tag = tag;
  spans_.push_back(s);
}

void MemoryOverlaps::build() {
  std::sort(spans_.begin(), spans_.end(),
            [](const Span& a, const Span& b) { return a.base != b.base ? a.base < b.base : a.lo < b.lo; });
  for (size_t j = 0; j < spans_.size(); ++j)
    spans_[j].max_hi = j > 0 && spans_[j - 1].base == spans_[j].base ? std::max(spans_[j - 1].max_hi, spans_[j].hi)
                                                                      : spans_[j].hi;
}

namespace {
// Many writes and many tensors (50 captured tensors, each written): per
// write, whether a tensor other than its destination may share the
// destination's memory, from the tensors sorted by memory once
// (MemoryOverlaps) instead of a test per pair. A write with none cannot
// alias; find_write_alias tests the others pair by pair as before, so the
// first overlap it reports is the same.
std::vector<char> overlapped_writes(TensorRefs args, const std::vector<WriteBack>& writes,
                                    const std::map<std::string, Tensor>& weights,
                                    const std::vector<CapturedConstant>& captured) {
  const size_t others = args.size() + captured.size() + weights.size();
  MemoryOverlaps index;
  std::vector<const Tensor*> tagged;  // tag -> tensor
  tagged.reserve(others);
  index.reserve(others);
  auto add = [&](const Tensor& t) {
    index.add(t, static_cast<int32_t>(tagged.size()));
    tagged.push_back(&t);
  };
  for (size_t j = 0; j < args.size(); ++j) add(args[j]);
  for (const CapturedConstant& c : captured) add(c.source);
  for (const auto& [name, t] : weights) add(t);
  index.build();
  // d is argument `arg` (by position: borrowed arguments may be one object,
  // c(x, x)), or (arg < 0) the weight entry d.
  const size_t first_weight = args.size() + captured.size();
  auto overlapped = [&](const Tensor& d, int32_t arg) {
    bool any = false;
    index.for_each_candidate(d, [&](int32_t tag) {
      const size_t t = static_cast<size_t>(tag);
      any = any || (arg >= 0 ? tag != arg : t < first_weight || tagged[t] != &d);
    });
    return any;
  };
  std::vector<char> r(writes.size(), 0);
  for (size_t k = 0; k < writes.size(); ++k) {
    const WriteBack& w = writes[k];
    if (w.argument >= 0) {
      const size_t i = static_cast<size_t>(w.argument);
      r[k] = i < args.size() && overlapped(args[i], w.argument);
    } else if (auto it = weights.find(w.weight); it != weights.end()) {
      r[k] = overlapped(it->second, -1);
    }
  }
  return r;
}
}  // namespace

std::optional<WriteAlias> find_write_alias(TensorRefs args, const std::vector<WriteBack>& writes,
                                           const std::vector<WriteReads>& reads, const std::vector<int32_t>& same_as,
                                           const std::map<std::string, Tensor>& weights,
                                           const std::vector<CapturedConstant>& captured) {
  auto root = [&](size_t i) {
    return i < same_as.size() && same_as[i] >= 0 ? static_cast<size_t>(same_as[i]) : i;
  };
  const bool known = reads.size() == writes.size();
  std::vector<char> overlapped;  // empty: every write is tested
  if (writes.size() * (args.size() + captured.size() + weights.size()) > MemoryOverlaps::kWorthwhilePairs)
    overlapped = overlapped_writes(args, writes, weights, captured);
  for (size_t k = 0; k < writes.size(); ++k) {
    const WriteBack& w = writes[k];
    if (!overlapped.empty() && !overlapped[k]) continue;
    const WriteReads* rd = known ? &reads[k] : nullptr;
    auto read_arg = [&](size_t j) {
      return !rd || (j < rd->arguments.size() && rd->arguments[j]) ||
             // a leaf traced as another (same_as) is read where its first is
             (j < same_as.size() && same_as[j] >= 0 && rd->arguments[static_cast<size_t>(same_as[j])]);
    };
    auto read_captured = [&](size_t c) { return !rd || (c < rd->captured.size() && rd->captured[c]); };
    auto read_weight = [&](const std::string& n) {
      return !rd || std::find(rd->weights.begin(), rd->weights.end(), n) != rd->weights.end();
    };
    if (w.argument >= 0) {
      const size_t i = static_cast<size_t>(w.argument);
      if (i >= args.size()) continue;
      const Tensor& d = args[i];
      for (size_t j = 0; j < args.size(); ++j)
        if (j != i && root(j) != root(i) && may_share_memory(args[j], d) && read_arg(j)) {
          WriteAlias a;
          a.written = w.argument;
          a.other_argument = static_cast<int32_t>(j);
          return a;
        }
      for (size_t c = 0; c < captured.size(); ++c)
        if (may_share_memory(captured[c].source, d) && read_captured(c)) {
          WriteAlias a;
          a.written = w.argument;
          a.other = WriteAlias::Other::captured;
          a.other_captured = c;
          return a;
        }
      for (const auto& [name, t] : weights)
        if (may_share_memory(t, d) && read_weight(name)) {
          WriteAlias a;
          a.written = w.argument;
          a.other = WriteAlias::Other::weight;
          a.other_weight = name;
          a.other_type = type_str(t);
          return a;
        }
    } else {
      auto it = weights.find(w.weight);
      if (it == weights.end()) continue;
      for (size_t j = 0; j < args.size(); ++j)
        if (may_share_memory(args[j], it->second) && read_arg(j)) {
          WriteAlias a;
          a.written_weight = w.weight;
          a.written_type = type_str(it->second);
          a.other_argument = static_cast<int32_t>(j);
          return a;
        }
      // Tester t17 F2: a written mutable weight (a captured tensor written
      // while tracing, or a write-back weight of a MEF file) sharing memory
      // with another weight (two captured handles or views of one buffer;
      // two write-back weights bound to one tensor) read after the write:
      // each is read and written back separately.
      for (const auto& [name, t] : weights)
        if (name != w.weight && may_share_memory(t, it->second) && read_weight(name)) {
          WriteAlias a;
          a.written_weight = w.weight;
          a.written_type = type_str(it->second);
          a.other = WriteAlias::Other::weight;
          a.other_weight = name;
          a.other_type = type_str(t);
          // (the lambda takes a pointer to the name: clang 14 refuses a
          // structured binding in a lambda capture)
          a.other_written = std::any_of(writes.begin(), writes.end(), [&, other = &name](const WriteBack& o) {
            return o.argument < 0 && o.weight == *other;
          });
          return a;
        }
      // A captured constant is refused whenever the function reads it, also
      // before the write (tester t18 N1: `WT = W.transpose()` captured, read,
      // then W written): its baked-in bytes change with the write, so a later
      // call would see a different constant.
      for (size_t c = 0; c < captured.size(); ++c)
        if (may_share_memory(captured[c].source, it->second)) {
          WriteAlias a;
          a.written_weight = w.weight;
          a.written_type = type_str(it->second);
          a.other = WriteAlias::Other::captured;
          a.other_captured = c;
          return a;
        }
    }
  }
  return std::nullopt;
}

namespace {
// What the user knows a captured tensor by: its type, and its place among
// the function's captured tensors.
std::string captured_desc(const std::vector<CapturedConstant>& captured, size_t c) {
  std::string d = "a tensor the function captured";
  if (c < captured.size())
    d = "the captured tensor " + type_str(captured[c].source) + " (captured tensor " + std::to_string(c) +
        " of the function, in the order it first used them)";
  return d;
}
// A written weight: for a compiled function, the captured tensor it writes
// in place (its weight name, 'mutable.N', is the compiler's); for a MEF
// file, the tensor bound to the file's write-back weight of that name.
std::string written_desc(const WriteAlias& a, bool from_mef) {
  const std::string type = a.written_type.empty() ? "" : " (" + a.written_type + ")";
  if (from_mef) return "the tensor bound to the file's write-back weight '" + a.written_weight + "'" + type;
  return "the captured tensor" + type + " that the function writes in place";
}
}  // namespace

std::string write_alias_message(const std::string& who, const WriteAlias& a, const TreeDef& in_tree,
                                const std::vector<CapturedConstant>& captured, bool from_mef) {
  const std::vector<std::string> paths = in_tree.leaf_paths();
  auto arg = [&](int32_t i) {
    const size_t k = static_cast<size_t>(i);
    return "argument " + (k < paths.size() && !paths[k].empty() ? paths[k] : std::to_string(i));
  };
  auto weight = [&](const std::string& name, const std::string& type) {
    return "weight '" + name + "'" + (type.empty() ? "" : " (" + type + ")");
  };
  std::string m = who + ": ";
  if (a.written >= 0 && a.other == WriteAlias::Other::argument) {
    m += arg(a.written) + " and " + arg(a.other_argument) + " overlap in memory and the function writes " +
         arg(a.written) + " in place";
  } else if (a.written >= 0 && a.other == WriteAlias::Other::captured) {
    m += arg(a.written) + " overlaps in memory with " + captured_desc(captured, a.other_captured) +
         ", and the function writes " + arg(a.written) + " in place";
  } else if (a.written >= 0) {
    m += arg(a.written) + " overlaps in memory with " + weight(a.other_weight, a.other_type) +
         " and the function writes " + arg(a.written) + " in place";
  } else if (a.other == WriteAlias::Other::argument) {
    m += arg(a.other_argument) + " overlaps in memory with " + written_desc(a, from_mef);
  } else {
    // Two captured tensors (or two weights bound to one tensor): no argument
    // to pass a copy for; jit runs such a function eagerly.
    std::string other;
    if (a.other == WriteAlias::Other::captured)
      other = captured_desc(captured, a.other_captured);
    else if (a.other_written)
      other = from_mef ? "the tensor bound to the file's write-back weight '" + a.other_weight + "' (" + a.other_type + ")"
                       : "the captured tensor (" + a.other_type + ") that the function also writes in place";
    else
      other = "the tensor bound as " + weight(a.other_weight, a.other_type);
    return m + written_desc(a, from_mef) + " and " + other + " share memory and the function reads or writes the "
           "second after writing the first; the compiled code reads and writes back each as a separate tensor, so a "
           "write would be lost or a read see the old value. " +
           (from_mef ? "Bind tensors that do not share memory to the file's weights (e.g. a .clone() of one of them) "
                       "when calling from_mef"
                     : "Capture (or bind) one tensor and take the views inside the function, pass them as arguments, "
                       "or call the function through jit(fn), which runs such a call eagerly");
  }
  m += "; the compiled code reads each argument, captured tensor and weight as a separate tensor, so a read of one "
       "after the write to the other would see the old value where an eager call sees the new one. ";
  m += from_mef ? "Pass a copy instead (e.g. x.clone()), or bind tensors that do not share memory with the arguments "
                  "to the file's weights when calling from_mef (a callable read from a MEF file has no function to "
                  "run eagerly)"
                : "Pass a copy instead (e.g. x.clone()), or call the function through jit(fn), which recompiles for "
                  "identical arguments and runs other overlaps eagerly";
  return m;
}

std::optional<std::vector<int32_t>> identical_alias_groups(std::span<const Tensor> args) {
  std::vector<int32_t> same(args.size(), -1);
  bool any = false;
  for (size_t j = 1; j < args.size(); ++j)
    for (size_t i = 0; i < j; ++i) {
      if (!may_share_memory(args[i], args[j])) continue;
      if (!identical_tensors(args[i], args[j])) return std::nullopt;
      if (same[j] < 0) {
        same[j] = same[i] >= 0 ? same[i] : static_cast<int32_t>(i);
        any = true;
      }
    }
  if (!any) return std::vector<int32_t>{};
  return same;
}

}  // namespace kiln::detail
