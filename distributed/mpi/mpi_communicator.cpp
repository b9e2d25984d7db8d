// The MPI Communicator over MPI_COMM_WORLD (MPICH), built as the plugin
// libkiln_mpi.so that libkiln loads when a program runs under mpiexec. Collectives are the
// non-blocking MPI calls polled with MPI_Test so that a peer that never joins
// ends in CollectiveError after collective_timeout() instead of a hang.
// Every collective first agrees on what it is (agree(): one small
// all-reduce of its kind, count, dtype and op/root): MPI matches collectives
// by order alone, so a rank calling all_to_all while another calls
// all_reduce would otherwise exchange bytes that mean different things and
// return wrong numbers without an error.
#include <mpi.h>

#include <chrono>
#include <climits>
#include <cstdlib>
#include <mutex>
#include <thread>

#include "../mpi.h"
#include "../reduce_kernels.h"

namespace kiln::distributed::mpi {

namespace {

bool g_broken = false;  // a collective timed out: abort at exit, do not finalise

void at_exit() {
  int fin = 0;
  MPI_Finalized(&fin);
  if (fin) return;
  if (g_broken) MPI_Abort(MPI_COMM_WORLD, 1);
  else MPI_Finalize();
}

void check_mpi(int rc, const char* what) {
  if (rc == MPI_SUCCESS) return;
  char buf[MPI_MAX_ERROR_STRING];
  int len = 0;
  MPI_Error_string(rc, buf, &len);
  throw CollectiveError(std::string(what) + ": MPI error: " + std::string(buf, len));
}

int checked_count(size_t count, const char* what) {
  if (count > static_cast<size_t>(INT_MAX))
    throw ValueError(std::string(what) + ": count " + std::to_string(count) + " exceeds MPI's limit of " +
                     std::to_string(INT_MAX) + " elements per rank");
  return static_cast<int>(count);
}

MPI_Datatype mpi_type(DType d) {
  switch (d) {
    case DType::bool_: return MPI_C_BOOL;
    case DType::uint8: return MPI_UINT8_T;
    case DType::int8: return MPI_INT8_T;
    case DType::int32: return MPI_INT32_T;
    case DType::int64: return MPI_INT64_T;
    case DType::int16: return MPI_INT16_T;
    case DType::uint16: return MPI_UINT16_T;
    case DType::uint32: return MPI_UINT32_T;
    case DType::uint64: return MPI_UINT64_T;
    case DType::float16:
    case DType::bfloat16: return MPI_UINT16_T;  // moved as bits; reduced by our own ops
    case DType::float32: return MPI_FLOAT;
    default: return MPI_DOUBLE;
  }
}

// User-defined reductions (one per (dtype, op)) where MPI's built-in ops do
// not give kiln's semantics: 16-bit floats, NaN-propagating float max/min.
template <DType D, ReduceOp O>
void user_op(void* in, void* inout, int* len, MPI_Datatype*) {
  // MPI computes inout = in op inout with `in` from the lower rank.
  kiln::detail::visit_dtype(D, [&](auto tag) {
    using T = typename decltype(tag)::type;
    auto* acc = static_cast<T*>(inout);
    const auto* lo = static_cast<const T*>(in);
    // combine(acc=lo, x=inout) keeps rank order: result = lo op hi.
    for (int i = 0; i < *len; ++i) {
      T a = lo[i];
      detail::combine<T>(O, &a, &acc[i], 1);
      acc[i] = a;
    }
  });
}

template <DType D>
MPI_Op make_ops(ReduceOp op) {
  MPI_Op o;
  MPI_User_function* f = op == ReduceOp::sum ? &user_op<D, ReduceOp::sum>
                       : op == ReduceOp::max ? &user_op<D, ReduceOp::max>
                                             : &user_op<D, ReduceOp::min>;
  MPI_Op_create(f, /*commute=*/0, &o);  // non-commutative: MPI keeps rank order
  return o;
}

MPI_Op mpi_op(DType d, ReduceOp op) {
  if (d == DType::bool_) return op == ReduceOp::min ? MPI_LAND : MPI_LOR;
  if (!is_floating(d) || (op == ReduceOp::sum && (d == DType::float32 || d == DType::float64)))
    return op == ReduceOp::sum ? MPI_SUM : op == ReduceOp::max ? MPI_MAX : MPI_MIN;
  static std::once_flag once;
  static MPI_Op ops[4][3];  // float16, bfloat16, float32, float64 x sum, max, min
  std::call_once(once, [] {
    for (int o = 0; o < 3; ++o) {
      ops[0][o] = make_ops<DType::float16>(ReduceOp(o));
      ops[1][o] = make_ops<DType::bfloat16>(ReduceOp(o));
      ops[2][o] = make_ops<DType::float32>(ReduceOp(o));
      ops[3][o] = make_ops<DType::float64>(ReduceOp(o));
    }
  });
  const int i = d == DType::float16 ? 0 : d == DType::bfloat16 ? 1 : d == DType::float32 ? 2 : 3;
  return ops[i][static_cast<int>(op)];
}

class MpiCommunicator final : public Communicator {
 public:
  explicit MpiCommunicator(MPI_Comm comm) : comm_(comm) {
    MPI_Comm_rank(comm_, &rank_);
    MPI_Comm_size(comm_, &size_);
  }
  ~MpiCommunicator() override {
    int fin = 0;
    MPI_Finalized(&fin);
    if (comm_ != MPI_COMM_WORLD && !fin) MPI_Comm_free(&comm_);
  }
  int rank() const override { return rank_; }
  int size() const override { return size_; }
  std::string backend() const override { return "mpi"; }

  void all_reduce(const void* send, void* recv, size_t count, DType dtype, ReduceOp op) override {
    const int n = checked_count(count, "all_reduce");
    agree(Kind::all_reduce, count, dtype, static_cast<int>(op));
    MPI_Request r;
    check_mpi(MPI_Iallreduce(send == recv ? MPI_IN_PLACE : send, recv, n, mpi_type(dtype), mpi_op(dtype, op),
                             comm_, &r),
              "all_reduce");
    wait(r, "all_reduce");
  }
  void all_gather(const void* send, void* recv, size_t count, DType dtype) override {
    const int n = checked_count(count, "all_gather");
    agree(Kind::all_gather, count, dtype, 0);
    MPI_Request r;
    check_mpi(MPI_Iallgather(send, n, mpi_type(dtype), recv, n, mpi_type(dtype), comm_, &r), "all_gather");
    wait(r, "all_gather");
  }
  void reduce_scatter(const void* send, void* recv, size_t count, DType dtype, ReduceOp op) override {
    const int n = checked_count(count, "reduce_scatter");
    agree(Kind::reduce_scatter, count, dtype, static_cast<int>(op));
    checked_count(count * size_, "reduce_scatter");
    MPI_Request r;
    check_mpi(MPI_Ireduce_scatter_block(send, recv, n, mpi_type(dtype), mpi_op(dtype, op), comm_, &r),
              "reduce_scatter");
    wait(r, "reduce_scatter");
  }
  void broadcast(void* data, size_t count, DType dtype, int root) override {
    check_rank(root, "broadcast", "root");
    agree(Kind::broadcast, count, dtype, root);
    MPI_Request r;
    check_mpi(MPI_Ibcast(data, checked_count(count, "broadcast"), mpi_type(dtype), root, comm_, &r),
              "broadcast");
    wait(r, "broadcast");
  }
  void all_to_all(const void* send, void* recv, size_t count, DType dtype) override {
    if (send == recv && count > 0) throw ValueError("all_to_all: send and recv must be different buffers");
    const int n = checked_count(count, "all_to_all");
    agree(Kind::all_to_all, count, dtype, 0);
    MPI_Request r;
    check_mpi(MPI_Ialltoall(send, n, mpi_type(dtype), recv, n, mpi_type(dtype), comm_, &r), "all_to_all");
    wait(r, "all_to_all");
  }
  void send(const void* data, size_t count, DType dtype, int dst, int tag) override {
    check_rank(dst, "send", "dst");
    MPI_Request r;
    check_mpi(MPI_Isend(data, checked_count(count, "send"), mpi_type(dtype), dst, tag, comm_, &r), "send");
    wait(r, "send");
  }
  void recv(void* data, size_t count, DType dtype, int src, int tag) override {
    check_rank(src, "recv", "src");
    MPI_Request r;
    check_mpi(MPI_Irecv(data, checked_count(count, "recv"), mpi_type(dtype), src, tag, comm_, &r), "recv");
    MPI_Status st;
    wait(r, "recv", &st);
    int got = 0;
    MPI_Get_count(&st, mpi_type(dtype), &got);
    if (static_cast<size_t>(got) != count)
      throw ValueError("recv: rank " + std::to_string(rank_) + " expected " + std::to_string(count) +
                       " elements from rank " + std::to_string(src) + ", got " + std::to_string(got));
  }
  void barrier() override {
    agree(Kind::barrier, 0, DType::bool_, 0);
    MPI_Request r;
    check_mpi(MPI_Ibarrier(comm_, &r), "barrier");
    wait(r, "barrier");
  }
  std::shared_ptr<Communicator> split(int color, int key) override {
    if (color < 0) throw ValueError("split: expected a color >= 0, got " + std::to_string(color));
    MPI_Comm c;
    check_mpi(MPI_Comm_split(comm_, color, key, &c), "split");
    return std::make_shared<MpiCommunicator>(c);
  }

 private:
  enum class Kind : int { all_reduce = 1, all_gather, reduce_scatter, broadcast, all_to_all, barrier };
  static const char* kind_name(long long k) {
    static const char* names[] = {"?", "all_reduce", "all_gather", "reduce_scatter", "broadcast", "all_to_all",
                                  "barrier"};
    return k >= 1 && k <= 6 ? names[k] : "?";
  }
  static std::string describe(const long long* f) {
    std::string s = kind_name(f[0]);
    s += " of " + std::to_string(f[1]) + " elements";
    if (f[0] != static_cast<long long>(Kind::barrier)) s += " of " + std::string(name(static_cast<DType>(f[2])));
    if (f[0] == static_cast<long long>(Kind::broadcast)) s += ", root " + std::to_string(f[3]);
    if (f[0] == static_cast<long long>(Kind::all_reduce) || f[0] == static_cast<long long>(Kind::reduce_scatter))
      s += ", op " + std::string(f[3] == 0 ? "sum" : f[3] == 1 ? "max" : f[3] == 2 ? "min" : "?");
    return s;
  }
  // Every rank contributes (kind, count, dtype, extra) and its negation to
  // one MAX all-reduce: the result holds the largest and the smallest value
  // of each field, equal to this rank's own exactly when all ranks agree.
  // Every rank then sees the same disagreement and throws, none proceeds.
  void agree(Kind kind, size_t count, DType dtype, int extra) {
    const char* what = kind_name(static_cast<long long>(kind));
    const long long mine[4] = {static_cast<long long>(kind), static_cast<long long>(count),
                               static_cast<long long>(dtype), extra};
    long long buf[8];
    for (int i = 0; i < 4; ++i) buf[i] = mine[i], buf[4 + i] = -mine[i];
    MPI_Request r;
    check_mpi(MPI_Iallreduce(MPI_IN_PLACE, buf, 8, MPI_LONG_LONG, MPI_MAX, comm_, &r), what);
    wait(r, what);
    long long hi[4], lo[4];
    bool same = true;
    for (int i = 0; i < 4; ++i) {
      hi[i] = buf[i];
      lo[i] = -buf[4 + i];
      same = same && hi[i] == mine[i] && lo[i] == mine[i];
    }
    if (same) return;
    const long long* other = (hi[0] != mine[0] || hi[1] != mine[1] || hi[2] != mine[2] || hi[3] != mine[3]) ? hi : lo;
    // `other` mixes fields of several ranks when more than two disagree;
    // the kind (field 0) always comes from one of them.
    throw CollectiveError("collective mismatch on rank " + std::to_string(rank_) + " of " + std::to_string(size_) +
                          ": this rank calls " + describe(mine) + ", another rank calls " + describe(other) +
                          " (every rank must call the same collectives in the same order)");
  }
  void check_rank(int r, const char* what, const char* arg) const {
    if (r < 0 || r >= size_)
      throw IndexError(std::string(what) + ": " + arg + " " + std::to_string(r) + " is outside the ranks [0, " +
                       std::to_string(size_) + ")");
  }
  // Polls until done; MPICH makes progress inside MPI_Test.
  void wait(MPI_Request& r, const char* what, MPI_Status* st = MPI_STATUS_IGNORE) {
    if (g_broken)
      throw CollectiveError(std::string(what) + " on rank " + std::to_string(rank_) +
                            ": MPI communication is broken by an earlier timeout");
    const double t = collective_timeout();
    const auto deadline = std::chrono::steady_clock::now() + std::chrono::duration<double>(t);
    int done = 0;
    for (unsigned spins = 0;; ++spins) {
      check_mpi(MPI_Test(&r, &done, st), what);
      if (done) return;
      if ((spins & 1023) == 1023) {
        if (std::chrono::steady_clock::now() > deadline) {
          g_broken = true;
          throw CollectiveError(std::string(what) + " on rank " + std::to_string(rank_) + " of " +
                                std::to_string(size_) + ": the other ranks did not complete it within " +
                                std::to_string(t) + " s (KILN_COLLECTIVE_TIMEOUT_S); a rank did not join or called "
                                "a different collective");
        }
        std::this_thread::yield();  // oversubscribed hosts: let the peers run
      }
    }
  }
  MPI_Comm comm_;
  int rank_ = 0, size_ = 1;
};

}  // namespace

}  // namespace kiln::distributed::mpi

// The plugin's entry point (distributed/mpi_loader.cpp calls it once):
// initialises MPI unless the program did, and stores the world communicator.
extern "C" __attribute__((visibility("default"))) void kiln_mpi_world(
    std::shared_ptr<kiln::distributed::Communicator>* out) {
  using namespace kiln::distributed::mpi;
  int inited = 0;
  MPI_Initialized(&inited);
  if (!inited) {
    int provided = 0;
    check_mpi(MPI_Init_thread(nullptr, nullptr, MPI_THREAD_SERIALIZED, &provided), "distributed::mpi::world");
    std::atexit(at_exit);
  }
  *out = std::make_shared<MpiCommunicator>(MPI_COMM_WORLD);
}
