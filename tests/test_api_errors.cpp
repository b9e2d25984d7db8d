// Errors a user meets at the API's edges (found by a new-user test): each is
// a kiln::Error naming the function or argument, what was expected and what
// came, never a crash or a silent acceptance.
#include <sstream>

#include "test_util.h"

namespace {
using namespace kiln;
}  // namespace

TEST_SUITE("errors") {
  TEST_CASE("an undefined tensor passed to a view, copy, stack, embedding, masked_fill or *_like op names the op") {
    const Tensor u, x = ones({2});
    auto names = [](auto&& call, const char* what) {
      CAPTURE(what);
      CHECK_THROWS_WITH_AS(call(), doctest::Contains(what), ValueError);
    };
    names([&] { (void)u.transpose(); }, "transpose: x is an undefined tensor");
    names([&] { (void)Tensor(u[0]); }, "index: the indexed tensor is undefined");
    names([&] { (void)Tensor(u.index({Slice()})); }, "index: the indexed tensor is undefined");
    names([&] { (void)u.clone(); }, "clone: the tensor is undefined");
    names([&] { (void)u.contiguous(); }, "contiguous: the tensor is undefined");
    names([&] { (void)u.to(DType::float64); }, "to: the tensor is undefined");
    names([&] { (void)stack({u}); }, "stack: input 0 is an undefined tensor");
    names([&] { (void)stack({x, u}); }, "stack: input 1 is an undefined tensor");
    names([&] { (void)embedding(u, tensor({int64_t(0)})); }, "embedding: weight is an undefined tensor");
    names([&] { (void)embedding(ones({3, 2}), u); }, "embedding: ids is an undefined tensor");
    names([&] { x.masked_fill_(u, 0); }, "masked_fill: mask is an undefined tensor");
    names([&] { (void)zeros_like(u); }, "zeros_like: x is an undefined tensor");
    names([&] { (void)ones_like(u); }, "ones_like: x is an undefined tensor");
    names([&] { (void)full_like(u, 2); }, "full_like: x is an undefined tensor");
    names([&] { (void)empty_like(u); }, "empty_like: x is an undefined tensor");
    // the scalar operand overloads name the op as the tensor-tensor ones do
    names([&] { (void)(u * 2.0f); }, "mul: input 0 is an undefined tensor");
    names([&] { (void)(2.0f - u); }, "sub: input 1 is an undefined tensor");
    names([&] { (void)(u == 1); }, "equal: input 0 is an undefined tensor");
  }

  TEST_CASE("embedding names itself and the id for an id out of range, eagerly and compiled") {
    CHECK_THROWS_WITH_AS(embedding(ones({2, 3}), tensor({int64_t(5)})),
                         "embedding: id 5 is out of range for a weight of 2 embeddings (expected 0 <= id < 2)", IndexError);
    // compiled: the check runs with the call (it named index_select before)
    Tensor w = Tensor::from_vector(std::vector<float>{0, 1, 2, 3, 4, 5}, {3, 2});
    CompiledCallable run = compile([&](Tensor ids) { return embedding(w, ids) * 2.0f; })(TensorLayout(DType::int64, {2}));
    CHECK(kt::values(run(Tensor::from_vector(std::vector<int64_t>{2, 0})).tensor()) == std::vector<double>{8, 10, 0, 2});
    CHECK_THROWS_WITH_AS(run(Tensor::from_vector(std::vector<int64_t>{1, 60})),
                         doctest::Contains("embedding: id 60 is out of range for a weight of 3 embeddings"), IndexError);
    CHECK_THROWS_WITH_AS(run(Tensor::from_vector(std::vector<int64_t>{-1, 0})),
                         doctest::Contains("embedding: id -1 is out of range for a weight of 3 embeddings (expected 0 <= "
                                           "id < 3; negative ids are refused)"),
                         IndexError);
    auto jf = jit([&](Tensor ids) { return embedding(w, ids); });
    CHECK_THROWS_WITH_AS(jf(Tensor::from_vector(std::vector<int64_t>{3})), doctest::Contains("embedding: id 3"),
                         IndexError);
  }

  TEST_CASE("one_hot with num_classes too large to address names one_hot and num_classes") {
    CHECK_THROWS_WITH_AS(one_hot(tensor({int64_t(0)}), int64_t(1) << 62),
                         doctest::Contains("one_hot: num_classes 4611686018427387904 makes a result of shape [1, "
                                           "4611686018427387904] of int64, more bytes than fit in size_t"),
                         ShapeError);
    // num_classes that fits still works: row 1 of 3 classes.
    CHECK(one_hot(tensor({int64_t(1)}), 3).to_vector<int64_t>() == std::vector<int64_t>{0, 1, 0});
  }

  TEST_CASE("an op whose result cannot be addressed names the op, not Tensor::empty") {
    // tile: [1] repeated 2^62 times as float32 is 2^64 bytes.
    CHECK_THROWS_WITH_AS(tile(ones({1}), {int64_t(1) << 62}), doctest::Contains("tile: its result of shape [4611686018427387904]"),
                         ShapeError);
  }

  TEST_CASE("nn::Linear names in_features and the input's last extent") {
    nn::Linear lin(4, 3);
    CHECK_THROWS_WITH_AS(lin(ones({2, 5})),
                         doctest::Contains("Linear: expected an input whose last extent is in_features = 4, got shape "
                                           "[2, 5] (last extent 5)"),
                         ShapeError);
    CHECK_THROWS_WITH_AS(lin(scalar(1.0)), doctest::Contains("Linear: expected an input whose last extent is in_features = 4, got a 0-d tensor"),
                         ShapeError);
    CHECK_THROWS_WITH_AS(lin(Tensor()), doctest::Contains("Linear: the input is an undefined tensor"), ValueError);
    // jit traces the same check.
    CHECK_THROWS_WITH_AS(jit([&](Tensor x) { return lin(x); })(ones({2, 7})),
                         doctest::Contains("Linear: expected an input whose last extent is in_features = 4, got shape [2, 7]"),
                         ShapeError);
    // The right width still runs: x [1, 4] of ones gives each output the sum of its weight row plus its bias.
    const Tensor y = lin(ones({1, 4}));
    const auto sd = lin.state_dict();
    const Tensor w = sd.at("weight"), b = sd.at("bias");
    for (int64_t o = 0; o < 3; ++o) {
      double ref = b.to_vector<float>()[o];
      for (int64_t i = 0; i < 4; ++i) ref += w.to_vector<float>()[o * 4 + i];
      CHECK(y.to_vector<float>()[o] == doctest::Approx(ref).epsilon(1e-6));
    }
  }

  TEST_CASE("a negative CUDA device index is reported as a bad index, not a missing device") {
    try {
      (void)ones({3}).to(Device::cuda(-1));
      FAIL("expected an error");
    } catch (const DeviceError& e) {
      CHECK(std::string(e.what()).find("cuda:-1: bad device index -1 (expected 0 or more)") != std::string::npos);
    }
  }

  TEST_CASE("cast to a dtype code outside DType is a DTypeError naming cast") {
    CHECK_THROWS_WITH_AS(cast(ones({4, 3}), static_cast<DType>(99)), doctest::Contains("cast: unknown dtype code 99"),
                         DTypeError);
  }

  TEST_CASE("matmul whose result needs more bytes than memory can address names matmul") {
    Tensor t = ones({1, 1});
    const int64_t big = int64_t{1} << 31;
    CHECK_THROWS_WITH_AS(matmul(broadcast_to(t, {big, 1}), broadcast_to(t, {1, big})),
                         doctest::Contains("matmul: the result [2147483648, 2147483648]"), ShapeError);
  }

  TEST_CASE("stage/compile: a spec whose element or byte count overflows int64 is refused") {
    auto f = [](Tensor a) { return a * 2.0f; };
    const int64_t big = int64_t{1} << 40;
    CHECK_THROWS_WITH_AS(compile(f)(TensorLayout(DType::float32, {big, big})),
                         doctest::Contains("more elements than int64 can count"), ShapeError);
    CHECK_THROWS_WITH_AS(compile(f)(TensorLayout(DType::float64, {int64_t{1} << 61, 2})),
                         doctest::Contains("needs more bytes than memory can address"), ShapeError);
    // an empty extent makes any other extent fine
    CompiledCallable ok = compile(f)(TensorLayout(DType::float32, {0, big}));
    CHECK(ok(Tensor::empty({0, big}, DType::float32)).as<Tensor>().shape() == Shape{0, big});
  }

  TEST_CASE("a compiled result converts to tensor types only; it prints") {
    auto f = [](Tensor a) { return a + 1.0f; };
    CompiledCallable run = compile(f)(TensorLayout(DType::float32, {2}));
    Tensor x = ones({2});
    CHECK_THROWS_WITH_AS(static_cast<void>(run(x).as<int>()),
                         doctest::Contains("a tensor cannot convert to this non-tensor type"), ValueError);
    std::ostringstream a, b;
    a << run(x);
    b << f(x);
    CHECK(a.str() == b.str());
    auto g = [](Tensor a) { return std::make_tuple(a, a * 2.0f); };
    CompiledCallable two = compile(g)(TensorLayout(DType::float32, {2}));
    std::ostringstream c, d;
    c << two(x);
    d << "(" << x << ", " << x * 2.0f << ")";
    CHECK(c.str() == d.str());
  }

  TEST_CASE("JitOptions::max_entries = 0 and a negative session thread count are refused") {
    JitOptions o;
    o.max_entries = 0;
    CHECK_THROWS_WITH_AS(jit([](Tensor a) { return a; }, o), doctest::Contains("max_entries must be at least 1"),
                         ValueError);
    CHECK_THROWS_WITH_AS(InferenceSession(KernelOptions{}, -5), doctest::Contains("num_threads must be in [0, 1024]"),
                         ValueError);
    CHECK_NOTHROW(InferenceSession(KernelOptions{}, 0));
  }

  TEST_CASE("embedding refuses negative ids (PyTorch's rule); index_select still counts them from the end") {
    Tensor w = Tensor::from_vector(std::vector<float>{0, 1, 2, 3, 4, 5}, {3, 2});
    CHECK(kt::values(embedding(w, Tensor::from_vector(std::vector<int32_t>{2, 0}))) == std::vector<double>{4, 5, 0, 1});
    CHECK_THROWS_WITH_AS(embedding(w, Tensor::from_vector(std::vector<int64_t>{0, -1})),
                         "embedding: id -1 is out of range for a weight of 3 embeddings (expected 0 <= id < 3; negative "
                         "ids are refused)",
                         IndexError);
    CHECK_THROWS_AS(embedding(w, Tensor::from_vector(std::vector<int32_t>{-4})), IndexError);
    CHECK_THROWS_AS(embedding(w, Tensor::from_vector(std::vector<int64_t>{3})), IndexError);
    // index_select keeps numpy.take's negative indices
    CHECK(kt::values(index_select(w, 0, Tensor::from_vector(std::vector<int64_t>{-1}))) == std::vector<double>{4, 5});
    // nn::Embedding and BertModel go through embedding: a tokenizer's -1 is an error, not the last row
    nn::Embedding emb(3, 2);
    CHECK_THROWS_WITH_AS(emb(Tensor::from_vector(std::vector<int64_t>{-1})), doctest::Contains("embedding: id -1"),
                         IndexError);
  }

  TEST_CASE("BertModel refuses attention_mask values other than 0 and 1") {
    nn::BertConfig c;
    c.vocab_size = 10, c.hidden_size = 8, c.num_hidden_layers = 1, c.num_attention_heads = 2,
    c.intermediate_size = 16, c.max_position_embeddings = 8;
    nn::BertModel m(c);
    const Tensor ids = Tensor::from_vector(std::vector<int64_t>{2, 3, 4, 0}, {1, 4});
    CHECK(m.forward(ids, Tensor::from_vector(std::vector<int64_t>{1, 1, 1, 0}, {1, 4})).shape() == Shape{1, 4, 8});
    CHECK(m.forward(ids, Tensor::from_vector(std::vector<float>{1, 1, 0, 0}, {1, 4})).shape() == Shape{1, 4, 8});
    CHECK_THROWS_WITH_AS(m.forward(ids, Tensor::from_vector(std::vector<int64_t>{1, 2, 1, 0}, {1, 4})),
                         "attention_mask_bias: attention_mask must hold 0 (padding) or 1 (token), got 2 at flat "
                         "position 1 (shape [1, 4])",
                         ValueError);
    CHECK_THROWS_WITH_AS(nn::attention_mask_bias(Tensor::from_vector(std::vector<float>{1, 0.5f}, {1, 2})),
                         doctest::Contains("attention_mask must hold 0 (padding) or 1 (token), got 0.5"), ValueError);
    CHECK_THROWS_AS(m.forward(Tensor::from_vector(std::vector<int64_t>{2, -1, 4, 0}, {1, 4})), IndexError);
  }

  TEST_CASE("a compiled call returning several tensors, converted to one Tensor, says so and how to convert") {
    CompiledCallable run = compile([](Tensor a) { return std::make_tuple(a * 2.0f, a + 1.0f); })(
        TensorLayout(DType::float32, {2}));
    CHECK_THROWS_WITH_AS((void)Tensor(run(ones({2}))),
                         "pytree: expected a single tensor, got (T, T): the function returned 2 tensors; convert the "
                         "result with as<std::tuple<Tensor, Tensor>>() (or read its leaves)",
                         ValueError);
    auto [a, b] = run(ones({2})).as<std::tuple<Tensor, Tensor>>();
    CHECK(kt::values(a) == std::vector<double>{2, 2});
    CHECK(kt::values(b) == std::vector<double>{2, 2});
  }

  TEST_CASE("where with two scalars: cond's shape, PyTorch's dtype") {
    const Tensor cond = tensor({true, false, true});
    Tensor f = where(cond, 1.0, 0.0);  // torch.where(cond, 1.0, 0.0): float32 (the default dtype)
    CHECK(f.dtype() == DType::float32);
    CHECK(kt::values(f) == std::vector<double>{1, 0, 1});
    Tensor i = where(cond, 7, -2);  // torch: int64
    CHECK(i.dtype() == DType::int64);
    CHECK(i.to_vector<int64_t>() == std::vector<int64_t>{7, -2, 7});
    Tensor m = where(cond, 1, 2.5);  // int with float: float32
    CHECK(m.dtype() == DType::float32);
    CHECK(kt::values(m) == std::vector<double>{1, 2.5, 1});
    Tensor b = where(cond, false, true);
    CHECK(b.dtype() == DType::bool_);
    CHECK(b.to_vector<bool>() == std::vector<bool>{false, true, false});
    // a 2-d int condition (nonzero is true)
    Tensor c2 = where(Tensor::from_vector(std::vector<int32_t>{0, 3, -1, 0}, {2, 2}), 1.5, -1.5);
    CHECK(c2.shape() == Shape{2, 2});
    CHECK(kt::values(c2) == std::vector<double>{-1.5, 1.5, 1.5, -1.5});
  }

  TEST_CASE("item<T>() links and converts for every dtype's C++ type") {
    CHECK(Tensor::from_vector(std::vector<int8_t>{-7}, {}).item<int8_t>() == -7);
    CHECK(Tensor::from_vector(std::vector<uint8_t>{200}, {}).item<uint8_t>() == 200);
    CHECK(Tensor::from_vector(std::vector<int64_t>{300}, {}).item<uint8_t>() == 44);  // wraps, as cast: 300 - 256
    CHECK(Tensor::from_vector(std::vector<float>{-2.5f}, {}).item<int8_t>() == -2);   // truncation toward zero
    CHECK(static_cast<float>(Tensor::from_vector(std::vector<double>{1.5}, {}).item<float16_t>()) == 1.5f);
    CHECK(static_cast<float>(Tensor::from_vector(std::vector<float>{3.0f}, {}).item<bfloat16_t>()) == 3.0f);
  }
}
