// The standard pipeline: canonicalise (so equal ops look equal), simplify,
// fold, merge, then drop what is dead; repeated while a round changes
// something, since each pass can expose work for the others (a fold makes a
// `x * 1` visible, a merge makes a reshape of a reshape visible, ...).
#include "passes.h"
#include "rewriter.h"

namespace kiln {
namespace {

constexpr int kMaxRounds = 4;

void optimize_one(Graph& g) {
  for (int round = 0; round < kMaxRounds; ++round) {
    bool changed = detail::run_canonicalize_shapes(g);
    changed = detail::run_algebraic_simplification(g) || changed;
    changed = detail::run_constant_folding(g, 1024) || changed;
    changed = detail::run_common_subexpression_elimination(g) || changed;
    changed = detail::run_dead_code_elimination(g) || changed;
    if (!changed) return;
  }
}

}  // namespace

void optimize(Graph& g) {
  optimize_one(g);
  if (g.root() != &g) return;
  for (const auto& [name, body] : g.subgraphs()) optimize_one(*body);
}

}  // namespace kiln
