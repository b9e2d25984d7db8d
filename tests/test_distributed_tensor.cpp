// distributed/: DistributedTensor: distribute, every redistribute transition
// and full_tensor on 1-4 CPU devices of this process, even and uneven (and
// empty) shards, every dtype, against the unsharded tensor cut by an
// independent array_split; Partial sources built from per-device values with
// a float64 reduction as reference.
#include "../distributed/sharded_tensor.h"
#include "distributed_test_util.h"
#include "test_util.h"

using namespace dt;

namespace {

// numpy.array_split, written out again: (offset, extent) of piece i.
std::pair<int64_t, int64_t> ref_split(int64_t n, int64_t parts, int64_t i) {
  int64_t off = 0;
  for (int64_t k = 0; k < i; ++k) off += n / parts + (k < n % parts ? 1 : 0);
  return {off, n / parts + (i < n % parts ? 1 : 0)};
}

// The elements of box (off, ext) of the row-major array g of shape gs.
std::vector<double> cut(const std::vector<double>& g, const Shape& gs, const Shape& off, const Shape& ext) {
  std::vector<double> out;
  const int64_t n = checked_numel(ext);
  for (int64_t f = 0; f < n; ++f) {
    int64_t rem = f, flat = 0, stride = 1;
    for (int64_t a = int64_t(ext.size()) - 1; a >= 0; --a) {
      const int64_t i = rem % ext[a];
      rem /= ext[a];
      flat += (i + off[a]) * stride;
      stride *= gs[a];
    }
    out.push_back(g[flat]);
  }
  return out;
}

// Expected contents of shard i of a 1-d mesh of P devices placing g by p.
std::vector<double> expected_shard(const std::vector<double>& g, const Shape& gs, const Placement& p, int64_t P,
                                   int64_t i) {
  Shape off(gs.size(), 0), ext = gs;
  if (p.is_sharded()) {
    const int64_t ax = p.axis < 0 ? p.axis + int64_t(gs.size()) : p.axis;
    auto [o, e] = ref_split(gs[ax], P, i);
    off[ax] = o;
    ext[ax] = e;
  }
  return cut(g, gs, off, ext);
}

double reduce2(DType d, ReduceOp op, double a, double b) {
  if (d == DType::bool_) return op == ReduceOp::min ? double(a && b) : double(a || b);
  return op == ReduceOp::sum ? a + b : op == ReduceOp::max ? std::max(a, b) : std::min(a, b);
}

const std::vector<Placement>& placements_for(int64_t rank) {
  static const std::vector<Placement> r1 = {Replicated(), Sharded(0), Sharded(-1), Partial(ReduceOp::sum),
                                            Partial(ReduceOp::max), Partial(ReduceOp::min)};
  static const std::vector<Placement> r2 = {Replicated(), Sharded(0), Sharded(1), Partial(ReduceOp::sum),
                                            Partial(ReduceOp::max), Partial(ReduceOp::min)};
  return rank == 1 ? r1 : r2;
}

// Checks that t (over a 1-d mesh of P) holds the global value g.
void check_holds(const DistributedTensor& t, const std::vector<double>& g, int& bad) {
  const Placement p = t.mapping().placements()[0];
  const int64_t P = t.num_shards();
  if (p.is_partial()) {
    // The reduction of the shards in rank order is g.
    std::vector<double> acc = t.shard(0).to_vector<double>();
    for (int64_t i = 1; i < P; ++i) {
      auto s = t.shard(i).to_vector<double>();
      for (size_t k = 0; k < acc.size(); ++k) acc[k] = reduce2(t.dtype(), p.op, acc[k], s[k]);
    }
    if (acc != g) ++bad;
    return;
  }
  for (int64_t i = 0; i < P; ++i) {
    if (t.shard(i).shape() != t.local_shape(i)) ++bad;
    if (!(t.shard(i).device() == Device{DeviceType::cpu, int(i)})) ++bad;
    if (t.shard(i).to_vector<double>() != expected_shard(g, t.shape(), p, P, i)) ++bad;
  }
}

}  // namespace

TEST_SUITE("distributed_tensor") {
  TEST_CASE("every transition, 1-4 devices, every dtype, even and uneven shards") {
    const std::vector<Shape> shapes = {{6, 4}, {5, 3}, {3, 2}, {7}};
    for (int64_t P = 1; P <= 4; ++P) {
      const DeviceMesh mesh(cpu_devices(int(P)), "tp");
      for (const Shape& s : shapes) {
        for (DType d : kt::all_dtypes()) {
          CAPTURE(P);
          CAPTURE(shape_str(s));
          CAPTURE(d);
          const int64_t n = checked_numel(s);
          for (const Placement& from : placements_for(int64_t(s.size()))) {
            CAPTURE(from.str());
            // The source and the global value it stands for.
            DistributedTensor src;
            std::vector<double> g(n);
            if (from.is_partial()) {
              std::vector<Tensor> shards;
              std::vector<std::vector<double>> vals;
              for (int64_t r = 0; r < P; ++r) {
                std::vector<double> v(n);
                for (int64_t k = 0; k < n; ++k) v[k] = value(d, int(r), size_t(k));
                Tensor t = Tensor::empty(s, d, Device{DeviceType::cpu, int(r)});
                for (int64_t k = 0; k < n; ++k) put(d, t.data_ptr(), k, v[k]);
                shards.push_back(t);
                vals.push_back(v);
              }
              for (int64_t k = 0; k < n; ++k) {
                g[k] = vals[0][k];
                for (int64_t r = 1; r < P; ++r) g[k] = reduce2(d, from.op, g[k], vals[r][k]);
              }
              src = DistributedTensor::from_shards(DistributedLayout(d, s, DeviceMapping(mesh, {from})), shards);
            } else {
              Tensor full = kt::random_tensor(s, d, uint64_t(P * 100 + n));
              g = full.to_vector<double>();
              src = distribute(full, DeviceMapping(mesh, {from}));
            }
            int bad = 0;
            check_holds(src, g, bad);
            CHECK(bad == 0);
            for (const Placement& to : placements_for(int64_t(s.size()))) {
              CAPTURE(to.str());
              DistributedTensor t = src.redistribute({to});
              CHECK(t.mapping().placements()[0] == (to.is_sharded() && to.axis < 0 ? Sharded(to.axis + int64_t(s.size())) : to));
              bad = 0;
              check_holds(t, g, bad);
              CHECK(bad == 0);
            }
            Tensor f = src.full_tensor();
            CHECK(f.shape() == s);
            CHECK(f.to_vector<double>() == g);
          }
        }
      }
    }
  }

  TEST_CASE("2-d mesh: sharded on both axes, partial on one") {
    const DeviceMesh mesh(cpu_devices(4), {2, 2}, {"dp", "tp"});
    Tensor full = kt::random_tensor({5, 7}, DType::float32, 3);
    const auto g = full.to_vector<double>();
    DistributedTensor t = distribute(full, DeviceMapping(mesh, std::vector{Sharded(0), Sharded(1)}));
    CHECK(t.shard(3).shape() == Shape{2, 3});
    CHECK(t.shard(3).to_vector<double>() == cut(g, {5, 7}, {3, 4}, {2, 3}));
    CHECK(t.full_tensor().to_vector<double>() == g);
    DistributedTensor u = t.redistribute(std::vector{Replicated(), Sharded(0)});
    CHECK(u.shard(1).to_vector<double>() == cut(g, {5, 7}, {3, 0}, {2, 7}));
    CHECK(u.shard(2).to_vector<double>() == cut(g, {5, 7}, {0, 0}, {3, 7}));
    // Partial(sum) over dp: coordinate dp = 0 holds the value, dp = 1 zeros.
    DistributedTensor p = t.redistribute(std::vector{Partial(), Sharded(1)});
    CHECK(p.shard(1).to_vector<double>() == cut(g, {5, 7}, {0, 4}, {5, 3}));
    CHECK(p.shard(3).to_vector<double>() == std::vector<double>(15, 0.0));
    CHECK(p.full_tensor().to_vector<double>() == g);
    CHECK(p.redistribute(std::vector{Sharded(1), Sharded(0)}).full_tensor().to_vector<double>() == g);
  }

  TEST_CASE("n-d meshes: every pair of mappings, one mesh axis at a time") {
    for (const auto& [devs, mshape] : std::vector<std::pair<int, Shape>>{{4, {2, 2}}, {6, {2, 3}}, {8, {2, 2, 2}}}) {
      // Fewer choices on the 3-d mesh keep the test short (its pairs grow as choices^6).
      std::vector<Placement> choices = {Replicated(), Sharded(0), Sharded(1), Partial(ReduceOp::sum)};
      if (mshape.size() == 2) choices.push_back(Partial(ReduceOp::max));
      const DeviceMesh mesh(cpu_devices(devs), mshape, mshape.size() == 2 ? std::vector<std::string>{"dp", "tp"}
                                                                           : std::vector<std::string>{"a", "b", "c"});
      // Every valid mapping (no tensor axis sharded twice, one Partial reduction).
      std::vector<DeviceMapping> maps;
      std::vector<size_t> idx(mshape.size(), 0);
      while (true) {
        std::vector<Placement> ps;
        for (size_t i : idx) ps.push_back(choices[i]);
        try {
          const DistributedLayout l(DType::int32, {5, 7}, DeviceMapping(mesh, ps));
          bool mixed = false;
          for (auto& p : ps)
            for (auto& q : ps) mixed |= p.is_partial() && q.is_partial() && !(p == q);
          if (!mixed) maps.push_back(l.mapping);
        } catch (const ValueError&) {
        }
        size_t a = 0;
        while (a < idx.size() && ++idx[a] == choices.size()) idx[a++] = 0;
        if (a == idx.size()) break;
      }
      CAPTURE(mesh.str());
      for (DType d : {DType::int32, DType::float16}) {
        if (mshape.size() == 3 && d != DType::int32) continue;
        Tensor full = kt::random_tensor({5, 7}, d, 11);
        const auto g = full.to_vector<double>();
        int bad = 0;
        for (const auto& from : maps) {
          DistributedTensor src = distribute(full, from);
          for (const auto& to : maps) {
            DistributedTensor t = src.redistribute(to);
            if (!(t.mapping() == to)) ++bad;
            if (!to.has_partial())
              for (int64_t i = 0; i < t.num_shards(); ++i)
                if (t.shard(i).to_vector<double>() !=
                    cut(g, {5, 7}, t.layout().shard_offset(i), t.layout().shard_shape(i))) {
                  ++bad;
                  MESSAGE(from.str() << " -> " << to.str() << " shard " << i);
                }
            if (t.full_tensor().to_vector<double>() != g) ++bad;
          }
        }
        CHECK(bad == 0);
      }
    }
  }

  TEST_CASE("errors") {
    const DeviceMesh m2(cpu_devices(2)), m3(cpu_devices(3));
    Tensor x = kt::random_tensor({4, 3}, DType::float32, 1);
    DistributedTensor t = distribute(x, DeviceMapping(m2, {Sharded(0)}));
    CHECK_THROWS_WITH_AS(t.redistribute(DeviceMapping(m3, {Replicated()})),
                         doctest::Contains("is not the tensor's mesh"), ValueError);
    CHECK_THROWS_WITH_AS(t.redistribute({Sharded(2)}), doctest::Contains("has rank 2"), IndexError);
    CHECK_THROWS_WITH_AS(distribute(x, DeviceMapping(m2, {Sharded(-3)})), doctest::Contains("has rank 2"), IndexError);
    CHECK_THROWS_AS(t.shard(2), IndexError);
    CHECK_THROWS_AS(t.local_shape(-1), IndexError);
    const DistributedLayout l(DType::float32, {4, 3}, DeviceMapping(m2, {Sharded(0)}));
    auto on = [](int i) { return Device{DeviceType::cpu, i}; };
    CHECK_THROWS_WITH_AS(DistributedTensor::from_shards(l, {Tensor::empty({2, 3}, DType::float32, on(0))}),
                         doctest::Contains("expected 2 shard(s)"), ValueError);
    CHECK_THROWS_WITH_AS(DistributedTensor::from_shards(l, {Tensor::empty({2, 3}, DType::float32, on(0)),
                                                            Tensor::empty({3, 3}, DType::float32, on(1))}),
                         doctest::Contains("shard 1 of DistributedLayout(float32, [4, 3]"), ShapeError);
    CHECK_THROWS_AS(DistributedTensor::from_shards(l, {Tensor::empty({2, 3}, DType::float32, on(0)),
                                                       Tensor::empty({2, 3}, DType::int32, on(1))}),
                    DTypeError);
    CHECK_THROWS_WITH_AS(DistributedTensor::from_shards(l, {Tensor::empty({2, 3}, DType::float32, on(0)),
                                                            Tensor::empty({2, 3}, DType::float32, on(0))}),
                         doctest::Contains("expected a tensor on cpu:1, got one on cpu:0"), DeviceError);
    // Shards are tensors on their own CPU devices: eager ops do not mix them.
    CHECK_THROWS_WITH_AS(add(t.shard(0), t.shard(1)), doctest::Contains("input 1 is on cpu:1 but input 0 is on cpu"),
                         DeviceError);
    const DeviceMesh m22(cpu_devices(4), {2, 2}, {"a", "b"});
    CHECK_THROWS_AS(distribute(x, DeviceMapping(m22, std::vector{Partial(ReduceOp::sum), Partial(ReduceOp::max)})),
                    NotBuiltError);
  }
}
