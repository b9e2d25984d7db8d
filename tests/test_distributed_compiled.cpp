// distributed/compiled.h: the tensor-parallel MLP compiled over 1-4 CPU
// devices against one device (float64 reference) and against the eager
// distributed run (bitwise in strict mode), per-shard weights, per-shard
// execute_raw, signal buffers, capture/replay, the jit key and errors.
#include <unistd.h>

#include <cstdio>
#include <filesystem>
#include <cstring>
#include <fstream>

#include "../distributed/compiled.h"
#include "../distributed/plan_file.h"
#include "../distributed/sharding_rules.h"
#include "distributed_test_util.h"
#include "test_util.h"

using namespace dt;
namespace kdist = kiln::distributed;

namespace {

struct Mlp {
  Tensor x, w1, w2;
  Mlp(int64_t m, int64_t k, int64_t h, int64_t n)
      : x(kt::random_tensor({m, k}, DType::float32, 11, false, 1.0)),
        w1(kt::random_tensor({k, h}, DType::float32, 12, false, 0.3)),
        w2(kt::random_tensor({h, n}, DType::float32, 13, false, 0.3)) {}
  // float64 reference of relu(x @ w1) @ w2.
  std::vector<double> ref() const {
    const int64_t m = x.size(0), k = x.size(1), h = w1.size(1), n = w2.size(1);
    auto X = x.to_vector<double>(), W1 = w1.to_vector<double>(), W2 = w2.to_vector<double>();
    std::vector<double> H(m * h), Y(m * n, 0.0);
    for (int64_t i = 0; i < m; ++i)
      for (int64_t j = 0; j < h; ++j) {
        double s = 0;
        for (int64_t q = 0; q < k; ++q) s += X[i * k + q] * W1[q * h + j];
        H[i * h + j] = s > 0 ? s : 0;
      }
    for (int64_t i = 0; i < m; ++i)
      for (int64_t j = 0; j < n; ++j)
        for (int64_t q = 0; q < h; ++q) Y[i * n + j] += H[i * h + q] * W2[q * n + j];
    return Y;
  }
};

// Column-parallel then row-parallel, weights from the registry, the result
// all-reduced to Replicated.
auto mlp_fn(const DeviceMesh& mesh, const Mlp& p) {
  const DistributedLayout l1(DType::float32, p.w1.shape(), DeviceMapping(mesh, {Sharded(1)}));
  const DistributedLayout l2(DType::float32, p.w2.shape(), DeviceMapping(mesh, {Sharded(0)}));
  return [l1, l2](const DistributedTensor& X) {
    DistributedTensor y = kdist::matmul(kdist::relu(kdist::matmul(X, kdist::weight("w1", l1))), kdist::weight("w2", l2));
    return y.redistribute({Replicated()});
  };
}

std::map<std::string, Tensor> mlp_weights(const DeviceMesh& mesh, const Mlp& p) {
  auto w = kdist::shard_weights("w1", distribute(p.w1, DeviceMapping(mesh, {Sharded(1)})));
  auto w2 = kdist::shard_weights("w2", distribute(p.w2, DeviceMapping(mesh, {Sharded(0)})));
  w.insert(w2.begin(), w2.end());
  return w;
}

// The MLP compiled on `mesh` (mlp_fn, its weights bound from mlp_weights)
// for x mapped by `x_placement`: x's layout, the options and the callable.
struct CompiledMlp {
  DistributedLayout lx;
  kdist::DistributedCompileOptions o;
  kdist::DistributedCallable run;
};
CompiledMlp compile_mlp(const DeviceMesh& mesh, const Mlp& p, const Placement& x_placement) {
  const DistributedLayout lx(DType::float32, p.x.shape(), DeviceMapping(mesh, {x_placement}));
  kdist::DistributedCompileOptions o;
  o.weights = mlp_weights(mesh, p);
  return {lx, o, kdist::compile(mlp_fn(mesh, p), o)(lx)};  // the callable is made in place (it does not move)
}

double worst_diff(const std::vector<double>& a, const std::vector<double>& b) {
  double w = 0;
  for (size_t i = 0; i < a.size(); ++i) w = std::max(w, std::abs(a[i] - b[i]));
  return w;
}

bool same_bits(const Tensor& a, const Tensor& b) {
  const Tensor ca = a.contiguous(), cb = b.contiguous();
  return ca.shape() == cb.shape() && ca.dtype() == cb.dtype() &&
         std::memcmp(ca.data_ptr(), cb.data_ptr(), static_cast<size_t>(ca.numel()) * ca.itemsize()) == 0;
}

std::string slurp(const std::string& path) {
  std::ifstream f(path, std::ios::binary);
  return std::string((std::istreambuf_iterator<char>(f)), std::istreambuf_iterator<char>());
}

void spit(const std::string& path, const std::string& bytes) {
  std::ofstream f(path, std::ios::binary | std::ios::trunc);
  f << bytes;
}

std::string temp_prefix(const std::string& tag) {
  return (std::filesystem::temp_directory_path() / ("kiln_dist_" + tag + "_" + std::to_string(::getpid()))).string();
}

// Reading `prefix` must fail with a kiln::Error whose message names `file`.
void check_read_fails(const std::string& prefix, const std::string& file, const std::map<std::string, Tensor>& w) {
  bool threw = false;
  try {
    (void)kdist::read(prefix, w);
  } catch (const kiln::Error& e) {
    threw = true;
    const std::string msg = e.what();
    CHECK_MESSAGE(msg.find(file) != std::string::npos, msg);
  }
  CHECK(threw);
}

}  // namespace

TEST_SUITE("distributed_compiled") {
  TEST_CASE("tensor-parallel MLP compiled on 1-4 devices equals one device; strict equals eager bitwise") {
    const Mlp p(8, 16, 36, 12);
    const auto ref = p.ref();
    auto strict = std::make_shared<InferenceSession>(KernelOptions{true});
    for (int P = 1; P <= 4; ++P) {
      CAPTURE(P);
      const DeviceMesh mesh(cpu_devices(P), "tp");
      auto [lx, o, run] = compile_mlp(mesh, p, Replicated());
      CHECK(run.num_collectives() == (P > 1 ? 1 : 0));  // the all-reduce of the row-parallel result
      CHECK(run.local_devices().size() == size_t(P));
      const DistributedTensor X = distribute(p.x, lx.mapping);
      auto out = run(X);
      REQUIRE(out.size() == 1);
      CHECK(out[0].mapping().placements()[0] == Replicated());
      for (int64_t d = 0; d < P; ++d) CHECK(out[0].shard(d).device() == (Device{DeviceType::cpu, int(d)}));
      CHECK(worst_diff(out[0].full_tensor().to_vector<double>(), ref) < 1e-5);
      // Strict: each segment is bitwise eager, the all-reduce is the eager one.
      o.session = strict;
      auto srun = kdist::compile(mlp_fn(mesh, p), o)(lx);
      const DistributedTensor W1 = distribute(p.w1, DeviceMapping(mesh, {Sharded(1)}));
      const DistributedTensor W2 = distribute(p.w2, DeviceMapping(mesh, {Sharded(0)}));
      const DistributedTensor eager = kdist::matmul(kdist::relu(kdist::matmul(X, W1)), W2).redistribute({Replicated()});
      const auto sout = srun(X);
      for (int64_t d = 0; d < P; ++d) CHECK(same_bits(sout[0].shard(d), eager.shard(d)));
    }
  }

  TEST_CASE("uneven shards and a Sharded result (reduce-scatter) compile and match") {
    const Mlp p(6, 10, 10, 7);  // 10 hidden on 3 devices: 4, 3, 3
    const auto ref = p.ref();
    const DeviceMesh mesh(cpu_devices(3), "tp");
    const DistributedLayout l1(DType::float32, p.w1.shape(), DeviceMapping(mesh, {Sharded(1)}));
    const DistributedLayout l2(DType::float32, p.w2.shape(), DeviceMapping(mesh, {Sharded(0)}));
    const DistributedLayout lx(DType::float32, p.x.shape(), DeviceMapping(mesh, {Replicated()}));
    auto run = kdist::compile([](const DistributedTensor& X, const DistributedTensor& W1, const DistributedTensor& W2) {
      DistributedTensor y = kdist::matmul(kdist::relu(kdist::matmul(X, W1)), W2);
      return std::vector<DistributedTensor>{y.redistribute({Sharded(0)}), kdist::relu(kdist::matmul(X, W1))};
    })(lx, l1, l2);
    CHECK(run.num_collectives() == 1);
    CHECK(run.describe().find("reduce-scatter") != std::string::npos);
    auto out = run(distribute(p.x, lx.mapping), distribute(p.w1, l1.mapping), distribute(p.w2, l2.mapping));
    REQUIRE(out.size() == 2);
    CHECK(out[0].local_shape(0) == Shape{2, 7});
    CHECK(out[1].local_shape(0) == Shape{6, 4});  // 10 in 3: 4, 3, 3
    CHECK(worst_diff(out[0].full_tensor().to_vector<double>(), ref) < 1e-5);
  }

  TEST_CASE("per-shard weights: one registry entry per shard, a missing shard is named") {
    CHECK(kdist::shard_weight_name("w1", 0) == "w1");
    CHECK(kdist::shard_weight_name("w1", 2) == "w1.shard.2");
    const Mlp p(4, 8, 8, 4);
    const DeviceMesh mesh(cpu_devices(4), "tp");
    const DistributedLayout lx(DType::float32, p.x.shape(), DeviceMapping(mesh, {Replicated()}));
    auto w = mlp_weights(mesh, p);
    CHECK(w.size() == 8);
    CHECK(w.count("w1") == 1);
    CHECK(w.count("w2.shard.3") == 1);
    CHECK(w.at("w1.shard.1").shape() == Shape{8, 2});
    // Each shard's entry is what that device reads: the result is the
    // reference of the whole weights.
    kdist::DistributedCompileOptions o;
    o.weights = w;
    auto run = kdist::compile(mlp_fn(mesh, p), o)(lx);
    CHECK(worst_diff(run(distribute(p.x, lx.mapping))[0].full_tensor().to_vector<double>(), p.ref()) < 1e-5);
    // Swapping two shards' entries changes the result (they are bound per shard).
    auto copy_to = [](const Tensor& src, int device) {  // src's values on CPU device `device`
      Tensor t = Tensor::empty(src.shape(), src.dtype(), Device{DeviceType::cpu, device});
      std::memcpy(t.data_ptr(), src.data_ptr(), size_t(src.numel()) * src.itemsize());
      return t;
    };
    const Tensor s1 = o.weights.at("w1.shard.1"), s2 = o.weights.at("w1.shard.2");
    o.weights["w1.shard.1"] = copy_to(s2, 1);
    o.weights["w1.shard.2"] = copy_to(s1, 2);
    auto swapped = kdist::compile(mlp_fn(mesh, p), o)(lx);
    CHECK(worst_diff(swapped(distribute(p.x, lx.mapping))[0].full_tensor().to_vector<double>(), p.ref()) > 1e-3);
    o.weights["w1.shard.2"] = s1;  // on cpu:1: a shard on the wrong device is refused
    CHECK_THROWS_WITH_AS(kdist::compile(mlp_fn(mesh, p), o)(lx), doctest::Contains("w1.shard.2"), ValueError);
    o.weights["w1.shard.2"] = s2;
    o.weights.erase("w2.shard.3");
    CHECK_THROWS_WITH_AS(kdist::compile(mlp_fn(mesh, p), o)(lx), doctest::Contains("weight 'w2.shard.3'"),
                         ValueError);
    CHECK_THROWS_AS(kdist::weight("w1", lx), ValueError);  // outside a trace
  }

  TEST_CASE("execute_raw takes one buffer per shard, then the signal buffers") {
    const Mlp p(4, 8, 8, 4);
    const DeviceMesh mesh(cpu_devices(2), "tp");
    auto [lx, o, run] = compile_mlp(mesh, p, Sharded(0));
    const DistributedTensor X = distribute(p.x, lx.mapping);
    const auto want = run(X)[0];
    std::vector<Buffer> bufs{X.shard(0).contiguous().buffer(), X.shard(1).contiguous().buffer()};
    CHECK_THROWS_WITH_AS(run.execute_raw(bufs), doctest::Contains("expected 4 buffers"), ValueError);
    for (const Buffer& b : run.signal_buffers()) bufs.push_back(b);
    const auto out = run.execute_raw(bufs);
    REQUIRE(out.size() == 2);  // one result, two shards
    for (int k = 0; k < 2; ++k) {
      const Tensor got(out[k], DType::float32, want.local_shape(k), contiguous_strides(want.local_shape(k)));
      CHECK(same_bits(got, want.shard(k)));
    }
  }

  TEST_CASE("signal buffers: one per device, shared by callables on the same devices, none on one device") {
    const Mlp p(4, 8, 8, 4);
    for (int P : {1, 3}) {
      CAPTURE(P);
      const DeviceMesh mesh(cpu_devices(P), "tp");
      auto [lx, o, a] = compile_mlp(mesh, p, Replicated());
      auto b = kdist::compile([](const DistributedTensor& x) { return kdist::relu(x); })(lx);
      REQUIRE(a.signal_buffers().size() == size_t(P == 1 ? 0 : P));
      REQUIRE(b.signal_buffers().size() == a.signal_buffers().size());
      for (size_t k = 0; k < a.signal_buffers().size(); ++k) {
        CHECK(a.signal_buffers()[k] == b.signal_buffers()[k]);
        CHECK(a.signal_buffers()[k].device() == (Device{DeviceType::cpu, int(k)}));
      }
      if (P == 1) continue;
      const auto* s0 = static_cast<const uint64_t*>(a.signal_buffers()[0].data());
      const uint64_t before = s0[0];
      a(distribute(p.x, lx.mapping));
      CHECK(s0[0] == before + 1);  // calls started
      CHECK(s0[1] == s0[0]);       // ... and finished
      CHECK(s0[2] == 1);           // collectives of the last call
    }
  }

  TEST_CASE("capture and replay cover every device") {
    const Mlp p(4, 8, 8, 4);
    const DeviceMesh mesh(cpu_devices(2), "tp");
    auto [lx, o, run] = compile_mlp(mesh, p, Replicated());
    const DistributedTensor X = distribute(p.x, lx.mapping);
    const auto cap = run.capture(7, {X});
    CHECK(worst_diff(cap[0].full_tensor().to_vector<double>(), p.ref()) < 1e-5);
    // New values in the captured argument buffers; replay rewrites the results.
    const Tensor x2 = kt::random_tensor(p.x.shape(), DType::float32, 99, false, 1.0);
    for (int64_t d = 0; d < 2; ++d) std::memcpy(X.shard(d).data_ptr(), x2.data_ptr(), size_t(x2.numel()) * 4);
    const auto rep = run.replay(7, {X});
    CHECK(rep[0].shard(0).data_ptr() == cap[0].shard(0).data_ptr());
    CHECK(same_bits(rep[0].shard(1), run(X)[0].shard(1)));
    CHECK_THROWS_AS(run.replay(7, {distribute(p.x, lx.mapping)}), ValueError);  // other buffers
    CHECK_THROWS_AS(run.replay(8, {X}), ValueError);                            // no such capture
  }

  TEST_CASE("jit: the cache key includes the mapping") {
    const DeviceMesh mesh(cpu_devices(2), "tp");
    auto f = kdist::jit([](const DistributedTensor& x) { return kdist::relu(x).redistribute({Replicated()}); });
    const Tensor x = kt::random_tensor({4, 6}, DType::float32, 5, false, 1.0);
    const Tensor want = kiln::relu(x);
    for (const Placement& pl : {Replicated(), Sharded(0), Sharded(1), Replicated()}) {
      auto out = f(distribute(x, DeviceMapping(mesh, {pl})));
      CHECK(same_bits(out[0].shard(1), want));
    }
    CHECK(f.compiles() == 3);
    const DistributedLayout a(DType::float32, {4, 6}, DeviceMapping(mesh, {Sharded(0)}));
    const DistributedLayout b(DType::float32, {4, 6}, DeviceMapping(mesh, {Sharded(1)}));
    CHECK(kdist::jit_key({a}) != kdist::jit_key({b}));
  }

  TEST_CASE("export writes a plan manifest with the mappings and one MEF per device segment") {
    const Mlp p(4, 8, 8, 4);
    const DeviceMesh mesh(cpu_devices(2), "tp");
    auto [lx, o, run] = compile_mlp(mesh, p, Replicated());
    const std::string prefix =
        (std::filesystem::temp_directory_path() / ("kiln_dist_export_" + std::to_string(::getpid()))).string();
    const auto paths = run.export_mef(prefix);
    REQUIRE(paths.size() >= 5);  // manifest + per device its plan and segment 0
    CHECK(paths[0] == prefix + ".plan");
    const std::string text = slurp(paths[0]);
    CHECK(text.find("argument 0 float32 2 4 8 Replicated  # " + lx.str()) != std::string::npos);
    CHECK(text.find("device 1 " + std::filesystem::path(prefix).filename().string() + ".d1.plan") != std::string::npos);
    CHECK(text.find("all-reduce") != std::string::npos);
    CHECK(text.find("Partial(sum)") != std::string::npos);
    for (const auto& path : paths) std::remove(path.c_str());
  }

  TEST_CASE("errors: meshes, axes, ranks, argument layouts") {
    const DeviceMesh m2(cpu_devices(2), "tp"), m3(cpu_devices(3), "tp");
    const DistributedLayout a(DType::float32, {4, 4}, DeviceMapping(m2, {Sharded(0)}));
    const DistributedLayout b(DType::float32, {4, 4}, DeviceMapping(m3, {Sharded(0)}));
    auto add2 = [](const DistributedTensor& x, const DistributedTensor& y) { return kdist::add(x, y); };
    CHECK_THROWS_WITH_AS(kdist::compile(add2)(a, b), doctest::Contains("on one mesh"), ValueError);
    CHECK_THROWS_AS(DeviceMapping::named(m2, {{"dp", Sharded(0)}}), ValueError);  // no mesh axis "dp"
    CHECK_THROWS_AS(kdist::compile([](const DistributedTensor& x) { return x; })(
                        DistributedLayout(DType::float32, {4, 4}, DeviceMapping(m2, {Sharded(2)}))),
                    IndexError);
    auto run = kdist::compile([](const DistributedTensor& x) { return kdist::relu(x); })(a);
    const Tensor t = kt::random_tensor({4, 4}, DType::float32, 3, false, 1.0);
    CHECK_THROWS_WITH_AS(run(distribute(t, DeviceMapping(m2, {Sharded(1)}))), doctest::Contains("argument 0"),
                         ValueError);
    CHECK(same_bits(run(distribute(t, a.mapping))[0].full_tensor(), kiln::relu(t)));
  }

  TEST_CASE("read: an exported program reads back with the same mesh, mappings, collectives and bits") {
    const Mlp p(8, 16, 36, 12);
    const auto ref = p.ref();
    for (int P : {1, 2, 4}) {
      CAPTURE(P);
      const DeviceMesh mesh(cpu_devices(P), "tp");
      auto [lx, o, run] = compile_mlp(mesh, p, Sharded(0));
      const std::string prefix = temp_prefix("read" + std::to_string(P));
      const auto paths = run.export_mef(prefix);
      auto back = kdist::read(prefix, o.weights);
      CHECK(back.mesh() == mesh);
      CHECK(back.in_layouts() == run.in_layouts());
      CHECK(back.out_layouts() == run.out_layouts());
      CHECK(back.num_collectives() == run.num_collectives());
      CHECK(back.describe() == run.describe());
      CHECK(back.local_devices() == run.local_devices());
      for (int64_t k = 0; k < P; ++k) CHECK(back.num_segments(k) == run.num_segments(k));
      const DistributedTensor X = distribute(p.x, lx.mapping);
      const auto a = run(X), b = back(X);
      REQUIRE(b.size() == 1);
      CHECK(b[0].layout() == a[0].layout());
      for (int64_t d = 0; d < P; ++d) CHECK(same_bits(a[0].shard(d), b[0].shard(d)));
      CHECK(worst_diff(b[0].full_tensor().to_vector<double>(), ref) < 1e-5);
      // execute_raw and capture/replay on the read program.
      std::vector<Buffer> raw;
      for (int64_t d = 0; d < P; ++d) raw.push_back(X.shard(d).contiguous().buffer());
      for (const Buffer& s : back.signal_buffers()) raw.push_back(s);
      const auto rb = back.execute_raw(raw);
      REQUIRE(rb.size() == size_t(P));
      for (int64_t d = 0; d < P; ++d)
        CHECK(std::memcmp(rb[d].data(), a[0].shard(d).contiguous().data_ptr(), rb[d].nbytes()) == 0);
      const DistributedTensor Xc = DistributedTensor::from_shards(lx, [&] {
        std::vector<Tensor> s;
        for (int64_t d = 0; d < P; ++d) s.push_back(X.shard(d).contiguous());
        return s;
      }());
      // (x Sharded(0) is gathered first: segment 0 reads weights only, run
      // once at capture.)
      back.capture(7, {Xc});
      const auto rep = back.replay(7, {Xc});
      for (int64_t d = 0; d < P; ++d) CHECK(same_bits(rep[0].shard(d), a[0].shard(d)));
      // Exporting the read program again gives the same plan.
      const std::string prefix2 = temp_prefix("reread" + std::to_string(P));
      const auto paths2 = back.export_mef(prefix2);
      std::string t1 = slurp(paths[0]), t2 = slurp(paths2[0]);
      CHECK(t1.substr(0, t1.find("\ndevice ")) == t2.substr(0, t2.find("\ndevice ")));
      for (const auto& f : paths) std::remove(f.c_str());
      for (const auto& f : paths2) std::remove(f.c_str());
    }
  }

  TEST_CASE("read: per-shard weights rebind; a missing shard is an error") {
    const Mlp p(4, 8, 10, 6);
    const Mlp other = [&] {
      Mlp m = p;
      m.w1 = kt::random_tensor(p.w1.shape(), DType::float32, 21, false, 0.3);
      m.w2 = kt::random_tensor(p.w2.shape(), DType::float32, 22, false, 0.3);
      return m;
    }();
    const DeviceMesh mesh(cpu_devices(2), "tp");
    auto [lx, o, run] = compile_mlp(mesh, p, Replicated());
    const std::string prefix = temp_prefix("rebind");
    const auto paths = run.export_mef(prefix);
    auto back = kdist::read(prefix, mlp_weights(mesh, other));
    const auto y = back(distribute(p.x, lx.mapping))[0].full_tensor();
    CHECK(worst_diff(y.to_vector<double>(), other.ref()) < 1e-5);
    CHECK(worst_diff(y.to_vector<double>(), p.ref()) > 1e-3);  // not the exported weights
    auto w = mlp_weights(mesh, p);
    w.erase(kdist::shard_weight_name("w2", 1));
    CHECK_THROWS_WITH_AS(kdist::read(prefix, w), doctest::Contains("w2.shard.1"), kiln::Error);
    for (const auto& f : paths) std::remove(f.c_str());
  }

  TEST_CASE("read: truncated, corrupted and inconsistent plan files are clear errors") {
    const Mlp p(4, 8, 8, 4);
    const DeviceMesh mesh(cpu_devices(2), "tp");
    auto [lx, o, run] = compile_mlp(mesh, p, Replicated());
    const std::string prefix = temp_prefix("fuzz");
    const auto paths = run.export_mef(prefix);
    const std::string plan = prefix + ".plan", dev1 = prefix + ".d1.plan";
    CHECK_NOTHROW((void)kdist::read(prefix, o.weights));
    for (const std::string& file : {plan, dev1}) {
      CAPTURE(file);
      const std::string good = slurp(file);
      // Every truncation.
      for (size_t n = 0; n < good.size(); ++n) {
        spit(file, good.substr(0, n));
        check_read_fails(prefix, file, o.weights);
      }
      // Every byte flipped (one bit, then a digit turned into another digit).
      for (size_t i = 0; i < good.size(); ++i) {
        std::string bad = good;
        bad[i] = static_cast<char>(bad[i] ^ 0x01);
        spit(file, bad);
        check_read_fails(prefix, file, o.weights);
      }
      spit(file, good);
    }
    // Consistent checksums, inconsistent contents (as a hand edit would make).
    const kdist::detail::PlanFile pf = kdist::detail::read_plan(plan);
    const kdist::detail::DevicePlanFile d1 = kdist::detail::read_device_plan(dev1, pf, 1);
    const std::string good1 = slurp(dev1);
    {
      auto d = d1;
      REQUIRE(!d.segments[0].inputs.empty());
      d.segments[0].inputs[0] = d.coll_dst[0];  // the collective's result, read before the collective
      spit(dev1, kdist::detail::device_plan_text(d));
      CHECK_THROWS_WITH_AS(kdist::read(prefix, o.weights), doctest::Contains("before anything defines it"), ValueError);
    }
    {
      auto d = d1;
      d.coll_src[0] = d.args[0];  // a value of another shape than the collective's source
      spit(dev1, kdist::detail::device_plan_text(d));
      CHECK_THROWS_WITH_AS(kdist::read(prefix, o.weights), doctest::Contains("collective 0 reads value"), ValueError);
    }
    {
      auto d = d1;
      d.segments[0].outputs.push_back(d.args[0]);  // more outputs than the segment's MEF gives
      spit(dev1, kdist::detail::device_plan_text(d));
      check_read_fails(prefix, dev1, o.weights);
    }
    {
      auto d = d1;
      d.plan_checksum ^= 1;  // another export's device file
      spit(dev1, kdist::detail::device_plan_text(d));
      CHECK_THROWS_WITH_AS(kdist::read(prefix, o.weights), doctest::Contains("another export"), ValueError);
    }
    spit(dev1, good1);
    {
      auto q = pf;
      q.out[0] = DistributedLayout(DType::float32, {4, 4}, DeviceMapping(mesh, {Sharded(0)}));
      uint32_t crc = 0;
      spit(plan, kdist::detail::plan_text(q, &crc));
      (void)crc;
      // Device 0's file no longer belongs to this plan.
      CHECK_THROWS_WITH_AS(kdist::read(prefix, o.weights), doctest::Contains(doctest::String((prefix + ".d0.plan").c_str())), ValueError);
    }
    run.export_mef(prefix);
    std::remove((prefix + ".d1.s0.mef").c_str());
    check_read_fails(prefix, "d1.s0.mef", o.weights);
    std::remove((prefix + ".plan").c_str());
    check_read_fails(prefix, plan, o.weights);
    for (const auto& f : paths) std::remove(f.c_str());
  }
}
