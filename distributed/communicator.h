// kiln: the Communicator interface: collectives among the `size()` ranks of
// a group (MLX's distributed group, PyTorch's c10d ProcessGroup). Three
// implementations: in-process (CPU devices of one process, one thread per
// rank; in_process.h), MPI (processes under mpiexec; mpi.h) and, later, NCCL.
#pragma once
#include <cstddef>
#include <memory>
#include <string>

#include "../tensor/dtype.h"
#include "../tensor/error.h"
#include "placement.h"

namespace kiln::distributed {

/// A collective that did not complete: a rank did not join within the
/// timeout (collective_timeout()), or the group broke because an earlier
/// collective timed out. The group cannot be used afterwards.
class CollectiveError : public Error { using Error::Error; };

/// Seconds a rank waits for the others in one collective or recv before
/// throwing CollectiveError. Default: the environment variable
/// KILN_COLLECTIVE_TIMEOUT_S, read at first use, else 300.
double collective_timeout();
/// Overrides the timeout (seconds > 0; ValueError otherwise).
void set_collective_timeout(double seconds);

/// One rank's handle on a group. Every rank of the group must call the same
/// collectives in the same order with the same count, dtype, op and root;
/// the in-process implementation checks this and throws ValueError on a
/// mismatch (on every rank), MPI's cannot always tell and may time out.
///
/// Buffers are host memory of `count` elements of `dtype` (a count is per
/// rank). `send` and `recv` may be the same buffer where stated (in place).
/// Reductions combine in the element dtype (float16/bfloat16 round after
/// each step); see ReduceOp for bool and NaN. In-process they combine the
/// ranks' values in rank order (0, 1, ...), so every rank gets bitwise the
/// same result; MPI's built-in float sums follow MPI's own order (a tree for
/// large groups; the standard advises the same result on every rank), its
/// user-defined ops (16-bit floats, float max/min) are declared
/// non-commutative so MPI keeps rank order. Every call blocks
/// until this rank's part is complete. Counts above INT32_MAX throw
/// ValueError under MPI.
class Communicator {
 public:
  virtual ~Communicator() = default;
  virtual int rank() const = 0;
  virtual int size() const = 0;
  /// "in_process" or "mpi".
  virtual std::string backend() const = 0;

  /// recv = op over ranks of send (count elements); send == recv allowed.
  virtual void all_reduce(const void* send, void* recv, size_t count, DType dtype, ReduceOp op) = 0;
  /// recv (size() * count elements) = the ranks' send buffers in rank order.
  virtual void all_gather(const void* send, void* recv, size_t count, DType dtype) = 0;
  /// send holds size() blocks of count elements; recv = op over ranks of block rank().
  virtual void reduce_scatter(const void* send, void* recv, size_t count, DType dtype, ReduceOp op) = 0;
  /// data (count elements) of rank `root` is copied to every rank's data.
  virtual void broadcast(void* data, size_t count, DType dtype, int root) = 0;
  /// send holds size() blocks of count elements, block j for rank j; recv
  /// block i is rank i's block rank(). send != recv.
  virtual void all_to_all(const void* send, void* recv, size_t count, DType dtype) = 0;
  /// Point to point: messages between a pair of ranks with one tag arrive in
  /// order. send returns once the data is copied or delivered; recv waits.
  virtual void send(const void* data, size_t count, DType dtype, int dst, int tag = 0) = 0;
  virtual void recv(void* data, size_t count, DType dtype, int src, int tag = 0) = 0;
  /// Returns when every rank has entered barrier().
  virtual void barrier() = 0;
  /// Collective: the ranks that pass the same `color` (>= 0) form a new
  /// group, ranked by (key, rank). Returns this rank's communicator in it
  /// (MPI_Comm_split). ValueError for a negative color.
  virtual std::shared_ptr<Communicator> split(int color, int key) = 0;
};

}  // namespace kiln::distributed
