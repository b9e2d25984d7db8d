// distributed/: sharding rules of eager ops on DistributedTensors: the
// tensor-parallel MLP (column- then row-parallel) on 1-4 CPU devices against
// a float64 scalar reference, elementwise placement rules, and errors.
#include "../distributed/sharding_rules.h"
#include "distributed_test_util.h"
#include "test_util.h"

using namespace dt;

namespace {
// float64 reference of relu(x @ w1 + b1) @ w2 + b2.
std::vector<double> mlp_ref(const Tensor& x, const Tensor& w1, const Tensor& b1, const Tensor& w2, const Tensor& b2) {
  const int64_t m = x.size(0), k = x.size(1), h = w1.size(1), n = w2.size(1);
  auto X = x.to_vector<double>(), W1 = w1.to_vector<double>(), B1 = b1.to_vector<double>(),
       W2 = w2.to_vector<double>(), B2 = b2.to_vector<double>();
  std::vector<double> H(m * h), Y(m * n);
  for (int64_t i = 0; i < m; ++i)
    for (int64_t j = 0; j < h; ++j) {
      double s = B1[j];
      for (int64_t q = 0; q < k; ++q) s += X[i * k + q] * W1[q * h + j];
      H[i * h + j] = s > 0 ? s : 0;
    }
  for (int64_t i = 0; i < m; ++i)
    for (int64_t j = 0; j < n; ++j) {
      double s = B2[j];
      for (int64_t q = 0; q < h; ++q) s += H[i * h + q] * W2[q * n + j];
      Y[i * n + j] = s;
    }
  return Y;
}
}  // namespace

TEST_SUITE("distributed_rules") {
  TEST_CASE("tensor-parallel MLP on 1-4 devices equals the float64 reference") {
    Tensor x = kt::random_tensor({8, 16}, DType::float32, 1, false, 1.0);
    Tensor w1 = kt::random_tensor({16, 32}, DType::float32, 2, false, 0.3);
    Tensor b1 = kt::random_tensor({32}, DType::float32, 3, false, 0.3);
    Tensor w2 = kt::random_tensor({32, 12}, DType::float32, 4, false, 0.3);
    Tensor b2 = kt::random_tensor({12}, DType::float32, 5, false, 0.3);
    const auto ref = mlp_ref(x, w1, b1, w2, b2);
    for (int P = 1; P <= 4; ++P) {
      CAPTURE(P);
      const DeviceMesh mesh(cpu_devices(P), "tp");
      auto on = [&](const Tensor& t, Placement p) { return distribute(t, DeviceMapping(mesh, {p})); };
      DistributedTensor X = on(x, Replicated()), W1 = on(w1, Sharded(1)), B1 = on(b1, Sharded(0)),
                        W2 = on(w2, Sharded(0)), B2 = on(b2, Replicated());
      DistributedTensor h = relu(add(matmul(X, W1), B1));
      DistributedTensor y = matmul(h, W2);
      if (P > 1) {
        CHECK(h.mapping().placements()[0] == Sharded(1));  // column-parallel
        CHECK(y.mapping().placements()[0] == Partial(ReduceOp::sum));  // row-parallel
      }
      CHECK(h.shape() == Shape{8, 32});
      DistributedTensor out = add(y, B2);
      CHECK(out.mapping().placements()[0] == Replicated());
      auto got = out.full_tensor().to_vector<double>();
      REQUIRE(got.size() == ref.size());
      double worst = 0;
      for (size_t i = 0; i < ref.size(); ++i) worst = std::max(worst, std::abs(got[i] - ref[i]));
      CHECK(worst < 1e-5);  // float32 products of unit-scale values, k <= 32
    }
  }

  TEST_CASE("elementwise placement rules") {
    const DeviceMesh mesh(cpu_devices(3), "tp");
    auto on = [&](const Tensor& t, Placement p) { return distribute(t, DeviceMapping(mesh, {p})); };
    Tensor a = kt::random_tensor({5, 4}, DType::float32, 7), b = kt::random_tensor({5, 4}, DType::float32, 8);
    Tensor row = kt::random_tensor({4}, DType::float32, 9);
    auto ga = a.to_vector<double>(), gb = b.to_vector<double>(), gr = row.to_vector<double>();
    std::vector<double> sum(20), prod(20), plus_row(20);
    for (int i = 0; i < 20; ++i) {
      sum[i] = double(float(ga[i]) + float(gb[i]));
      prod[i] = double(float(ga[i]) * float(gb[i]));
      plus_row[i] = double(float(ga[i]) + float(gr[i % 4]));
    }
    // Sharded + Replicated: the Replicated side is sliced, the result Sharded.
    DistributedTensor s = add(on(a, Sharded(0)), on(b, Replicated()));
    CHECK(s.mapping().placements()[0] == Sharded(0));
    CHECK(s.full_tensor().to_vector<double>() == sum);
    // Two different Sharded axes: operand 1 follows operand 0.
    s = mul(on(a, Sharded(1)), on(b, Sharded(0)));
    CHECK(s.mapping().placements()[0] == Sharded(1));
    CHECK(s.full_tensor().to_vector<double>() == prod);
    // A bias row broadcasts against Sharded(0) rows (nothing to slice) and is
    // sliced against Sharded(1) columns.
    s = add(on(a, Sharded(0)), on(row, Replicated()));
    CHECK(s.mapping().placements()[0] == Sharded(0));
    CHECK(s.full_tensor().to_vector<double>() == plus_row);
    s = add(on(a, Sharded(1)), on(row, Replicated()));
    CHECK(s.mapping().placements()[0] == Sharded(1));
    CHECK(s.full_tensor().to_vector<double>() == plus_row);
    // Partial(sum) + Partial(sum) stays Partial; a product of Partials is reduced first.
    s = add(on(a, Partial()), on(b, Partial()));
    CHECK(s.mapping().placements()[0] == Partial());
    CHECK(s.full_tensor().to_vector<double>() == sum);
    s = mul(on(a, Partial()), on(b, Partial()));
    CHECK(s.mapping().placements()[0] == Replicated());
    CHECK(s.full_tensor().to_vector<double>() == prod);
    // relu of a Partial is all-reduced first (relu(x0) + relu(x1) != relu(x0 + x1)).
    DistributedTensor r = relu(on(a, Partial()));
    CHECK(r.mapping().placements()[0] == Replicated());
    std::vector<double> ra(20);
    for (int i = 0; i < 20; ++i) ra[i] = std::max(ga[i], 0.0);
    CHECK(r.full_tensor().to_vector<double>() == ra);
  }

  TEST_CASE("reductions over sharded axes give Partial; softmax stays local along unsharded axes") {
    for (int P : {2, 3, 4}) {
      CAPTURE(P);
      const DeviceMesh mesh(cpu_devices(P), "tp");
      auto on = [&](const Tensor& t, Placement p) { return distribute(t, DeviceMapping(mesh, {p})); };
      // int32 values: sums are exact in any order. [3, 5]: 3 rows on 4 devices leaves a shard empty.
      Tensor x = kt::random_tensor({3, 5}, DType::int32, 21);
      auto g = x.to_vector<double>();
      auto ref = [&](int axis, int kind) {  // kind 0 sum, 1 max, 2 min, over one axis of [3, 5]
        std::vector<double> out;
        const int n0 = axis == 0 ? 5 : 3, n1 = axis == 0 ? 3 : 5;
        for (int i = 0; i < n0; ++i) {
          double acc = kind == 0 ? 0 : kind == 1 ? -1e300 : 1e300;
          for (int j = 0; j < n1; ++j) {
            const double v = axis == 0 ? g[j * 5 + i] : g[i * 5 + j];
            acc = kind == 0 ? acc + v : kind == 1 ? std::max(acc, v) : std::min(acc, v);
          }
          out.push_back(acc);
        }
        return out;
      };
      DistributedTensor s = sum(on(x, Sharded(0)), {0});
      CHECK(s.mapping().placements()[0] == Partial(ReduceOp::sum));
      CHECK(s.dtype() == DType::int64);  // integer sums accumulate in int64, as kiln::sum
      CHECK(s.full_tensor().to_vector<double>() == ref(0, 0));
      DistributedTensor m = max(on(x, Sharded(1)), {1});
      CHECK(m.mapping().placements()[0] == Partial(ReduceOp::max));
      CHECK(m.full_tensor().to_vector<double>() == ref(1, 1));
      // An empty shard (P = 4 over 3 rows): max/min gather first instead of failing.
      DistributedTensor mn = min(on(x, Sharded(0)), {0});
      CHECK(mn.mapping().placements()[0] == (P == 4 ? Replicated() : Partial(ReduceOp::min)));
      CHECK(mn.full_tensor().to_vector<double>() == ref(0, 2));
      // Reducing another axis keeps the shards, renumbered.
      DistributedTensor k = sum(on(x, Sharded(1)), {0});
      CHECK(k.mapping().placements()[0] == Sharded(0));
      CHECK(k.full_tensor().to_vector<double>() == ref(0, 0));
      CHECK(sum(on(x, Sharded(1)), {0}, true).mapping().placements()[0] == Sharded(1));
      // Partial(sum) summed again stays Partial; a max of a Partial(sum) reduces it first.
      CHECK(sum(on(x, Partial()), {1}).mapping().placements()[0] == Partial());
      CHECK(max(on(x, Partial()), {1}).full_tensor().to_vector<double>() == ref(1, 1));
      // softmax: rows sharded, along columns: local.
      Tensor f = kt::random_tensor({5, 6}, DType::float32, 22);
      auto want = softmax(f, 1).to_vector<double>();
      DistributedTensor sm = softmax(on(f, Sharded(0)), 1);
      CHECK(sm.mapping().placements()[0] == Sharded(0));
      auto got = sm.full_tensor().to_vector<double>();
      for (size_t i = 0; i < want.size(); ++i) CHECK(got[i] == doctest::Approx(want[i]).epsilon(1e-6));
      DistributedTensor sc = softmax(on(f, Sharded(1)), 1);  // along the sharded axis: gathered
      CHECK(sc.mapping().placements()[0] == Replicated());
      got = sc.full_tensor().to_vector<double>();
      for (size_t i = 0; i < want.size(); ++i) CHECK(got[i] == doctest::Approx(want[i]).epsilon(1e-6));
      // An op with no rule runs on gathered copies.
      DistributedTensor t = replicated_op({on(f, Sharded(1)), on(f, Partial())},
                                          [](const std::vector<Tensor>& a) { return kiln::sub(a[0], a[1]); }, "sub0");
      CHECK(t.mapping().placements()[0] == Replicated());
      CHECK(t.full_tensor().to_vector<double>() == std::vector<double>(30, 0.0));
    }
  }

  TEST_CASE("on a 2x2 mesh every rule gathers to Replicated and gives the one-device result") {
    const DeviceMesh mesh(cpu_devices(4), {2, 2}, {"dp", "tp"});
    Tensor x = kt::random_tensor({4, 6}, DType::float64, 31), w = kt::random_tensor({6, 3}, DType::float64, 32);
    DistributedTensor xs = distribute(x, DeviceMapping(mesh, {Sharded(0), Sharded(1)}));
    DistributedTensor xd = distribute(x, DeviceMapping(mesh, {Sharded(0), Replicated()}));
    DistributedTensor wr = distribute(w, DeviceMapping::replicated(mesh));
    const Tensor mm = matmul(xd, wr).full_tensor(), s1 = sum(xs, {1}).full_tensor(), sm = softmax(xs, 1).full_tensor();
    kt::check_all_close(mm, kiln::matmul(x, w).to_vector<double>(), 1e-12, 1e-12, "2x2 matmul");
    kt::check_all_close(s1, kiln::sum(x, {1}).to_vector<double>(), 1e-12, 1e-12, "2x2 sum");
    kt::check_all_close(sm, kiln::softmax(x, 1).to_vector<double>(), 1e-12, 1e-12, "2x2 softmax");
    CHECK(matmul(xd, wr).mapping().placements().size() == 2);
  }

  TEST_CASE("errors") {
    const DeviceMesh m2(cpu_devices(2)), m3(cpu_devices(3));
    Tensor a = kt::random_tensor({4, 3}, DType::float32, 1);
    auto A = distribute(a, DeviceMapping(m2, {Sharded(0)}));
    auto B = distribute(a, DeviceMapping(m3, {Sharded(0)}));
    CHECK_THROWS_WITH_AS(add(A, B), doctest::Contains("add: operands are on different meshes"), ValueError);
    CHECK_THROWS_WITH_AS(matmul(A, A), doctest::Contains("do not multiply (k 3 vs 4)"), ShapeError);
    auto C = distribute(kt::random_tensor({4, 5}, DType::float32, 1), DeviceMapping(m2, {Replicated()}));
    CHECK_THROWS_AS(add(A, C), ShapeError);
  }
}
