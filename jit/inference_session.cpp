#include "inference_session.h"

#include <cstdlib>
#include <cstring>
#include <string>

#include "../tensor/error.h"

namespace kiln {

InferenceSession::InferenceSession(KernelOptions options, int num_threads)
    : options_(options), num_threads_(num_threads) {
  if (num_threads < 0 || num_threads > 1024)
    throw ValueError("InferenceSession: num_threads must be in [0, 1024] (0 = kiln's current setting), got " +
                     std::to_string(num_threads));
  const char* d = std::getenv("KILN_JIT_DUMP");
  if (d && std::strcmp(d, "0") != 0 && *d) options_.dump = true;
}

std::shared_ptr<InferenceSession> InferenceSession::default_session() {
  static std::shared_ptr<InferenceSession> s = std::make_shared<InferenceSession>();
  return s;
}

}  // namespace kiln
