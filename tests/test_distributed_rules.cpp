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
