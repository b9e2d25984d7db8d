// CUDA eager ops against the CPU: memory, copies, every elementwise row over
// dtypes and layouts (contiguous, broadcast, transposed, negative strides,
// scalars), mixed-device errors. Label `gpu`; skipped without a device.
#include <functional>

#include "gpu_util.h"

namespace {
using namespace kiln;

std::vector<OpId> rows_of(OpCategory c) {
  std::vector<OpId> v;
  for (int i = 0; i < kNumOps; ++i)
    if (op_info(static_cast<OpId>(i)).category == c) v.push_back(static_cast<OpId>(i));
  return v;
}

const std::vector<DType> kDTypes = {DType::float32, DType::float16, DType::bfloat16, DType::float64, DType::int32,
                                    DType::int64,   DType::int8,    DType::uint8,    DType::bool_};

/// The same view of input k on either device (a strided view on CUDA is
/// made after the copy, so the kernel sees the strides).
using View = std::function<Tensor(size_t, const Tensor&)>;
const View as_is = [](size_t, const Tensor& t) { return t; };

/// Runs `f` on views of CPU inputs and on the same views of their CUDA
/// copies (0-d inputs stay CPU scalars); both succeed and agree, or both
/// raise the same kind of error. Returns 1 when compared.
template <class F> int compare(const std::vector<Tensor>& base, const View& view, F f, const std::string& what) {
  std::vector<Tensor> cpu_in, gpu_in;
  for (size_t k = 0; k < base.size(); ++k) {
    cpu_in.push_back(view(k, base[k]));
    gpu_in.push_back(base[k].ndim() == 0 ? base[k] : view(k, base[k].cuda()));
  }
  const auto r = kt::run_on_cpu_and_cuda(f, cpu_in, gpu_in);
  if (!r) return 0;
  kt::check_cuda_matches_cpu(r->second, r->first, what);
  return 1;
}
}  // namespace

TEST_SUITE("gpu") {
  TEST_CASE("host to device to host round trips every dtype, strided views too") {
    if (!kt::gpu_or_skip()) return;
    for (DType d : kDTypes) {
      CAPTURE(d);
      Tensor x = kt::random_tensor({33, 17}, d, 1, true);
      Tensor g = x.cuda();
      CHECK(g.device() == Device::cuda(0));
      CHECK(kt::values(g.cpu()) == kt::values(x));
      Tensor t = x.transpose();  // a strided source: made contiguous on its device
      CHECK(kt::values(t.cuda()) == kt::values(t));
      CHECK(kt::values(g.transpose().contiguous()) == kt::values(t));  // the Cast kernel copies on the device
      CHECK(g.to(Device::cuda(0)).is_same(g));
    }
    Tensor big = kt::random_tensor({5'000'000}, DType::float32, 2);  // > one 8 MiB staging chunk
    CHECK(kt::values(big.cuda().cpu()) == kt::values(big));
    Tensor z = zeros({1000}, DType::int64, Device::cuda(0));
    CHECK(z.to_vector<int64_t>() == std::vector<int64_t>(1000, 0));
    Tensor o = full({3}, 2.5, DType::float16, Device::cuda(0));
    CHECK(o.to_vector<double>() == std::vector<double>{2.5, 2.5, 2.5});
    CHECK(Tensor::from_vector(std::vector<float>{4.5f}).cuda().item<double>() == 4.5);
    std::ostringstream os;
    os << Tensor::from_vector(std::vector<float>{1, 2}).cuda();
    CHECK(os.str() == "[1., 2.]");
  }

  TEST_CASE("the caching allocator reuses freed device blocks and reports per-device statistics") {
    if (!kt::gpu_or_skip()) return;
    cuda::empty_cache(0);
    const auto before = cuda::memory_stats(0);
    { Tensor a = empty({1 << 20}, DType::float32, Device::cuda(0)); }
    { Tensor b = empty({1 << 20}, DType::float32, Device::cuda(0)); }
    const auto after = cuda::memory_stats(0);
    CHECK(after.cache_hits >= before.cache_hits + 1);
    CHECK(after.bytes_in_use == before.bytes_in_use);
    CHECK(after.bytes_cached >= size_t(4) << 20);
    cuda::empty_cache(0);
    CHECK(cuda::memory_stats(0).bytes_cached == 0);
    cuda::set_memory_limit(0, size_t(1) << 20);
    CHECK_THROWS_WITH_AS(empty({1 << 20}, DType::float32, Device::cuda(0)), doctest::Contains("cuda:0: out of memory"),
                         DeviceError);
    cuda::set_memory_limit(0, SIZE_MAX);
  }

  TEST_CASE("mixed devices are a DeviceError naming both; CPU scalars join CUDA operands") {
    if (!kt::gpu_or_skip()) return;
    Tensor c = Tensor::from_vector(std::vector<float>{1, 2, 3});
    Tensor g = c.cuda();
    CHECK_THROWS_WITH_AS(add(c, g), doctest::Contains("cuda:0"), DeviceError);
    CHECK_THROWS_WITH_AS(add(g, c), doctest::Contains("cpu"), DeviceError);
    CHECK(kt::values(g * 2) == std::vector<double>{2, 4, 6});
    CHECK(kt::values(2 - g) == std::vector<double>{1, 0, -1});
    CHECK((g + 1).device() == Device::cuda(0));
    CHECK(kt::values(where(g > 1.5, g, 0.0)) == std::vector<double>{0, 2, 3});
  }

  TEST_CASE("every elementwise row on CUDA matches the CPU over dtypes and layouts") {
    if (!kt::gpu_or_skip()) return;
    int compared = 0;
    for (OpId op : rows_of(OpCategory::Unary)) {
      for (DType d : kDTypes) {
        const std::string what = std::string(op_name(op)) + " " + std::string(name(d));
        Tensor x = kt::random_tensor({37, 19}, d, 10 + int(op), true);
        Attrs a;
        a.dtype = DType::float32;  // Cast's target
        auto f = [&](const std::vector<Tensor>& in) { return apply(op, in[0], a); };
        compared += compare({x}, as_is, f, what + " contiguous");
        compared += compare({x}, [](size_t, const Tensor& t) { return t.transpose(); }, f, what + " transposed");
        compared += compare({x}, [](size_t, const Tensor& t) { return flip(t, {0}); }, f, what + " negative strides");
      }
    }
    for (OpId op : rows_of(OpCategory::Binary)) {
      for (DType d : kDTypes) {
        const std::string what = std::string(op_name(op)) + " " + std::string(name(d));
        Tensor a = kt::random_tensor({37, 19}, d, 100 + int(op), true);
        Tensor b = kt::random_tensor({37, 19}, d, 200 + int(op), true);
        Tensor col = kt::random_tensor({37, 1}, d, 300 + int(op), true);
        Tensor row = kt::random_tensor({19}, d, 400 + int(op), true);
        auto f = [&](const std::vector<Tensor>& in) { return apply(op, std::span<const Tensor>(in)); };
        compared += compare({a, b}, as_is, f, what + " same shape");
        compared += compare({col, row}, as_is, f, what + " broadcast");
        compared += compare({a, b}, [](size_t, const Tensor& t) { return t.transpose(); }, f, what + " transposed");
        Tensor wide = kt::random_tensor({37, 38}, d, 600 + int(op), true);
        compared += compare({a, wide}, [](size_t k, const Tensor& t) { return k ? slice(t, 1, 0, std::nullopt, 2) : t; },
                            f, what + " step-2 slice");
        compared += compare({a, kt::random_tensor({}, d, 7, false)}, as_is, f, what + " CPU scalar");
        compared += compare({kt::random_tensor({}, d, 8, false), a}, as_is, f, what + " CPU scalar first");
      }
    }
    for (OpId op : rows_of(OpCategory::Ternary)) {
      for (DType d : {DType::float32, DType::float16, DType::int32}) {
        const std::string what = std::string(op_name(op)) + " " + std::string(name(d));
        Tensor a = kt::random_tensor({37, 19}, d, 500, true);
        Tensor b = kt::random_tensor({37, 1}, d, 501, true);
        Tensor c = kt::random_tensor({19}, d, 502, true);
        auto f = [&](const std::vector<Tensor>& in) { return apply(op, std::span<const Tensor>(in)); };
        compared += compare({a, b, c}, as_is, f, what + " broadcast");
        compared += compare({a, b, kt::random_tensor({}, d, 503, false)}, as_is, f, what + " CPU scalar");
      }
    }
    MESSAGE(compared << " CUDA results compared with the CPU");
    CHECK(compared > 1000);
  }

  TEST_CASE("a large contiguous elementwise op (vectorised path, many blocks) matches the CPU") {
    if (!kt::gpu_or_skip()) return;
    Tensor a = kt::random_tensor({(1 << 22) + 3}, DType::float32, 9);
    Tensor b = kt::random_tensor({(1 << 22) + 3}, DType::float32, 10);
    kt::check_cuda_matches_cpu(exp(a.cuda()) + b.cuda(), exp(a) + b, "exp(a) + b, 4M + 3");
    Tensor h = a.to(DType::float16);
    kt::check_cuda_matches_cpu(tanh(h.cuda()), tanh(h), "tanh float16");
  }

  TEST_CASE("concat, pad and tile on CUDA match the CPU") {
    if (!kt::gpu_or_skip()) return;
    for (DType d : {DType::float32, DType::float16, DType::int64, DType::bool_}) {
      CAPTURE(d);
      Tensor a = kt::random_tensor({4, 5}, d, 1), b = kt::random_tensor({4, 3}, d, 2);
      kt::check_cuda_matches_cpu(concat({a.cuda(), b.cuda()}, 1), concat({a, b}, 1), "concat axis 1");
      kt::check_cuda_matches_cpu(concat({a.cuda().transpose(), b.cuda().transpose()}, 0),
                                 concat({a.transpose(), b.transpose()}, 0), "concat of transposed views");
      kt::check_cuda_matches_cpu(pad(a.cuda(), {{1, 2}, {0, 3}}, 1.0), pad(a, {{1, 2}, {0, 3}}, 1.0), "pad");
      kt::check_cuda_matches_cpu(tile(a.cuda(), {2, 1, 3}), tile(a, {2, 1, 3}), "tile");
    }
  }

  TEST_CASE("matmul through cuBLASLt matches the CPU: 2-d, batched, broadcast batches, transposed views") {
    if (!kt::gpu_or_skip()) return;
    for (DType d : {DType::float32, DType::float64, DType::float16, DType::bfloat16}) {
      CAPTURE(d);
      // Sums of K products: a tolerance relative to K * |a| |b| (inputs ~ N(0, 1)).
      const double tol = d == DType::float64 ? 1e-10 : d == DType::float32 ? 2e-4 : d == DType::float16 ? 2e-2 : 1e-1;
      // va / vb make the operands' layouts on each device (after the copy).
      auto cmp = [&](const Tensor& a, const Tensor& b, const char* what, const View& va = as_is,
                     const View& vb = as_is) {
        Tensor want = matmul(va(0, a), vb(1, b));
        Tensor got = matmul(va(0, a.cuda()), vb(1, b.cuda()));
        CHECK(got.device() == Device::cuda(0));
        kt::check_all_close(got, kt::values(want), tol, tol * std::sqrt(double(a.shape().back())), what);
      };
      Tensor a = kt::random_tensor({33, 70}, d, 1, false, 1.0), b = kt::random_tensor({70, 45}, d, 2, false, 1.0);
      cmp(a, b, "2-d");
      const View col_major = [](size_t, const Tensor& t) { return t.transpose().contiguous().transpose(); };
      cmp(a, b, "A column-major (no copy)", col_major);
      cmp(a, b, "B column-major (no copy)", as_is, col_major);
      cmp(a, b, "both column-major", col_major, col_major);
      Tensor ba = kt::random_tensor({3, 33, 70}, d, 3, false, 1.0), bb = kt::random_tensor({3, 70, 45}, d, 4, false, 1.0);
      cmp(ba, bb, "batched");
      cmp(ba, b, "broadcast batch of B");
      cmp(kt::random_tensor({2, 1, 8, 16}, d, 5, false, 1.0), kt::random_tensor({3, 16, 4}, d, 6, false, 1.0),
          "broadcast batches [2,1] x [3]");
      cmp(kt::random_tensor({70}, d, 7, false, 1.0), b, "vector @ matrix");
      cmp(ba, kt::random_tensor({35, 5}, d, 8, false, 1.0), "strided A (copied)",
          [](size_t, const Tensor& t) { return slice(t, 2, 0, std::nullopt, 2); });
    }
    CHECK_THROWS_WITH_AS(matmul(Tensor::from_vector(std::vector<int32_t>{1, 2}).cuda(),
                                Tensor::from_vector(std::vector<int32_t>{1, 2}).cuda()),
                         doctest::Contains("no kernel for cuda:0 of dtype int32"), DeviceError);
  }

  TEST_CASE("ops without a CUDA kernel raise the registry's DeviceError") {
    if (!kt::gpu_or_skip()) return;
    Tensor g = Tensor::from_vector(std::vector<float>{1, 2, 3}).cuda();
    CHECK_THROWS_WITH_AS(argsort(g), doctest::Contains("no kernel for cuda:0"), DeviceError);
  }
}
