// kiln tests: helpers for distributed/ tests: run a function on n ranks
// (threads) of an in-process group, and deterministic per-rank values in any
// dtype with a float64 reference.
#pragma once
#include <cstddef>
#include <exception>
#include <functional>
#include <thread>
#include <vector>

#include "../distributed/communicator.h"
#include "../distributed/in_process.h"
#include "../tensor/dispatch.h"

namespace dt {

using namespace kiln;
using namespace kiln::distributed;

/// Runs fn(comm) on each rank's thread; rethrows the first rank's exception.
inline void run_ranks(int n, const std::function<void(Communicator&)>& fn) {
  auto group = make_in_process_group(n);
  std::vector<std::exception_ptr> errs(n);
  std::vector<std::thread> th;
  for (int r = 0; r < n; ++r)
    th.emplace_back([&, r] {
      try {
        fn(*group[r]);
      } catch (...) {
        errs[r] = std::current_exception();
      }
    });
  for (auto& t : th) t.join();
  for (auto& e : errs)
    if (e) std::rethrow_exception(e);
}

/// A small value for (rank, element) that every dtype holds exactly; sums of
/// four of them stay exact in int8 and float16.
inline double value(DType d, int rank, size_t i) {
  if (d == DType::bool_) return (rank + i) % 3 == 0 ? 1.0 : 0.0;
  const int v = static_cast<int>((rank * 7 + i * 3) % 11);
  return kiln::is_unsigned(d) ? v : v - 5;
}

inline double get(DType d, const void* p, size_t i) {
  return kiln::detail::visit_dtype(d, [&](auto tag) {
    using T = typename decltype(tag)::type;
    return kiln::detail::convert<double>(static_cast<const T*>(p)[i]);
  });
}
inline void put(DType d, void* p, size_t i, double v) {
  kiln::detail::visit_dtype(d, [&](auto tag) {
    using T = typename decltype(tag)::type;
    static_cast<T*>(p)[i] = kiln::detail::convert<T>(v);
  });
}

/// The float64 reference of op over ranks 0..n-1 of value(d, r, i).
inline double reduced(DType d, ReduceOp op, int n, size_t i) {
  double acc = value(d, 0, i);
  for (int r = 1; r < n; ++r) {
    const double x = value(d, r, i);
    if (d == DType::bool_) acc = op == ReduceOp::min ? double(acc && x) : double(acc || x);
    else acc = op == ReduceOp::sum ? acc + x : op == ReduceOp::max ? std::max(acc, x) : std::min(acc, x);
  }
  return acc;
}

/// A byte buffer of n elements of d filled by f(i).
inline std::vector<std::byte> filled(DType d, size_t n, const std::function<double(size_t)>& f) {
  std::vector<std::byte> b(n * size_of(d) + 1);
  for (size_t i = 0; i < n; ++i) put(d, b.data(), i, f(i));
  return b;
}

}  // namespace dt
