// kiln (internal): dispatch on an element's width alone, for data movement
// that copies bits and never interprets them (gather, tril/triu, diag, ...).
#pragma once
#include <cstddef>
#include <cstdint>

#include "../../tensor/dispatch.h"

namespace kiln::cpu {

/// Calls f(detail::TypeTag<W>{}) for the unsigned type W as wide as one
/// element of `bytes` bytes (1, 2, 4; anything else: 8).
template <class F>
void visit_width(size_t bytes, F&& f) {
  switch (bytes) {
    case 1: f(detail::TypeTag<uint8_t>{}); break;
    case 2: f(detail::TypeTag<uint16_t>{}); break;
    case 4: f(detail::TypeTag<uint32_t>{}); break;
    default: f(detail::TypeTag<uint64_t>{}); break;
  }
}

}  // namespace kiln::cpu
