// kiln (internal): whole-number settings read from KILN_* environment
// variables (KILN_CPU_DEVICES, KILN_BUFFER_CACHE_BYTES). Not part of
// <kiln/kiln.h>.
#pragma once
#include <cstdint>

namespace kiln::detail {

/// The environment variable `name` read as a decimal whole number in
/// [lo, hi]; `fallback` when it is unset or empty. Anything else (a sign,
/// spaces, a unit such as "1G", an exponent such as "1e9", a value out of
/// range) throws ValueError "<name>: expected <what> in [lo, hi], got
/// '<text>'" rather than being ignored.
uint64_t env_whole_number(const char* name, uint64_t fallback, uint64_t lo, uint64_t hi, const char* what);

}  // namespace kiln::detail
