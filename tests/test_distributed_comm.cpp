// distributed/: every collective of the in-process Communicator, for every
// dtype, on 1-4 ranks, against a float64 reference; timeouts, mismatched
// collectives and bad arguments end in errors, not hangs.
#include <atomic>
#include <chrono>

#include "../distributed/init.h"
#include "../distributed/mpi.h"
#include "distributed_test_util.h"
#include "test_util.h"

using namespace dt;

namespace {
const ReduceOp kOps[] = {ReduceOp::sum, ReduceOp::max, ReduceOp::min};

// Restores the collective timeout when a test ends.
struct TimeoutGuard {
  double saved = collective_timeout();
  explicit TimeoutGuard(double t) { set_collective_timeout(t); }
  ~TimeoutGuard() { set_collective_timeout(saved); }
};
}  // namespace

TEST_SUITE("distributed_comm") {
  TEST_CASE("every collective, every dtype, 1-4 ranks") {
    const size_t count = 5;
    for (int n = 1; n <= 4; ++n) {
      for (DType d : kt::all_dtypes()) {
        CAPTURE(n);
        CAPTURE(d);
        std::atomic<int> bad{0};
        auto expect = [&](double got, double want) {
          if (got != want) ++bad;
        };
        run_ranks(n, [&](Communicator& c) {
          const int r = c.rank();
          REQUIRE(c.size() == n);
          for (ReduceOp op : kOps) {
            auto in = filled(d, count, [&](size_t i) { return value(d, r, i); });
            auto out = filled(d, count, [](size_t) { return 0; });
            c.all_reduce(in.data(), out.data(), count, d, op);
            for (size_t i = 0; i < count; ++i) expect(get(d, out.data(), i), reduced(d, op, n, i));
            c.all_reduce(in.data(), in.data(), count, d, op);  // in place
            for (size_t i = 0; i < count; ++i) expect(get(d, in.data(), i), reduced(d, op, n, i));
            // reduce_scatter: block j of rank r holds value(d, r, j * count + i).
            auto blocks = filled(d, count * n, [&](size_t i) { return value(d, r, i); });
            c.reduce_scatter(blocks.data(), out.data(), count, d, op);
            for (size_t i = 0; i < count; ++i) expect(get(d, out.data(), i), reduced(d, op, n, r * count + i));
          }
          auto in = filled(d, count, [&](size_t i) { return value(d, r, i); });
          auto all = filled(d, count * n, [](size_t) { return 0; });
          c.all_gather(in.data(), all.data(), count, d);
          for (int s = 0; s < n; ++s)
            for (size_t i = 0; i < count; ++i) expect(get(d, all.data(), s * count + i), value(d, s, i));
          for (int root = 0; root < n; ++root) {
            auto b = filled(d, count, [&](size_t i) { return value(d, r, i); });
            c.broadcast(b.data(), count, d, root);
            for (size_t i = 0; i < count; ++i) expect(get(d, b.data(), i), value(d, root, i));
          }
          // all_to_all: rank r's block j is value(d, r, j * count + i); rank r
          // receives block r of every rank s.
          auto send = filled(d, count * n, [&](size_t i) { return value(d, r, i); });
          auto recv = filled(d, count * n, [](size_t) { return 0; });
          c.all_to_all(send.data(), recv.data(), count, d);
          for (int s = 0; s < n; ++s)
            for (size_t i = 0; i < count; ++i) expect(get(d, recv.data(), s * count + i), value(d, s, r * count + i));
          // send/recv around a ring, two tags in flight.
          if (n > 1) {
            const int next = (r + 1) % n, prev = (r + n - 1) % n;
            c.send(in.data(), count, d, next, 7);
            c.send(in.data(), 1, d, next, 8);
            auto got1 = filled(d, 1, [](size_t) { return 0; });
            auto got = filled(d, count, [](size_t) { return 0; });
            c.recv(got1.data(), 1, d, prev, 8);
            c.recv(got.data(), count, d, prev, 7);
            for (size_t i = 0; i < count; ++i) expect(get(d, got.data(), i), value(d, prev, i));
            expect(get(d, got1.data(), 0), value(d, prev, 0));
          }
          c.barrier();
          c.all_reduce(nullptr, nullptr, 0, d, ReduceOp::sum);  // count 0 is a no-op collective
        });
        CHECK(bad.load() == 0);
      }
    }
  }

  TEST_CASE("NaN wins max and min; integer sums wrap") {
    run_ranks(3, [&](Communicator& c) {
      const float nan = std::numeric_limits<float>::quiet_NaN();
      float x[2] = {c.rank() == 1 ? nan : 1.0f, float(c.rank())};
      float mx[2], mn[2];
      c.all_reduce(x, mx, 2, DType::float32, ReduceOp::max);
      c.all_reduce(x, mn, 2, DType::float32, ReduceOp::min);
      CHECK(std::isnan(mx[0]));
      CHECK(std::isnan(mn[0]));
      CHECK(mx[1] == 2.0f);
      CHECK(mn[1] == 0.0f);
      int8_t v = 100, s = 0;
      c.all_reduce(&v, &s, 1, DType::int8, ReduceOp::sum);
      CHECK(s == int8_t(300 - 256));  // numpy: np.int8(100) * 3 wraps to 44
    });
  }

  TEST_CASE("a rank that does not join ends in CollectiveError, not a hang") {
    TimeoutGuard tg(0.3);
    std::atomic<int> timed_out{0}, broken{0};
    const auto t0 = std::chrono::steady_clock::now();
    auto group = make_in_process_group(3);
    std::vector<std::thread> th;
    for (int r = 0; r < 2; ++r)  // rank 2 never calls
      th.emplace_back([&, r] {
        float x = 1, y = 0;
        try {
          group[r]->all_reduce(&x, &y, 1, DType::float32, ReduceOp::sum);
        } catch (const CollectiveError& e) {
          std::string m = e.what();
          if (m.find("rank(s) 2 of 3 did not join") != std::string::npos) ++timed_out;
          if (m.find("KILN_COLLECTIVE_TIMEOUT_S") != std::string::npos) ++broken;
        }
      });
    for (auto& t : th) t.join();
    CHECK(timed_out.load() == 2);
    CHECK(broken.load() == 2);
    CHECK(std::chrono::steady_clock::now() - t0 < std::chrono::seconds(10));
    // The group stays broken: the late rank is told so at once.
    float x = 1, y = 0;
    CHECK_THROWS_WITH_AS(group[2]->all_reduce(&x, &y, 1, DType::float32, ReduceOp::sum),
                         doctest::Contains("broken by an earlier failure"), CollectiveError);
    // A recv with no sender times out too.
    auto g2 = make_in_process_group(2);
    CHECK_THROWS_WITH_AS(g2[0]->recv(&y, 1, DType::float32, 1, 3),
                         doctest::Contains("waited 0.3"), CollectiveError);
  }

  TEST_CASE("mismatched collectives throw ValueError on every rank and the group goes on") {
    std::atomic<int> mismatched{0};
    run_ranks(2, [&](Communicator& c) {
      float x[4] = {1, 2, 3, 4}, y[8];
      try {
        c.all_reduce(x, y, c.rank() == 0 ? 4 : 3, DType::float32, ReduceOp::sum);
      } catch (const ValueError& e) {
        if (std::string(e.what()).find("mismatched collectives: rank 0 called all_reduce(count 4") != std::string::npos)
          ++mismatched;
      }
      try {
        if (c.rank() == 0) c.barrier();
        else c.all_gather(x, y, 4, DType::float32);
      } catch (const ValueError&) {
        ++mismatched;
      }
      c.all_reduce(x, y, 4, DType::float32, ReduceOp::sum);  // still usable
      CHECK(y[3] == 8.0f);
    });
    CHECK(mismatched.load() == 4);
  }

  TEST_CASE("split: groups by color, ranked by key") {
    for (int n = 1; n <= 4; ++n) {
      std::atomic<int> bad{0};
      run_ranks(n, [&](Communicator& c) {
        const int r = c.rank();
        // Even and odd ranks, ranked in reverse order of rank.
        auto sub = c.split(r % 2, -r);
        const int m = (n + 1 - r % 2) / 2;  // members of my parity
        if (sub->size() != m) ++bad;
        if (sub->rank() != (m - 1 - r / 2)) ++bad;
        int64_t x = r, sum = 0;
        sub->all_reduce(&x, &sum, 1, DType::int64, ReduceOp::sum);
        int64_t want = 0;
        for (int q = r % 2; q < n; q += 2) want += q;
        if (sum != want) ++bad;
        auto again = c.split(0, r);  // a second split: one group of all
        if (again->size() != n || again->rank() != r) ++bad;
      });
      CHECK(bad.load() == 0);
    }
    auto g = make_in_process_group(1);
    CHECK_THROWS_AS(g[0]->split(-1, 0), ValueError);
  }

  TEST_CASE("bad arguments") {
    auto g = make_in_process_group(2);
    float x = 0;
    CHECK_THROWS_WITH_AS(g[0]->broadcast(&x, 1, DType::float32, 2), doctest::Contains("root 2 is outside"), IndexError);
    CHECK_THROWS_AS(g[0]->send(&x, 1, DType::float32, -1), IndexError);
    CHECK_THROWS_AS(g[1]->all_to_all(&x, &x, 1, DType::float32), ValueError);
    CHECK_THROWS_AS(make_in_process_group(0), ValueError);
    CHECK_THROWS_AS(set_collective_timeout(0), ValueError);
  }

  TEST_CASE("init() outside a launcher is a world of one rank") {
    if (!distributed::mpi::launched()) {
      auto w = distributed::init();
      CHECK(w->size() == 1);
      CHECK(w->rank() == 0);
      CHECK(distributed::world() == w);
      CHECK_FALSE(distributed::is_multi_process());
    }
    if (!distributed::mpi::is_built())
      CHECK_THROWS_WITH_AS(distributed::mpi::world(), doctest::Contains("built without MPI"), NotBuiltError);
  }
}
