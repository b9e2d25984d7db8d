#include "write_alias.h"

#include <algorithm>

#include "../tensor/mutation.h"

namespace kiln::detail {

bool identical_tensors(const Tensor& a, const Tensor& b) {
  return a.is_realized() && b.is_realized() && a.buffer() == b.buffer() && a.offset() == b.offset() &&
         a.dtype() == b.dtype() && a.shape() == b.shape() && a.strides() == b.strides();
}

std::optional<WriteAlias> find_write_alias(TensorRefs args, const std::vector<WriteBack>& writes,
                                           const std::vector<WriteReads>& reads, const std::vector<int32_t>& same_as,
                                           const std::map<std::string, Tensor>& weights,
                                           const std::vector<CapturedConstant>& captured) {
  auto root = [&](size_t i) {
    return i < same_as.size() && same_as[i] >= 0 ? static_cast<size_t>(same_as[i]) : i;
  };
  const bool known = reads.size() == writes.size();
  for (size_t k = 0; k < writes.size(); ++k) {
    const WriteBack& w = writes[k];
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
          return a;
        }
    } else {
      auto it = weights.find(w.weight);
      if (it == weights.end()) continue;
      for (size_t j = 0; j < args.size(); ++j)
        if (may_share_memory(args[j], it->second) && read_arg(j)) {
          WriteAlias a;
          a.written_weight = w.weight;
          a.other_argument = static_cast<int32_t>(j);
          return a;
        }
    }
  }
  return std::nullopt;
}

std::string write_alias_message(const std::string& who, const WriteAlias& a, const TreeDef& in_tree,
                                const std::vector<CapturedConstant>& captured) {
  const std::vector<std::string> paths = in_tree.leaf_paths();
  auto arg = [&](int32_t i) {
    const size_t k = static_cast<size_t>(i);
    return "argument " + (k < paths.size() && !paths[k].empty() ? paths[k] : std::to_string(i));
  };
  std::string m = who + ": ";
  if (a.written >= 0 && a.other == WriteAlias::Other::argument) {
    m += arg(a.written) + " and " + arg(a.other_argument) + " overlap in memory and the function writes " +
         arg(a.written) + " in place";
  } else if (a.written >= 0 && a.other == WriteAlias::Other::captured) {
    std::string what = "captured constant " + std::to_string(a.other_captured);
    if (a.other_captured < captured.size()) {
      const Tensor& s = captured[a.other_captured].source;
      what += " (" + TensorType(s.dtype(), s.shape(), s.device()).str() + ", graph value %" +
              std::to_string(captured[a.other_captured].value) + ")";
    }
    m += arg(a.written) + " overlaps in memory with a tensor the function captured, " + what +
         ", and the function writes " + arg(a.written) + " in place";
  } else if (a.written >= 0) {
    m += arg(a.written) + " overlaps in memory with weight '" + a.other_weight + "' and the function writes " +
         arg(a.written) + " in place";
  } else {
    m += arg(a.other_argument) + " overlaps in memory with the captured tensor the function writes in place "
         "(bound as weight '" + a.written_weight + "')";
  }
  m += "; the compiled code reads each argument, captured tensor and weight as a separate tensor, so a read of one "
       "after the write to the other would see the old value where an eager call sees the new one. Pass a copy "
       "instead (e.g. x.clone()), or call the function through jit(fn), which recompiles for identical arguments "
       "and runs other overlaps eagerly";
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
