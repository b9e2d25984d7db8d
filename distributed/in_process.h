// kiln: the in-process Communicator: the ranks are threads of one process
// (one per CPU device of a mesh), exchanging data through shared memory.
#pragma once
#include <memory>
#include <vector>

#include "communicator.h"

namespace kiln::distributed {

/// A group of `n` ranks in this process (n >= 1; ValueError otherwise):
/// element r is rank r's communicator, to be used by one thread at a time.
/// Each collective must be entered by all n ranks (from n threads). A rank
/// that waits longer than collective_timeout() throws CollectiveError naming
/// the ranks that did not join, and the group is broken from then on (every
/// later call on any rank throws CollectiveError). Ranks calling different
/// collectives (or counts, dtypes, ops, roots) all throw ValueError.
std::vector<std::shared_ptr<Communicator>> make_in_process_group(int n);

}  // namespace kiln::distributed
