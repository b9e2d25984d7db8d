// The tensor core: dtypes and promotion, 16-bit floats, Buffer, Tensor views
// and conversions, stride classes, shape arithmetic, devices.
#include <cstdio>
#include <cstdlib>
#include <sstream>

#include "same_bits.h"
#include "test_util.h"

namespace {

using namespace kiln;

float bits_f32(uint32_t u) {
  float f;
  std::memcpy(&f, &u, 4);
  return f;
}

}  // namespace

TEST_SUITE("core") {
  TEST_CASE("dtype names and sizes") {
    const char* names[] = {"bool",    "uint8",   "int8",  "int32",  "int64",  "float16", "bfloat16",
                           "float32", "float64", "int16", "uint16", "uint32", "uint64"};
    const size_t sizes[] = {1, 1, 1, 4, 8, 2, 2, 4, 8, 2, 2, 4, 8};
    for (int i = 0; i < kNumDTypes; ++i) {
      DType d = DType(i);
      CHECK(name(d) == names[i]);
      CHECK(size_of(d) == sizes[i]);
      CHECK(dtype_from_name(names[i]) == d);
      std::ostringstream os;
      os << d;
      CHECK(os.str() == names[i]);
    }
    CHECK_THROWS_AS(dtype_from_name("float"), DTypeError);
    CHECK_THROWS_WITH_AS(dtype_from_name("int128"), doctest::Contains("int128"), DTypeError);
    CHECK(is_floating(DType::bfloat16));
    CHECK_FALSE(is_floating(DType::int64));
    CHECK(is_integral(DType::uint8));
    CHECK_FALSE(is_integral(DType::bool_));
    CHECK_FALSE(is_signed(DType::uint8));
    CHECK(is_signed(DType::int8));
  }

  TEST_CASE("promote_types: numpy's table") {
    using D = DType;
    const D b = D::bool_, u8 = D::uint8, i8 = D::int8, i32 = D::int32, i64 = D::int64, f16 = D::float16,
            f32 = D::float32, f64 = D::float64;
    const D ts[8] = {b, u8, i8, i32, i64, f16, f32, f64};
    // numpy: np.promote_types(row, col) for 8 of the dtypes numpy shares with
    // kiln (uint8 + int8 -> int16; the full table is in test_int_dtypes.cpp).
    const D i16 = D::int16;
    const D want[8][8] = {
        {b, u8, i8, i32, i64, f16, f32, f64},            // bool
        {u8, u8, i16, i32, i64, f16, f32, f64},          // uint8
        {i8, i16, i8, i32, i64, f16, f32, f64},          // int8
        {i32, i32, i32, i32, i64, f64, f64, f64},        // int32
        {i64, i64, i64, i64, i64, f64, f64, f64},        // int64
        {f16, f16, f16, f64, f64, f16, f32, f64},        // float16
        {f32, f32, f32, f64, f64, f32, f32, f64},        // float32
        {f64, f64, f64, f64, f64, f64, f64, f64},        // float64
    };
    for (int r = 0; r < 8; ++r)
      for (int c = 0; c < 8; ++c) {
        CAPTURE(ts[r]);
        CAPTURE(ts[c]);
        CHECK(promote_types(ts[r], ts[c]) == want[r][c]);
      }
    // bfloat16 follows float16's rules (ml_dtypes); with float16 it gives float32.
    const D bf = D::bfloat16;
    for (D d : {b, u8, i8, bf}) CHECK(promote_types(bf, d) == bf);
    for (D d : {i32, i64, f64}) CHECK(promote_types(bf, d) == f64);
    CHECK(promote_types(bf, f16) == f32);
    CHECK(promote_types(bf, f32) == f32);
    // symmetric over all 9 dtypes
    for (DType x : kt::all_dtypes())
      for (DType y : kt::all_dtypes()) CHECK(promote_types(x, y) == promote_types(y, x));
  }

  TEST_CASE("promote_with_scalar: weak C++ scalars") {
    using K = ScalarKind;
    // a float literal never widens a float tensor; int/bool tensors become float32
    CHECK(promote_with_scalar(DType::float32, K::floating) == DType::float32);
    CHECK(promote_with_scalar(DType::float16, K::floating) == DType::float16);
    CHECK(promote_with_scalar(DType::bfloat16, K::floating) == DType::bfloat16);
    CHECK(promote_with_scalar(DType::float64, K::floating) == DType::float64);
    CHECK(promote_with_scalar(DType::int32, K::floating) == DType::float32);
    CHECK(promote_with_scalar(DType::int64, K::floating) == DType::float32);
    CHECK(promote_with_scalar(DType::bool_, K::floating) == DType::float32);
    // an integer literal keeps any numeric dtype; bool becomes int64
    for (DType d : {DType::uint8, DType::int8, DType::int32, DType::int64, DType::float16, DType::float32})
      CHECK(promote_with_scalar(d, K::integer) == d);
    CHECK(promote_with_scalar(DType::bool_, K::integer) == DType::int64);
    for (DType d : kt::all_dtypes()) CHECK(promote_with_scalar(d, K::boolean) == d);
    // Scalar records the kind of the C++ type
    CHECK(Scalar(2.0).kind == K::floating);
    CHECK(Scalar(2.0f).kind == K::floating);
    CHECK(Scalar(2).kind == K::integer);
    CHECK(Scalar(int64_t(2)).kind == K::integer);
    CHECK(Scalar(true).kind == K::boolean);
  }

  TEST_CASE("float16 conversions") {
    // every non-NaN bit pattern survives half -> float -> half
    int bad = 0;
    for (uint32_t h = 0; h < 0x10000; ++h) {
      float f = float16_t::to_float(uint16_t(h));
      if (std::isnan(f)) {
        bad += !std::isnan(float(float16_t(f)));
        continue;
      }
      bad += float16_t::from_float(f) != h;
    }
    CHECK(bad == 0);
    auto h = [](float f) { return float16_t::from_float(f); };
    CHECK(h(1.0f) == 0x3c00);
    CHECK(h(-2.0f) == 0xc000);
    CHECK(h(-0.0f) == 0x8000);
    CHECK(h(65504.0f) == 0x7bff);                        // largest finite
    CHECK(h(65519.0f) == 0x7bff);                        // rounds down
    CHECK(h(65520.0f) == 0x7c00);                        // tie -> even -> inf
    CHECK(h(1e10f) == 0x7c00);
    CHECK(h(-INFINITY) == 0xfc00);
    CHECK((h(NAN) & 0x7c00) == 0x7c00);
    CHECK((h(NAN) & 0x3ff) != 0);
    // ties round to even
    CHECK(h(1.0f + std::ldexp(1.0f, -11)) == 0x3c00);      // 1 + half ulp -> 1
    CHECK(h(1.0f + 3 * std::ldexp(1.0f, -11)) == 0x3c02);  // -> even mantissa 2
    CHECK(h(1.0f + std::ldexp(1.0f, -11) + std::ldexp(1.0f, -20)) == 0x3c01);  // above the tie
    // subnormals: 2^-24 is the smallest; 2^-25 ties to 0, 3*2^-26 rounds up
    CHECK(h(std::ldexp(1.0f, -24)) == 0x0001);
    CHECK(h(std::ldexp(1.0f, -25)) == 0x0000);
    CHECK(h(3 * std::ldexp(1.0f, -26)) == 0x0001);
    CHECK(h(3 * std::ldexp(1.0f, -25)) == 0x0002);  // 1.5 * 2^-24 tie -> even 2
    CHECK(h(std::ldexp(1.0f, -14)) == 0x0400);      // smallest normal
    CHECK(h(std::ldexp(1023.0f, -24)) == 0x03ff);   // largest subnormal
    CHECK(float16_t::to_float(0x0001) == std::ldexp(1.0f, -24));
    CHECK(float16_t::to_float(0x03ff) == std::ldexp(1023.0f, -24));
    CHECK(float16_t::to_float(0x7c00) == INFINITY);
    CHECK(h(std::ldexp(1.0f, -130)) == 0x0000);  // float32 subnormal -> 0
  }

  TEST_CASE("bfloat16 conversions") {
    int bad = 0;
    for (uint32_t b = 0; b < 0x10000; ++b) {
      float f = bits_f32(b << 16);
      if (std::isnan(f)) {
        bad += !std::isnan(float(bfloat16_t(f)));
        continue;
      }
      bad += bfloat16_t::from_float(f) != b;
    }
    CHECK(bad == 0);
    auto bf = [](float f) { return bfloat16_t::from_float(f); };
    CHECK(bf(1.0f) == 0x3f80);
    CHECK(bf(1.0f + std::ldexp(1.0f, -8)) == 0x3f80);      // tie -> even
    CHECK(bf(1.0f + 3 * std::ldexp(1.0f, -8)) == 0x3f82);  // tie -> even
    CHECK(bf(1.0f + std::ldexp(1.0f, -8) + std::ldexp(1.0f, -20)) == 0x3f81);
    CHECK(bf(INFINITY) == 0x7f80);
    CHECK(bf(std::numeric_limits<float>::max()) == 0x7f80);  // above max + half ulp
    CHECK(std::isnan(float(bfloat16_t(NAN))));
    CHECK(std::isnan(float(bfloat16_t(bits_f32(0x7f800001u)))));  // signalling NaN stays NaN
    CHECK(bf(bits_f32(1)) == 0x0000);  // smallest float32 subnormal rounds to 0
    CHECK(bf(bits_f32(0x00010000u)) == 0x0001);
  }

  TEST_CASE("Buffer: 64-byte aligned, shared, wrapped") {
    for (size_t n : {size_t(0), size_t(1), size_t(63), size_t(64), size_t(65), size_t(1000), size_t(1) << 20}) {
      CAPTURE(n);
      Buffer b = Buffer::allocate(n);
      REQUIRE(b.data() != nullptr);
      CHECK(reinterpret_cast<uintptr_t>(b.data()) % 64 == 0);
      CHECK(b.nbytes() == n);
      CHECK(b.device() == Device::cpu());
    }
    for (DType d : kt::all_dtypes())
      CHECK(reinterpret_cast<uintptr_t>(Tensor::empty({3, 5}, d).data_ptr()) % 64 == 0);
    Buffer a = Buffer::allocate(16);
    {
      Buffer c = a;
      CHECK(a.use_count() == 2);
      CHECK(c == a);
    }
    CHECK(a.use_count() == 1);
    CHECK_FALSE(Buffer());
    // No device: DeviceError with the CUDA text; no CUDA build: NotBuiltError.
    if (!cuda::is_built()) CHECK_THROWS_AS(Buffer::allocate(16, Device::cuda(0)), NotBuiltError);
    else if (cuda::device_count() == 0) CHECK_THROWS_AS(Buffer::allocate(16, Device::cuda(0)), DeviceError);
    auto owner = std::make_shared<std::vector<float>>(4, 2.0f);
    Buffer w = Buffer::wrap(owner->data(), 16, Device::cpu(), owner);
    CHECK(owner.use_count() == 2);
    CHECK(static_cast<float*>(w.data())[3] == 2.0f);
  }

  TEST_CASE("Buffer::wrap never frees the wrapped memory") {
    // keep_alive null (buffer.h: "memory owned elsewhere") or a shared_ptr owning
    // nothing: the Buffer and its tensors die, the caller's memory stays its own
    // (kiln freed it: a double free when the vector died, or an unmapped block).
    std::vector<float> host(4, 1.5f);
    {
      Buffer w = Buffer::wrap(host.data(), host.size() * sizeof(float), Device::cpu(), nullptr);
      Tensor t(w, DType::float32, {4}, {1});
      t.fill_(2.5f);
    }
    {
      std::shared_ptr<void> nothing(static_cast<void*>(nullptr), [](void*) {});
      Buffer w = Buffer::wrap(host.data(), host.size() * sizeof(float), Device::cpu(), nothing);
      CHECK(w.data() == static_cast<void*>(host.data()));
    }
    CHECK(host == std::vector<float>{2.5f, 2.5f, 2.5f, 2.5f});
    const size_t n = size_t(4) << 20;  // 16 MiB: kiln's pool would munmap or reuse it
    float* mine = static_cast<float*>(std::aligned_alloc(64, n * sizeof(float)));
    REQUIRE(mine);
    for (size_t i = 0; i < n; ++i) mine[i] = 1.0f;
    {
      Buffer w = Buffer::wrap(mine, n * sizeof(float), Device::cpu(), nullptr);
      Tensor t(w, DType::float32, {int64_t(n)}, {1});
      CHECK(t.sum().item<double>() == double(n));
    }
    Tensor fresh = full({int64_t(n)}, 7.0f);
    CHECK(fresh.data_ptr() != static_cast<void*>(mine));
    CHECK(mine[0] == 1.0f);
    CHECK(mine[n - 1] == 1.0f);
    std::free(mine);
  }

  TEST_CASE("Tensor views are bounds-checked") {
    Buffer b = Buffer::allocate(10 * sizeof(float));
    CHECK_NOTHROW(Tensor(b, DType::float32, {2, 5}, {5, 1}));
    CHECK_NOTHROW(Tensor(b, DType::float32, {5}, {2}, 1));    // reaches element 9
    CHECK_NOTHROW(Tensor(b, DType::float32, {10}, {-1}, 9));  // reversed
    CHECK_NOTHROW(Tensor(b, DType::float32, {4, 10}, {0, 1}));  // broadcast rows
    CHECK_NOTHROW(Tensor(b, DType::float32, {0, 7}, {100, 100}, 1000));  // empty reaches nothing
    CHECK_THROWS_AS(Tensor(b, DType::float32, {2, 6}, {6, 1}), IndexError);
    CHECK_THROWS_AS(Tensor(b, DType::float32, {5}, {2}, 2), IndexError);
    CHECK_THROWS_AS(Tensor(b, DType::float32, {10}, {-1}, 8), IndexError);
    CHECK_THROWS_AS(Tensor(b, DType::float32, {2}, {1}, -1), IndexError);
    CHECK_THROWS_AS(Tensor(b, DType::float64, {6}, {1}), IndexError);  // 40 bytes hold 5 doubles
    CHECK_THROWS_AS(Tensor(b, DType::float32, {2, 5}, {5}), ShapeError);
    CHECK_THROWS_AS(Tensor(b, DType::float32, {3}, {int64_t(1) << 62}), ShapeError);
    CHECK_THROWS_AS(Tensor(b, DType::float32, {-2}, {1}), ShapeError);
    CHECK_THROWS_WITH_AS(Tensor(b, DType::float32, {2, 6}, {6, 1}), doctest::Contains("outside"), IndexError);
    // views share storage
    Tensor t = Tensor::from_vector<float>({0, 1, 2, 3, 4, 5, 6, 7, 8, 9});
    Tensor v(t.buffer(), DType::float32, {5}, {2}, 1);
    CHECK(v.to_vector<float>() == std::vector<float>{1, 3, 5, 7, 9});
    t.data<float>()[3] = 30;
    CHECK(v.to_vector<float>()[1] == 30);
    CHECK_THROWS_AS(Tensor().shape(), ValueError);
    CHECK_FALSE(Tensor().defined());
    CHECK_THROWS_AS(t.data<double>(), DTypeError);
    CHECK_THROWS_AS(t.size(1), IndexError);
    CHECK(t.size(-1) == 10);
  }

  TEST_CASE("item and to_vector convert with numpy's cast rules") {
    Tensor f = Tensor::from_vector<double>({2.7, -2.7, 0.0, NAN});
    CHECK(f.to_vector<int32_t>() == std::vector<int32_t>{2, -2, 0, std::numeric_limits<int32_t>::min()});
    CHECK(f.to_vector<bool>() == std::vector<bool>{true, true, false, true});
    std::vector<float16_t> h = f.to_vector<float16_t>();
    CHECK(float(h[0]) == doctest::Approx(2.7).epsilon(1e-3));
    CHECK(std::isnan(float(h[3])));
    CHECK(Tensor::from_vector<double>({300.0}).to_vector<uint8_t>()[0] == uint8_t(44));  // wraps like numpy
    Tensor one = Tensor::from_vector<int64_t>({7}, {1, 1});
    CHECK(one.item<double>() == 7.0);
    CHECK(one.item<float>() == 7.0f);
    CHECK(one.item<bool>());
    CHECK(Tensor::from_vector<float>({-3.9f}, {}).item<int64_t>() == -3);
    CHECK_THROWS_AS(f.item(), ShapeError);
    CHECK_THROWS_AS(Tensor::empty({0}).item(), ShapeError);
    // to_vector of a non-contiguous view gives the logical order
    Tensor m = Tensor::from_vector<int32_t>({1, 2, 3, 4, 5, 6}, {2, 3});
    Tensor mt(m.buffer(), DType::int32, {3, 2}, {1, 3});
    CHECK(mt.to_vector<int64_t>() == std::vector<int64_t>{1, 4, 2, 5, 3, 6});
    CHECK_THROWS_AS(Tensor::from_vector<int32_t>({1, 2, 3}, {2, 2}), ShapeError);
  }

  TEST_CASE("contiguous, clone and to") {
    Tensor m = Tensor::from_vector<float>({1, 2, 3, 4, 5, 6}, {2, 3});
    CHECK(m.contiguous().is_same(m));
    Tensor mt(m.buffer(), DType::float32, {3, 2}, {1, 3});
    Tensor c = mt.contiguous();
    CHECK(c.is_contiguous());
    CHECK_FALSE(c.buffer() == m.buffer());
    CHECK(c.to_vector<float>() == std::vector<float>{1, 4, 2, 5, 3, 6});
    Tensor k = m.clone();
    CHECK_FALSE(k.buffer() == m.buffer());
    k.data<float>()[0] = 100;
    CHECK(m.to_vector<float>()[0] == 1);
    CHECK(m.to(DType::float32).is_same(m));
    Tensor i = m.to(DType::int64);
    CHECK(i.dtype() == DType::int64);
    CHECK(i.to_vector<int64_t>() == std::vector<int64_t>{1, 2, 3, 4, 5, 6});
    CHECK(mt.to(DType::float64).to_vector<double>() == std::vector<double>{1, 4, 2, 5, 3, 6});
  }

  TEST_CASE("stride classes") {
    Buffer b = Buffer::allocate(64 * sizeof(float));
    auto cls = [&](Shape s, Strides st, int64_t off = 0) {
      return Tensor(b, DType::float32, std::move(s), std::move(st), off).stride_class();
    };
    CHECK(cls({2, 3}, {3, 1}) == StrideClass::contiguous);
    CHECK(cls({2, 1, 3}, {3, 99, 1}) == StrideClass::contiguous);  // size-1 strides ignored
    CHECK(cls({}, {}) == StrideClass::contiguous);
    CHECK(cls({4, 3}, {0, 1}) == StrideClass::broadcast);
    CHECK(cls({3, 2}, {1, 3}) == StrideClass::transposed);
    CHECK(cls({2, 3, 4}, {1, 8, 2}) == StrideClass::transposed);
    CHECK(cls({3}, {2}) == StrideClass::general);
    CHECK(cls({3}, {-1}, 2) == StrideClass::general);
    CHECK(cls({2, 3}, {4, 1}) == StrideClass::general);  // padded rows
    Tensor t(b, DType::float32, {3, 2}, {1, 3});
    CHECK_FALSE(t.is_contiguous());
    TensorLayout l = t.layout();
    CHECK(l.dtype == DType::float32);
    CHECK(l.shape == Shape{3, 2});
    CHECK(l.stride_class == StrideClass::transposed);
    CHECK_FALSE(l.is_contiguous());
    CHECK(l == TensorLayout(DType::float32, {3, 2}, Device::cpu(), StrideClass::transposed));
    CHECK_FALSE(l == TensorLayout(DType::float32, {3, 2}));
    std::ostringstream os;
    os << l;
    CHECK(os.str() == "TensorLayout(float32, [3, 2], cpu, transposed)");
  }

  TEST_CASE("shape arithmetic") {
    CHECK(checked_numel({}) == 1);
    CHECK(checked_numel({2, 3, 4}) == 24);
    CHECK(checked_numel({0, int64_t(1) << 62, int64_t(1) << 62}) == 0);
    CHECK_THROWS_AS(checked_numel({int64_t(1) << 32, int64_t(1) << 32}), ShapeError);
    CHECK_THROWS_AS(checked_numel({3, -1}), ShapeError);
    CHECK_THROWS_WITH_AS(checked_numel({int64_t(1) << 62, 4}, "myop"), doctest::Contains("myop"), ShapeError);
    CHECK(shape_str({3, 4}) == "[3, 4]");
    CHECK(shape_str({}) == "[]");
    CHECK(contiguous_strides({2, 3, 4}) == Strides{12, 4, 1});
    CHECK(broadcast_shapes({3, 1}, {4}, "add") == Shape{3, 4});
    CHECK_THROWS_WITH_AS(broadcast_shapes({3, 4}, {5}, "add"), "add: cannot broadcast shapes [3, 4] and [5]",
                         ShapeError);
    CHECK(normalize_axis(-1, 3, "op") == 2);
    CHECK_THROWS_AS(normalize_axis(3, 3, "op"), IndexError);
    CHECK_THROWS_AS(normalize_axis(-4, 3, "op"), IndexError);
  }

  TEST_CASE("Device") {
    CHECK(Device::parse("cpu") == Device::cpu());
    CHECK(Device::parse("cuda") == Device::cuda(0));
    CHECK(Device::parse("cuda:3") == Device::cuda(3));
    CHECK(Device::cuda(2).str() == "cuda:2");
    CHECK(Device::parse("cpu:3") == Device{DeviceType::cpu, 3});  // CPU devices of one process (distributed/)
    CHECK((Device{DeviceType::cpu, 3}).str() == "cpu:3");
    
    CHECK(Device::cpu().str() == "cpu");
    CHECK(Device::cpu().is_cpu());
    CHECK_FALSE(Device::cuda().is_cpu());
    for (const char* bad : {"", "gpu", "CPU", "cuda:", "cuda:x", "cuda:-1", "cuda:1a", "cuda:123456789", "cpu:0"}) {
      CAPTURE(bad);
      CHECK_THROWS_AS(Device::parse(bad), DeviceError);
    }
    CHECK_THROWS_WITH_AS(Device::parse("gpu"), doctest::Contains("'gpu'"), DeviceError);
  }
}

TEST_SUITE("core") {
  TEST_CASE("set_num_threads rejects absurd counts") {
    CHECK_THROWS_WITH_AS(kiln::set_num_threads(100000), doctest::Contains("n <= 1024"), kiln::ValueError);
    CHECK_THROWS_AS(kiln::set_num_threads(0), kiln::ValueError);
  }
}

TEST_SUITE("core") {
TEST_CASE("Buffer::wrap refuses a null pointer with bytes (a tensor over it would read address 0)") {
  CHECK_THROWS_WITH_AS(Buffer::wrap(nullptr, 16, Device::cpu(), nullptr), doctest::Contains("Buffer::wrap"),
                       ValueError);
  Buffer e = Buffer::wrap(nullptr, 0, Device::cpu(), nullptr);  // nothing to hold: fine
  CHECK(e.nbytes() == 0);
}

TEST_CASE("Buffer::wrap takes memory at any address; a tensor over it needs its dtype's alignment") {
  // buffer.h said wrapped memory is 64-byte aligned, but wrap took any
  // pointer. No kernel needs 64 bytes (views start at any element): memory
  // 4 bytes past a 64-byte boundary computes what an aligned copy does, bit
  // for bit, eagerly and compiled. What elements need is their own size: a
  // float32 tensor over an odd address is refused, naming both.
  constexpr int64_t n = 64 * 33;
  char* block = static_cast<char*>(std::aligned_alloc(64, n * 4 + 128));
  REQUIRE(block);
  float* at4 = reinterpret_cast<float*>(block + 4);
  REQUIRE(reinterpret_cast<uintptr_t>(at4) % 64 == 4);
  for (int64_t i = 0; i < n; ++i) at4[i] = 0.001f * float(i % 997) - 0.4f;
  {
    Buffer w = Buffer::wrap(at4, n * 4, Device::cpu(), nullptr);
    Tensor t(w, DType::float32, {64, 33}, {33, 1});
    Tensor ref = t.clone();  // kiln's own, 64-byte aligned memory
    REQUIRE(reinterpret_cast<uintptr_t>(ref.data_ptr()) % 64 == 0);
    CHECK(kt::same_bits(exp(t) + t, exp(ref) + ref));
    CHECK(kt::same_bits(sum(t, {0}), sum(ref, {0})));
    CHECK(kt::same_bits(softmax(t, -1), softmax(ref, -1)));
    CHECK(kt::same_bits(matmul(t, transpose(t, 0, 1)), matmul(ref, transpose(ref, 0, 1))));
    CompiledCallable f = compile([](Tensor a) { return tanh(a * 2.0f) + sum(a, {1}, true); })(
        TensorLayout(DType::float32, {64, 33}));
    CHECK(kt::same_bits(f(t), f(ref)));
    // an in-place write into the wrapped memory
    t.mul_(2.0f);
    ref.mul_(2.0f);
    CHECK(kt::same_bits(t, ref));
    // a float32 tensor at an address not a multiple of 4: refused, naming it
    Buffer odd = Buffer::wrap(block + 1, 64, Device::cpu(), nullptr);
    char hex[32];
    std::snprintf(hex, sizeof hex, "0x%llx", static_cast<unsigned long long>(reinterpret_cast<uintptr_t>(block + 1)));
    CHECK_THROWS_WITH_AS(Tensor(odd, DType::float32, {4}, {1}),
                         (std::string("Tensor: the storage's data address ") + hex +
                          " is not a multiple of 4 bytes, the alignment of dtype float32 (wrap memory aligned to the "
                          "element size)").c_str(),
                         ValueError);
    CHECK_THROWS_AS(Tensor(Buffer::wrap(block + 4, 64, Device::cpu(), nullptr), DType::int64, {2}, {1}), ValueError);
    Tensor bytes(odd, DType::uint8, {64}, {1});  // one byte needs no alignment
    CHECK(bytes.numel() == 64);
  }
  std::free(block);
}
}
