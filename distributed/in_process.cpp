#include "in_process.h"

#include <algorithm>
#include <chrono>
#include <condition_variable>
#include <cstring>
#include <deque>
#include <map>
#include <mutex>
#include <tuple>

#include "reduce_kernels.h"

namespace kiln::distributed {

namespace {

enum class Coll : uint8_t { all_reduce, all_gather, reduce_scatter, broadcast, all_to_all, barrier };
const char* coll_name(Coll c) {
  static const char* n[] = {"all_reduce", "all_gather", "reduce_scatter", "broadcast", "all_to_all", "barrier"};
  return n[static_cast<int>(c)];
}

// What one rank brought to the current collective.
struct Slot {
  Coll coll = Coll::barrier;
  const void* send = nullptr;
  size_t count = 0;
  DType dtype = DType::float32;
  ReduceOp op = ReduceOp::sum;
  int root = 0;
};

// State shared by the ranks of one group.
struct World {
  explicit World(int n) : n(n), slots(n), joined(n, false) {}
  const int n;
  std::mutex mu;
  std::condition_variable cv;
  uint64_t generation = 0;  // completed barrier phases
  int arrived = 0;
  std::vector<Slot> slots;
  std::vector<bool> joined;  // who arrived in the current phase
  bool broken = false;
  std::string broken_why;
  // Groups made by split(), keyed by (split number, color), until every
  // member has taken its communicator.
  std::map<std::pair<uint64_t, int>, std::vector<std::shared_ptr<Communicator>>> splits;
  // Point-to-point messages, keyed by (src, dst, tag), in send order.
  std::map<std::tuple<int, int, int>, std::deque<std::vector<std::byte>>> mail;

  [[noreturn]] void throw_broken(int rank, const char* what) {
    throw CollectiveError(std::string(what) + " on rank " + std::to_string(rank) +
                          ": the in-process group is broken by an earlier failure (" + broken_why + ")");
  }

  // A reusable barrier with a deadline. Called with `lk` held.
  void phase(std::unique_lock<std::mutex>& lk, int rank, const char* what) {
    if (broken) throw_broken(rank, what);
    const uint64_t gen = generation;
    joined[rank] = true;
    if (++arrived == n) {
      arrived = 0;
      std::fill(joined.begin(), joined.end(), false);
      ++generation;
      cv.notify_all();
      return;
    }
    const double t = collective_timeout();
    const auto deadline = std::chrono::steady_clock::now() + std::chrono::duration<double>(t);
    if (!cv.wait_until(lk, deadline, [&] { return generation != gen || broken; })) {
      std::string missing;
      for (int r = 0; r < n; ++r)
        if (!joined[r]) missing += (missing.empty() ? "" : ", ") + std::to_string(r);
      broken = true;
      broken_why = std::string(what) + ": rank(s) " + missing + " of " + std::to_string(n) + " did not join within " +
                   std::to_string(t) + " s (KILN_COLLECTIVE_TIMEOUT_S)";
      cv.notify_all();
      throw CollectiveError(std::string(what) + " on rank " + std::to_string(rank) + ": " + broken_why);
    }
    if (generation == gen) throw_broken(rank, what);
  }
};

class InProcessCommunicator final : public Communicator {
 public:
  InProcessCommunicator(std::shared_ptr<World> w, int rank) : w_(std::move(w)), rank_(rank) {}
  int rank() const override { return rank_; }
  int size() const override { return w_->n; }
  std::string backend() const override { return "in_process"; }

  void all_reduce(const void* send, void* recv, size_t count, DType dtype, ReduceOp op) override {
    run({Coll::all_reduce, send, count, dtype, op, 0}, recv, count, [&](std::byte* out) {
      reduce_blocks(out, count, dtype, op, 0);
    });
  }
  void all_gather(const void* send, void* recv, size_t count, DType dtype) override {
    const size_t nb = count * size_of(dtype);
    run({Coll::all_gather, send, count, dtype, ReduceOp::sum, 0}, recv, count * w_->n, [&](std::byte* out) {
      for (int r = 0; r < w_->n; ++r) std::memcpy(out + r * nb, w_->slots[r].send, nb);
    });
  }
  void reduce_scatter(const void* send, void* recv, size_t count, DType dtype, ReduceOp op) override {
    run({Coll::reduce_scatter, send, count, dtype, op, 0}, recv, count, [&](std::byte* out) {
      reduce_blocks(out, count, dtype, op, static_cast<size_t>(rank_) * count);
    });
  }
  void broadcast(void* data, size_t count, DType dtype, int root) override {
    check_rank(root, "broadcast", "root");
    run({Coll::broadcast, data, count, dtype, ReduceOp::sum, root}, data, count, [&](std::byte* out) {
      std::memcpy(out, w_->slots[root].send, count * size_of(dtype));
    });
  }
  void all_to_all(const void* send, void* recv, size_t count, DType dtype) override {
    if (send == recv && count > 0) throw ValueError("all_to_all: send and recv must be different buffers");
    const size_t nb = count * size_of(dtype);
    run({Coll::all_to_all, send, count, dtype, ReduceOp::sum, 0}, recv, count * w_->n, [&](std::byte* out) {
      for (int r = 0; r < w_->n; ++r)
        std::memcpy(out + r * nb, static_cast<const std::byte*>(w_->slots[r].send) + rank_ * nb, nb);
    });
  }
  void barrier() override {
    run({Coll::barrier, nullptr, 0, DType::uint8, ReduceOp::sum, 0}, nullptr, 0, [](std::byte*) {});
  }

  std::shared_ptr<Communicator> split(int color, int key) override {
    if (color < 0) throw ValueError("split: expected a color >= 0, got " + std::to_string(color));
    const int n = w_->n;
    int64_t mine[2] = {color, key};
    std::vector<int64_t> everyone(2 * n);
    all_gather(mine, everyone.data(), 2, DType::int64);
    // Members of my color, ordered by (key, rank).
    std::vector<std::pair<int64_t, int>> members;
    for (int r = 0; r < n; ++r)
      if (everyone[2 * r] == color) members.push_back({everyone[2 * r + 1], r});
    std::sort(members.begin(), members.end());
    int me = 0;
    while (members[me].second != rank_) ++me;
    const auto id = std::make_pair(split_count_++, color);
    if (me == 0) {  // the group's first member makes it
      auto g = make_in_process_group(static_cast<int>(members.size()));
      std::lock_guard<std::mutex> lk(w_->mu);
      w_->splits[id] = std::move(g);
    }
    barrier();
    std::shared_ptr<Communicator> c;
    {
      std::lock_guard<std::mutex> lk(w_->mu);
      c = w_->splits[id][me];
    }
    barrier();
    if (me == 0) {
      std::lock_guard<std::mutex> lk(w_->mu);
      w_->splits.erase(id);
    }
    return c;
  }

  void send(const void* data, size_t count, DType dtype, int dst, int tag) override {
    check_rank(dst, "send", "dst");
    const auto* p = static_cast<const std::byte*>(data);
    std::vector<std::byte> msg(p, p + count * size_of(dtype));
    std::lock_guard<std::mutex> lk(w_->mu);
    if (w_->broken) w_->throw_broken(rank_, "send");
    w_->mail[{rank_, dst, tag}].push_back(std::move(msg));
    w_->cv.notify_all();
  }
  void recv(void* data, size_t count, DType dtype, int src, int tag) override {
    check_rank(src, "recv", "src");
    std::unique_lock<std::mutex> lk(w_->mu);
    auto& q = w_->mail[{src, rank_, tag}];
    const double t = collective_timeout();
    const auto deadline = std::chrono::steady_clock::now() + std::chrono::duration<double>(t);
    if (!w_->cv.wait_until(lk, deadline, [&] { return !q.empty() || w_->broken; })) {
      w_->broken = true;
      w_->broken_why = "recv: rank " + std::to_string(rank_) + " waited " + std::to_string(t) +
                       " s for a message from rank " + std::to_string(src) + " with tag " + std::to_string(tag) +
                       " (KILN_COLLECTIVE_TIMEOUT_S)";
      w_->cv.notify_all();
      throw CollectiveError(w_->broken_why);
    }
    if (q.empty()) w_->throw_broken(rank_, "recv");
    std::vector<std::byte> msg = std::move(q.front());
    q.pop_front();
    const size_t nb = count * size_of(dtype);
    if (msg.size() != nb)
      throw ValueError("recv: rank " + std::to_string(rank_) + " expected " + std::to_string(nb) + " bytes from rank " +
                       std::to_string(src) + ", got a message of " + std::to_string(msg.size()) + " bytes");
    if (nb) std::memcpy(data, msg.data(), nb);
  }

 private:
  void check_rank(int r, const char* what, const char* arg) const {
    if (r < 0 || r >= w_->n)
      throw IndexError(std::string(what) + ": " + arg + " " + std::to_string(r) + " is outside the group's ranks [0, " +
                       std::to_string(w_->n) + ")");
  }

  // out = op over ranks (in rank order) of each rank's send[offset, offset + count).
  void reduce_blocks(std::byte* out, size_t count, DType dtype, ReduceOp op, size_t offset) const {
    if (count == 0) return;  // nothing to reduce (and memcpy forbids null pointers even then)
    const size_t isz = size_of(dtype);
    std::memcpy(out, static_cast<const std::byte*>(w_->slots[0].send) + offset * isz, count * isz);
    for (int r = 1; r < w_->n; ++r)
      detail::combine(dtype, op, out, static_cast<const std::byte*>(w_->slots[r].send) + offset * isz, count);
  }

  // Every collective: publish this rank's slot, wait for all, check they
  // match, compute this rank's result into a scratch buffer from the others'
  // send buffers, wait until nobody reads them any more, then write recv
  // (which may alias send).
  template <class F>
  void run(Slot mine, void* recv, size_t recv_count, F&& compute) {
    const char* what = coll_name(mine.coll);
    std::unique_lock<std::mutex> lk(w_->mu);
    w_->slots[rank_] = mine;
    w_->phase(lk, rank_, what);
    const Slot& s0 = w_->slots[0];
    for (int r = 1; r < w_->n; ++r) {
      const Slot& s = w_->slots[r];
      if (s.coll != s0.coll || s.count != s0.count || s.dtype != s0.dtype || s.op != s0.op || s.root != s0.root) {
        auto desc = [](const Slot& x) {
          return std::string(coll_name(x.coll)) + "(count " + std::to_string(x.count) + ", " +
                 std::string(kiln::name(x.dtype)) + ", " + name(x.op) + ", root " + std::to_string(x.root) + ")";
        };
        std::string msg = std::string(what) + " on rank " + std::to_string(rank_) + ": mismatched collectives: rank 0 called " +
                          desc(s0) + " but rank " + std::to_string(r) + " called " + desc(s);
        // Keep the group usable: every rank sees the same slots and throws
        // the same error, after one more phase so that nobody overwrites a
        // slot another rank is still reading.
        w_->phase(lk, rank_, what);
        throw ValueError(msg);
      }
    }
    lk.unlock();
    std::vector<std::byte> scratch(recv_count * size_of(mine.dtype));
    compute(scratch.data());
    lk.lock();
    w_->phase(lk, rank_, what);
    lk.unlock();
    if (!scratch.empty()) std::memcpy(recv, scratch.data(), scratch.size());
  }

  std::shared_ptr<World> w_;
  int rank_;
  uint64_t split_count_ = 0;  // split() calls so far (the same on every rank)
};

}  // namespace

std::vector<std::shared_ptr<Communicator>> make_in_process_group(int n) {
  if (n < 1) throw ValueError("make_in_process_group: expected n >= 1 ranks, got " + std::to_string(n));
  auto w = std::make_shared<World>(n);
  std::vector<std::shared_ptr<Communicator>> v;
  for (int r = 0; r < n; ++r) v.push_back(std::make_shared<InProcessCommunicator>(w, r));
  return v;
}

}  // namespace kiln::distributed
