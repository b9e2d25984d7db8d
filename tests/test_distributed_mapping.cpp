// distributed/: meshes, placements, mappings and shard shapes (numpy's
// array_split rule), and the errors for mappings that cannot be.
#include "../distributed/device_mapping.h"
#include "test_util.h"

using namespace kiln;
using namespace kiln::distributed;

TEST_SUITE("distributed_mapping") {
  TEST_CASE("split_span follows numpy.array_split") {
    // numpy: [len(p) for p in np.array_split(np.arange(n), k)]
    auto extents = [](int64_t n, int64_t k) {
      std::vector<int64_t> e;
      int64_t next = 0;
      for (int64_t i = 0; i < k; ++i) {
        Span1 s = split_span(n, k, i);
        CHECK(s.offset == next);  // pieces are adjacent
        next = s.offset + s.extent;
        e.push_back(s.extent);
      }
      CHECK(next == n);
      return e;
    };
    CHECK(extents(10, 3) == std::vector<int64_t>{4, 3, 3});
    CHECK(extents(2, 4) == std::vector<int64_t>{1, 1, 0, 0});
    CHECK(extents(8, 4) == std::vector<int64_t>{2, 2, 2, 2});
    CHECK(extents(0, 3) == std::vector<int64_t>{0, 0, 0});
    CHECK(extents(7, 1) == std::vector<int64_t>{7});
  }

  TEST_CASE("mesh validation") {
    auto d4 = cpu_devices(4);
    DeviceMesh m(d4, {2, 2}, {"dp", "tp"});
    CHECK(m.size() == 4);
    CHECK(m.axis_index("tp") == 1);
    CHECK(m.coords(3) == std::vector<int64_t>{1, 1});
    CHECK(m.coords(1) == std::vector<int64_t>{0, 1});
    CHECK(m.str() == "DeviceMesh([cpu:0, cpu:1, cpu:2, cpu:3], shape=[2, 2], axes=[dp, tp])");
    CHECK_THROWS_WITH_AS(m.axis_index("pp"), doctest::Contains("no mesh axis named 'pp'; the mesh's axes are [dp, tp]"),
                         ValueError);
    CHECK_THROWS_WITH_AS(DeviceMesh(d4, {3}, {"x"}), doctest::Contains("shape [3] holds 3 devices, got 4"), ValueError);
    CHECK_THROWS_WITH_AS(DeviceMesh(d4, {2, 2}, {"x"}), doctest::Contains("one axis name per mesh axis"), ValueError);
    CHECK_THROWS_WITH_AS(DeviceMesh(d4, {2, 2}, {"x", "x"}), doctest::Contains("'x' repeated"), ValueError);
    CHECK_THROWS_WITH_AS(DeviceMesh({}, {}, {}), doctest::Contains("at least one device"), ValueError);
    CHECK_THROWS_WITH_AS(DeviceMesh({Device::cpu(), Device::cpu()}), doctest::Contains("cpu:0 appears twice"),
                         ValueError);
    CHECK_THROWS_AS(m.coords(4), IndexError);
    CHECK_THROWS_AS(cpu_devices(0), ValueError);
  }

  TEST_CASE("mapping validation and errors") {
    DeviceMesh m(cpu_devices(4), {2, 2}, {"dp", "tp"});
    CHECK_THROWS_WITH_AS(DeviceMapping(m, {Replicated()}), doctest::Contains("one placement per mesh axis (2"),
                         ValueError);
    // A placement naming a mesh axis that does not exist.
    CHECK_THROWS_WITH_AS(DeviceMapping::named(m, {{"model", Sharded(0)}}),
                         doctest::Contains("no mesh axis named 'model'"), ValueError);
    DeviceMapping named = DeviceMapping::named(m, {{"tp", Sharded(1)}});
    CHECK(named.placements() == std::vector<Placement>{Replicated(), Sharded(1)});
    // A Sharded axis beyond the tensor's rank.
    CHECK(DistributedLayout(DType::float32, {4, 6}, named).shard_shape(1) == Shape{4, 3});
    CHECK_THROWS_WITH_AS(DistributedLayout(DType::float32, {4}, named),
                         doctest::Contains("mesh axis 'tp' is Sharded(1) but the tensor [4] has rank 1"), IndexError);
    CHECK_THROWS_WITH_AS(DistributedLayout(DType::float32, {4, 4}, DeviceMapping(m, std::vector{Sharded(0), Sharded(-2)})),
                         doctest::Contains("tensor axis 0 is sharded by mesh axes 'dp' and 'tp'"), ValueError);
    CHECK(Partial(ReduceOp::max).str() == "Partial(max)");
    CHECK_FALSE(Partial(ReduceOp::max) == Partial(ReduceOp::sum));
    CHECK(Sharded(1) == Sharded(1));
  }

  TEST_CASE("shard shapes and local layouts") {
    DeviceMesh m(cpu_devices(4), {2, 2}, {"dp", "tp"});
    // dp shards axis 0 (5 rows: 3, 2), tp shards axis -1 (7 cols: 4, 3).
    DistributedLayout l(DType::int32, {5, 7}, DeviceMapping(m, std::vector{Sharded(0), Sharded(-1)}));
    CHECK(l.mapping.placements()[1] == Sharded(1));  // normalised
    CHECK(l.shard_shape(0) == Shape{3, 4});
    CHECK(l.shard_shape(1) == Shape{3, 3});
    CHECK(l.shard_shape(2) == Shape{2, 4});
    CHECK(l.shard_shape(3) == Shape{2, 3});
    CHECK(l.shard_offset(3) == Shape{3, 4});
    auto ll = l.local_layouts();
    REQUIRE(ll.size() == 4);
    CHECK(ll[2] == TensorLayout(DType::int32, {2, 4}, Device{DeviceType::cpu, 2}));
    // Partial and Replicated keep the global shape.
    DistributedLayout p(DType::float32, {5, 7}, DeviceMapping(m, std::vector{Partial(), Replicated()}));
    for (const auto& t : p.local_layouts()) CHECK(t.shape == Shape{5, 7});
    // The trivial case: a TensorLayout converts to one shard on its device.
    DistributedLayout t = TensorLayout(DType::float64, {3, 2});
    CHECK(t.num_shards() == 1);
    CHECK(t.mapping.is_single_device());
    CHECK(t.local_layouts()[0] == TensorLayout(DType::float64, {3, 2}));
  }
}
