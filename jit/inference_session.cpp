#include "inference_session.h"

#include <cstdlib>
#include <cstring>

namespace kiln {

InferenceSession::InferenceSession(KernelOptions options, int num_threads)
    : options_(options), num_threads_(num_threads) {
  const char* d = std::getenv("KILN_JIT_DUMP");
  if (d && std::strcmp(d, "0") != 0 && *d) options_.dump = true;
}

std::shared_ptr<InferenceSession> InferenceSession::default_session() {
  static std::shared_ptr<InferenceSession> s = std::make_shared<InferenceSession>();
  return s;
}

}  // namespace kiln
