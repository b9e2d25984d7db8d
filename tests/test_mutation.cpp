// In-place ops and assignment (tensor/mutation.h): each rule pinned, eagerly,
// in lazy scopes and traced. References are float64 loops written here.
#include <cstring>
#include <optional>
#include <random>

#include "same_bits.h"
#include "test_util.h"

using namespace kiln;

namespace {
std::vector<double> vals(const Tensor& t) { return t.to_vector<double>(); }
std::vector<double> arange_d(int64_t n, double start = 0) {
  std::vector<double> v(n);
  for (int64_t i = 0; i < n; ++i) v[i] = start + static_cast<double>(i);
  return v;
}
Tensor f32_range(int64_t n, const Shape& s) { return Tensor::from_vector(arange_d(n), s).to(DType::float32); }
using kt::same_bits;
}  // namespace

TEST_SUITE("mutation") {
  TEST_CASE("compound operators with tensor and scalar operands write into the destination") {
    Tensor a = f32_range(6, {2, 3});
    const void* p = a.data_ptr();
    Tensor b = Tensor::from_vector(std::vector<double>{10, 20, 30}).to(DType::float32);
    a += b;  // broadcasts b over the rows
    a -= 1.0;
    a *= 2;
    a /= b;
    std::vector<double> want;
    for (int i = 0; i < 2; ++i)
      for (int j = 0; j < 3; ++j) {
        const double bj = 10.0 * (j + 1);
        want.push_back(static_cast<double>(static_cast<float>(static_cast<float>((static_cast<float>(i * 3 + j + bj) - 1.0f) * 2.0f) / static_cast<float>(bj))));
      }
    CHECK(a.data_ptr() == p);
    CHECK(a.dtype() == DType::float32);
    CHECK(vals(a) == want);
    // A handle copy is the same tensor: it sees the write.
    Tensor alias = a;
    alias.zero_();
    for (double v : vals(a)) CHECK(v == 0.0);
    // integer destination, integer operands
    Tensor i = Tensor::from_vector(std::vector<int32_t>{1, 2, 3});
    i += 5;
    i *= i;
    CHECK(i.to_vector<int32_t>() == std::vector<int32_t>{36, 49, 64});
    CHECK(i.dtype() == DType::int32);
  }

  TEST_CASE("the destination's dtype never changes: same_kind casting, DTypeError otherwise") {
    Tensor i = Tensor::from_vector(std::vector<int32_t>{1, 2, 3});
    CHECK_THROWS_WITH_AS(i += 0.5, doctest::Contains("cannot write a float32 value into a int32 tensor"), DTypeError);
    CHECK_THROWS_AS(i /= 2, DTypeError);  // true division gives float
    CHECK_THROWS_AS(i.exp_(), DTypeError);
    CHECK_THROWS_AS(i.copy_(ones({3})), DTypeError);
    CHECK(i.to_vector<int32_t>() == std::vector<int32_t>{1, 2, 3});  // a refused write changes nothing
    // asked for: unsafe truncates toward zero (cast semantics)
    i.copy_(Tensor::from_vector(std::vector<double>{-1.7, 2.9, 7.5}), Casting::unsafe);
    CHECK(i.to_vector<int32_t>() == std::vector<int32_t>{-1, 2, 7});
    // same kind, narrower: float64 into float32 rounds, int64 into int8 wraps (numpy same_kind)
    Tensor f = zeros({2});
    f += Tensor::from_vector(std::vector<double>{0.1, 1e300});
    CHECK(vals(f)[0] == static_cast<double>(0.1f));
    CHECK(std::isinf(vals(f)[1]));
    CHECK(f.dtype() == DType::float32);
    // up the kinds is fine: bool -> int -> float
    Tensor g = zeros({2});
    g.copy_(tensor({true, false}));
    CHECK(vals(g) == std::vector<double>{1, 0});
    g.less_(0.5);  // a comparison's bool result stored as 0/1
    CHECK(vals(g) == std::vector<double>{0, 1});
    Tensor bo = zeros({2}, DType::bool_);
    CHECK_THROWS_AS(bo.copy_(ones({2}, DType::int32)), DTypeError);
    bo.fill_(true);
    CHECK(bo.to_vector<bool>() == std::vector<bool>{true, true});
    bo.zero_();
    CHECK(bo.to_vector<bool>() == std::vector<bool>{false, false});
    CHECK_THROWS_AS(i.fill_(2.5), DTypeError);
  }

  TEST_CASE("the destination's shape never changes: a value that does not broadcast to it is a ShapeError") {
    Tensor a = zeros({3});
    CHECK_THROWS_WITH_AS(a += ones({2, 3}), doctest::Contains("does not broadcast to the destination's shape [3]"),
                         ShapeError);
    CHECK_THROWS_AS(a.copy_(ones({2})), ShapeError);
    Tensor m = zeros({2, 3});
    m += ones({3});  // broadcasts
    m.copy_(Tensor::from_vector(std::vector<double>{1, 2}, {2, 1}).to(DType::float32));
    CHECK(vals(m) == std::vector<double>{1, 1, 1, 2, 2, 2});
    CHECK_THROWS_AS(m.add_(ones({2})), ShapeError);
    CHECK(m.shape() == Shape{2, 3});
  }

  TEST_CASE("copy_ broadcasts, casts and writes across strides") {
    Tensor base = zeros({3, 4}, DType::float64);
    Tensor t = transpose(base);  // [4, 3], transposed strides
    t.copy_(Tensor::from_vector(std::vector<int32_t>{1, 2, 3}));  // int32 -> float64, broadcast over rows
    for (int i = 0; i < 3; ++i)
      for (int j = 0; j < 4; ++j) CHECK(vals(base)[i * 4 + j] == i + 1);
    Tensor fl = flip(base, {1});  // negative strides
    fl.copy_(Tensor::from_vector(arange_d(12), {3, 4}));
    for (int i = 0; i < 3; ++i)
      for (int j = 0; j < 4; ++j) CHECK(vals(base)[i * 4 + j] == i * 4 + (3 - j));
    Tensor s = slice(base, 1, 0, 4, 2);  // every other column
    s.fill_(-1);
    for (int i = 0; i < 3; ++i)
      for (int j = 0; j < 4; ++j) CHECK((vals(base)[i * 4 + j] == -1) == (j % 2 == 0));
    // empty destination: nothing to write, no error
    Tensor e = zeros({0, 3});
    e.copy_(ones({3}));
    CHECK(e.numel() == 0);
  }

  TEST_CASE("assignment through views: slice, select and index_put_ write into the base") {
    Tensor x = zeros({4, 3});
    slice(x, 0, 1, 3).assign(ones({2, 3}));
    select(x, 1, 2).fill_(7);
    select(select(x, 0, 0), 0, 0) += 5;
    std::vector<double> want = {5, 0, 7, 1, 1, 7, 1, 1, 7, 0, 0, 7};
    CHECK(vals(x) == want);
    // index_put_: negative indices, repeated index (last write wins), broadcast values
    Tensor y = zeros({5});
    y.index_put_(Tensor::from_vector(std::vector<int64_t>{0, -1, 2, 2}),
                 Tensor::from_vector(std::vector<double>{1, 2, 3, 4}).to(DType::float32));
    CHECK(vals(y) == std::vector<double>{1, 0, 4, 0, 2});
    Tensor m = zeros({3, 2});
    m.index_put_(Tensor::from_vector(std::vector<int32_t>{2, 0}), full({}, 9.0), 0);
    CHECK(vals(m) == std::vector<double>{9, 9, 0, 0, 9, 9});
    m.index_put_(Tensor::from_vector(std::vector<int64_t>{1}), ones({1}) * 3.0f, 1);
    CHECK(vals(m) == std::vector<double>{9, 3, 0, 3, 9, 3});
    CHECK_THROWS_WITH_AS(y.index_put_(Tensor::from_vector(std::vector<int64_t>{5}), ones({1})),
                         "index_put_: index 5 is out of range for axis 0 with extent 5 (expected -5 <= index < 5)", IndexError);
    CHECK_THROWS_AS(y.index_put_(Tensor::from_vector(std::vector<float>{1}), ones({1})), DTypeError);
    CHECK_THROWS_AS(y.index_put_(Tensor::from_vector(std::vector<int64_t>{1, 2}), ones({3})), ShapeError);
    CHECK(vals(y) == std::vector<double>{1, 0, 4, 0, 2});
  }

  TEST_CASE("a broadcast view cannot be written: its elements share memory") {
    Tensor x = zeros({3});
    Tensor b = broadcast_to(x, {2, 3});
    CHECK_THROWS_WITH_AS(b.fill_(1), doctest::Contains("broadcast view whose elements share memory"), ValueError);
    CHECK_THROWS_AS(b += 1.0f, ValueError);
  }

  TEST_CASE("overlapping operands are read as before the write (numpy)") {
    // x[1:] = x[:-1] shifts by one, as numpy's copy does
    Tensor x = f32_range(6, {6});
    slice(x, 0, 1, std::nullopt).copy_(slice(x, 0, 0, -1));
    CHECK(vals(x) == std::vector<double>{0, 0, 1, 2, 3, 4});
    Tensor y = f32_range(6, {6});
    slice(y, 0, 0, -1).copy_(slice(y, 0, 1, std::nullopt));
    CHECK(vals(y) == std::vector<double>{1, 2, 3, 4, 5, 5});
    // reversing in place
    Tensor r = f32_range(5, {5});
    r.copy_(flip(r));
    CHECK(vals(r) == std::vector<double>{4, 3, 2, 1, 0});
    // transposing a square matrix in place
    Tensor m = f32_range(9, {3, 3});
    m.copy_(transpose(m));
    CHECK(vals(m) == std::vector<double>{0, 3, 6, 1, 4, 7, 2, 5, 8});
    // an elementwise op with out= a shifted view of its input
    Tensor z = f32_range(5, {5});
    add(slice(z, 0, 0, 4), slice(z, 0, 1, 5), Out(slice(z, 0, 1, 5)));
    CHECK(vals(z) == std::vector<double>{0, 1, 3, 5, 7});
    // matmul(a, b, out=a)
    Tensor a = f32_range(4, {2, 2});
    Tensor bm = Tensor::from_vector(std::vector<double>{1, 2, 3, 4}, {2, 2}).to(DType::float32);
    matmul(a, bm, Out(a));
    CHECK(vals(a) == std::vector<double>{0 * 1 + 1 * 3, 0 * 2 + 1 * 4, 2 * 1 + 3 * 3, 2 * 2 + 3 * 4});
    Tensor c = f32_range(4, {2, 2});
    matmul(bm, c, Out(c));  // out is the right operand
    CHECK(vals(c) == std::vector<double>{1 * 0 + 2 * 2, 1 * 1 + 2 * 3, 3 * 0 + 4 * 2, 3 * 1 + 4 * 3});
  }

  TEST_CASE("may_share_memory") {
    Tensor x = zeros({4, 4});
    CHECK(may_share_memory(x, x));
    CHECK(may_share_memory(x, select(x, 0, 2)));
    CHECK_FALSE(may_share_memory(select(x, 0, 0), select(x, 0, 1)));
    CHECK(may_share_memory(slice(x, 0, 0, 3), slice(x, 0, 2, 4)));
    CHECK_FALSE(may_share_memory(x, x.clone()));
    CHECK_FALSE(may_share_memory(x, Tensor()));
    CHECK_FALSE(may_share_memory(slice(x, 0, 0, 0), x));  // empty
  }

  TEST_CASE("out= overloads compute straight into a fitting destination, else copy in") {
    Tensor a = random::normal({3, 4}), b = random::normal({4});
    Tensor out = empty({3, 4});
    const void* p = out.data_ptr();
    Tensor r = add(a, b, Out(out));
    CHECK(r.is_same(out));
    CHECK(out.data_ptr() == p);
    CHECK(same_bits(out, a + b));
    // dtype differs: computed into a temporary, stored with same_kind casting
    Tensor o64 = empty({3, 4}, DType::float64);
    exp(a, Out(o64));
    CHECK(same_bits(o64, exp(a).to(DType::float64)));
    Tensor oi = empty({3, 4}, DType::int32);
    CHECK_THROWS_AS(exp(a, Out(oi)), DTypeError);
    exp(a, Out(oi, Casting::unsafe));
    CHECK(same_bits(oi, exp(a).to(DType::int32)));
    // scalar operand, strided destination
    Tensor big = zeros({3, 8});
    mul(a, 2.0, Out(slice(big, 1, 0, 8, 2)));
    CHECK(same_bits(slice(big, 1, 0, 8, 2), a * 2.0));
    for (int i = 0; i < 3; ++i) CHECK(vals(select(slice(big, 1, 1, 8, 2), 0, i)) == std::vector<double>{0, 0, 0, 0});
    Tensor mo = empty({3, 3});
    matmul(a, transpose(a), Out(mo));
    CHECK(same_bits(mo, matmul(a, transpose(a))));
    CHECK_THROWS_AS(matmul(a, transpose(a), Out(empty({3, 4}))), ShapeError);
    Tensor wo = empty({3, 4});
    where(a > 0.0f, a, zeros({}), Out(wo));
    CHECK(same_bits(wo, relu(a)));
    Tensor co = empty({3, 4});
    clamp(a, full({}, -0.5), full({}, 0.5), Out(co));
    CHECK(same_bits(co, clamp(a, -0.5, 0.5)));
  }

  TEST_CASE("clamp_, masked_fill_ and the generated `_` members") {
    Tensor x = Tensor::from_vector(std::vector<double>{-2, -0.5, 0.5, 2}).to(DType::float32);
    Tensor y = x.clone();
    y.clamp_(-1.0, 1.0);
    CHECK(vals(y) == std::vector<double>{-1, -0.5, 0.5, 1});
    y.clamp_(std::nullopt, 0.0);
    CHECK(vals(y) == std::vector<double>{-1, -0.5, 0, 0});
    y.masked_fill_(x > 0.0f, 9);
    CHECK(vals(y) == std::vector<double>{-1, -0.5, 9, 9});
    Tensor z = x.clone();
    z.abs_().sqrt_().neg_();
    for (int i = 0; i < 4; ++i) CHECK(vals(z)[i] == -static_cast<double>(std::sqrt(std::abs(static_cast<float>(vals(x)[i])))));
    Tensor w = x.clone();
    w.maximum_(0.0).pow_(2).gelu_tanh_();
    CHECK(same_bits(w, gelu(pow(maximum(x, 0.0), 2.0), true)));
  }

  TEST_CASE("chained optimizer step: w -= lr * g; v.mul_(mom).add_(g) in place, eagerly") {
    Tensor w = random::normal({5}), g = random::normal({5}), v = random::normal({5});
    const std::vector<double> w0 = vals(w), g0 = vals(g), v0 = vals(v);
    const void* wp = w.data_ptr();
    v.mul_(0.9).add_(g);
    w -= 0.1 * v;
    for (int i = 0; i < 5; ++i) {
      const float vi = static_cast<float>(v0[i]) * 0.9f + static_cast<float>(g0[i]);
      CHECK(vals(v)[i] == static_cast<double>(vi));
      CHECK(vals(w)[i] == static_cast<double>(static_cast<float>(w0[i]) - 0.1f * vi));
    }
    CHECK(w.data_ptr() == wp);
  }

  TEST_CASE("every write bumps its buffer's version") {
    Tensor x = zeros({4});
    const uint64_t v0 = x.buffer().version();
    x += 1.0f;
    CHECK(x.buffer().version() == v0 + 1);
    slice(x, 0, 0, 2).fill_(3);  // a view counts on the shared buffer
    CHECK(x.buffer().version() == v0 + 2);
    add(x, x, Out(x));
    CHECK(x.buffer().version() == v0 + 3);
    x.index_put_(Tensor::from_vector(std::vector<int64_t>{0}), zeros({1}));
    CHECK(x.buffer().version() == v0 + 4);
    Tensor y = x + 1.0f;  // reads do not count
    CHECK(x.buffer().version() == v0 + 4);
    CHECK(Buffer().version() == 0);
  }

  TEST_CASE("a compiled callable's bound weight sees in-place updates") {
    nn::Linear lin(4, 3);
    auto f = [&](Tensor x) { return lin(x); };
    CompileOptions o;
    o.weights = lin.state_dict();
    CompiledCallable run = compile(f, o)(TensorLayout(DType::float32, {2, 4}));
    Tensor x = random::normal({2, 4});
    lin.state_dict().at("weight").mul_(0.0);
    lin.state_dict().at("bias").copy_(Tensor::from_vector(std::vector<double>{1, 2, 3}));
    CHECK(vals(run(x)) == std::vector<double>{1, 2, 3, 1, 2, 3});
  }

  TEST_CASE("a captured constant written in place makes the next compiled call raise, saying so") {
    Tensor c = ones({3});
    CompiledCallable run = compile([&](Tensor x) { return x + c; })(TensorLayout(DType::float32, {3}));
    CHECK(vals(run(zeros({3})).tensor()) == std::vector<double>{1, 1, 1});
    c += 1.0f;
    CHECK_THROWS_WITH_AS(run(zeros({3})), doctest::Contains("changed since the function was traced (it was written in place)"),
                         ValueError);
  }

  TEST_CASE("lazy: a recorded op reads its sources as they were when recorded") {
    Tensor x = f32_range(3, {3});
    Tensor y, z;
    {
      auto scope = lazy();
      y = x * 2.0f;
      x += 10.0f;  // an eager write into a recorded source
      z = x * 2.0f;  // recorded after the write: sees it
    }
    CHECK(vals(y) == std::vector<double>{0, 2, 4});
    CHECK(vals(z) == std::vector<double>{20, 22, 24});
    CHECK(vals(x) == std::vector<double>{10, 11, 12});
    // written after the scope ended, before realization
    Tensor a = f32_range(3, {3});
    Tensor b;
    {
      auto scope = lazy();
      b = a + 1.0f;
    }
    a.fill_(100);
    CHECK(vals(b) == std::vector<double>{1, 2, 3});
  }

  TEST_CASE("lazy: in-place ops on lazy tensors are recorded; an eager destination runs eagerly") {
    Tensor src = f32_range(4, {4});
    Tensor t, keep;
    {
      auto scope = lazy();
      t = src * 1.0f;
      keep = t;  // the same tensor: sees the write
      t.add_(1.0f).mul_(3.0f);
      CHECK_FALSE(t.is_realized());
      Tensor dst = zeros({4});
      dst.copy_(src + 5.0f);  // realized destination: runs now
      CHECK(vals(dst) == std::vector<double>{5, 6, 7, 8});
    }
    CHECK(vals(t) == std::vector<double>{3, 6, 9, 12});
    CHECK(vals(keep) == std::vector<double>{3, 6, 9, 12});
    CHECK(vals(src) == std::vector<double>{0, 1, 2, 3});
  }

  TEST_CASE("traced: in-place ops are functionalised; views follow writes; stale views are refused") {
    Graph g("inplace", {TensorType(DType::float32, {3})});
    {
      GraphRealizationContext ctx(g);
      Tensor a = Tensor::from_graph_value(g.inputs()[0]);
      Tensor b = a * 1.0f;
      b += 1.0f;
      b.mul_(a);
      // through a view: recorded as a scatter into b (tests/test_traced_view_writes.cpp checks the values)
      const int32_t before = b.impl().state->values[0].id;
      slice(b, 0, 0, 2).fill_(0);
      CHECK(b.impl().state->values[0].id != before);
      Tensor v = reshape(b, {3});
      const GraphValue old_view = v.impl().state->values[0];
      b.exp_();
      CHECK(v.impl().state->values[0].id != old_view.id);  // the live view follows the write
      CHECK_NOTHROW(v + 1.0f);
      // a handle of the old view value that no alias group knows (made from the bare graph value) is refused
      Tensor stale = Tensor::from_graph_value(old_view);
      CHECK_THROWS_WITH_AS(stale + 1.0f,
                           doctest::Contains("taken of a tensor before that tensor was written in place"),
                           RealizationError);
      g.output(b);
    }
    // the graph holds one op per write (SSA), no write node
    int ops = 0;
    for (size_t i = 0; i < g.num_nodes(); ++i) ops += g.node(i).kind == NodeKind::op;
    CHECK(ops >= 4);
  }
}

// Views in lazy scopes (r41/r43 of the t13 new-user test): eagerly a view
// shares its base's memory; inside kiln::lazy() it must too. Each case runs
// its steps eagerly on one x, and on another x with the steps marked lazy
// inside kiln::lazy() scopes (one scope per step); every tensor a step keeps
// and x itself are then compared bit for bit (eager is the reference).
namespace {
struct Step {
  bool lazy;  // in the lazy run: inside a kiln::lazy() scope (the eager run runs every step eagerly)
  std::function<void(Tensor& x, std::vector<Tensor>& held)> body;
};
Tensor lazy_view_x() { return arange(0.0, 6.0, 1.0).reshape({2, 3}); }  // realized float32 [[0, 1, 2], [3, 4, 5]]

void lazy_as_eager(const std::string& what, const std::vector<Step>& steps) {
  CAPTURE(what);
  Tensor xe = lazy_view_x(), xl = lazy_view_x();
  std::vector<Tensor> he, hl;
  for (const Step& s : steps) s.body(xe, he);
  for (const Step& s : steps) {
    if (!s.lazy) {
      s.body(xl, hl);
      continue;
    }
    auto scope = lazy();
    s.body(xl, hl);
  }
  REQUIRE(he.size() == hl.size());
  for (size_t i = 0; i < he.size(); ++i)
    CHECK_MESSAGE(same_bits(he[i], hl[i]), what << ": kept tensor " << i << ": eager " << he[i] << ", lazy "
                                                << hl[i]);
  CHECK_MESSAGE(same_bits(xe, xl), what << ": x afterwards: eager " << xe << ", lazy " << xl);
}
Step in_lazy(std::function<void(Tensor&, std::vector<Tensor>&)> f) { return {true, std::move(f)}; }
Step eager_step(std::function<void(Tensor&, std::vector<Tensor>&)> f) { return {false, std::move(f)}; }
}  // namespace

TEST_SUITE("mutation") {
  TEST_CASE("lazy: a view of a realized tensor shares its memory, as eagerly (writes into the base after the view)") {
    lazy_as_eager("v = x[0]; x.add_(10)", {in_lazy([](Tensor& x, auto& h) {
                    Tensor v = x[0];
                    x.add_(10.0f);
                    h = {v};
                  })});
    lazy_as_eager("v = x[:, 1]; x[:, 1] = 5", {in_lazy([](Tensor& x, auto& h) {
                    Tensor v = x.index({Slice(), 1});
                    x.index({Slice(), 1}) = 5.0f;
                    h = {v * 1.0f, v};
                  })});
    lazy_as_eager("r = x.reshape({6}); x.fill_(2)", {in_lazy([](Tensor& x, auto& h) {
                    Tensor r = x.reshape({6});
                    x.fill_(2.0f);
                    h = {r};
                  })});
    lazy_as_eager("v = x.transpose(); x.mul_(2)", {in_lazy([](Tensor& x, auto& h) {
                    Tensor v = x.transpose();
                    x.mul_(2.0f);
                    h = {v};
                  })});
    lazy_as_eager("v = x[1]; exp(x, Out(x))", {in_lazy([](Tensor& x, auto& h) {
                    Tensor v = x[1];
                    exp(x, Out(x));
                    h = {v};
                  })});
    lazy_as_eager("flip, unsqueeze, squeeze, broadcast_to views; x.sub_(1)", {in_lazy([](Tensor& x, auto& h) {
                    h = {flip(x, {1}), unsqueeze(x, 0), squeeze(unsqueeze(x, 2)), broadcast_to(x[0], {4, 3})};
                    x.sub_(1.0f);
                  })});
    // an op result of a view is an op result: it keeps the contents it read (README), as eagerly
    lazy_as_eager("y = x[0] * 1 before x.add_(10)", {in_lazy([](Tensor& x, auto& h) {
                    Tensor y = x[0] * 1.0f;
                    x.add_(10.0f);
                    h = {y, x[0]};
                  })});
    lazy_as_eager("y = x * 2; x += 10 (README's op-result rule)", {in_lazy([](Tensor& x, auto& h) {
                    Tensor y = x * 2.0f;
                    x += 10.0f;
                    h = {y, x * 2.0f};
                  })});
  }

  TEST_CASE("lazy: writes through a view of a realized tensor reach it, as eagerly") {
    lazy_as_eager("x[1].mul_(-1); x.sum(1)", {in_lazy([](Tensor& x, auto& h) {
                    x[1].mul_(-1.0f);
                    h = {x.sum({1})};
                  })});
    lazy_as_eager("x.transpose()[0].fill_(9)", {in_lazy([](Tensor& x, auto& h) {
                    x.transpose()[0].fill_(9.0f);
                    h = {x * 1.0f};
                  })});
    lazy_as_eager("c = x.contiguous(); c.add_(1)", {in_lazy([](Tensor& x, auto& h) {
                    Tensor c = x.contiguous();
                    c.add_(1.0f);
                    h = {x * 1.0f, c};
                  })});
    lazy_as_eager("x[0].copy_(x[1]); x[1].copy_(x[0] + 1)", {in_lazy([](Tensor& x, auto& h) {
                    x[0].copy_(x[1]);
                    x[1].copy_(x[0] + 1.0f);
                    h = {x.clone()};
                  })});
    // a realized destination written with a value of the scope: the scope's ops realize then, as the write runs
    lazy_as_eager("x.copy_(lazy value); x[1].copy_(lazy view)", {in_lazy([](Tensor& x, auto& h) {
                    Tensor t = x * 2.0f, v = x[0];
                    x.copy_(t + 1.0f);
                    x[1].copy_(t[0]);
                    Tensor after = x * 1.0f;
                    h = {v, t, after};
                  })});
    lazy_as_eager("v = x[0]; v.add_(x[1]) then read the base's other view", {in_lazy([](Tensor& x, auto& h) {
                    Tensor v = x[0], w = x.reshape({6});
                    v.add_(x[1]);
                    h = {w, w * 1.0f, v};
                  })});
  }

  TEST_CASE("lazy: views of views of a realized tensor, read and written, as eagerly") {
    lazy_as_eager("w = x.transpose()[2]; x.mul_(3)", {in_lazy([](Tensor& x, auto& h) {
                    Tensor v = x.transpose();
                    Tensor w = v[2];
                    x.mul_(3.0f);
                    h = {v, w};
                  })});
    lazy_as_eager("writes through views of views", {in_lazy([](Tensor& x, auto& h) {
                    Tensor v = x.transpose();
                    Tensor w = v[2];
                    w.fill_(-1.0f);
                    Tensor u = flip(x, {1})[0].slice(0, 0, 2);
                    u.add_(100.0f);
                    h = {x * 1.0f, v, w, u};
                  })});
    lazy_as_eager("reshape of a view of a view, written", {in_lazy([](Tensor& x, auto& h) {
                    Tensor r = x.reshape({6}).slice(0, 1, 5).reshape({2, 2});
                    r[1].mul_(7.0f);
                    h = {r, x.reshape({3, 2})};
                  })});
    // eagerly a reshape of a non-contiguous view is a copy: recorded lazily as an op result, as eagerly
    lazy_as_eager("reshape that copies (of a transpose), then writes to both", {in_lazy([](Tensor& x, auto& h) {
                    Tensor c = x.transpose().reshape({6});
                    x.add_(1.0f);
                    c.mul_(2.0f);
                    h = {c, x * 1.0f};
                  })});
  }

  TEST_CASE("lazy: a view taken in a scope is the tensor's view after the scope and in later scopes") {
    // r43: the view read after the base is written after the scope, then written itself
    lazy_as_eager("x[:2] taken in a scope, written after", {
                                                              in_lazy([](Tensor& x, auto& h) {
                                                                h = {x.reshape({6}).index({Slice(0, 2)})};
                                                              }),
                                                              eager_step([](Tensor& x, auto& h) {
                                                                x.add_(10.0f);
                                                                h.push_back(h[0].clone());
                                                              }),
                                                              eager_step([](Tensor& x, auto& h) {
                                                                h[0].fill_(-1.0f);
                                                                h.push_back(x.clone());
                                                              }),
                                                          });
    lazy_as_eager("view in one scope, base written and view read in a later one",
                  {
                      in_lazy([](Tensor& x, auto& h) { h = {x[1], x.transpose()}; }),
                      in_lazy([](Tensor& x, auto& h) {
                        x.add_(1.0f);
                        h.push_back(h[0] * 2.0f);
                        h[1][0].fill_(50.0f);  // a write through a view of the earlier scope's view
                        h.push_back(h[1].clone());
                      }),
                      eager_step([](Tensor& x, auto& h) { x.mul_(-1.0f); }),
                  });
    lazy_as_eager("a view of an ended scope's op result, taken in a later scope, follows writes",
                  {
                      in_lazy([](Tensor& x, auto& h) { h = {x * 2.0f}; }),
                      in_lazy([](Tensor& x, auto& h) {
                        Tensor v = h[0][0];
                        h[0].add_(1.0f);
                        h.push_back(v);
                      }),
                      eager_step([](Tensor& x, auto& h) { h[1].fill_(0.5f); }),
                  });
    lazy_as_eager("a view of a lazy op result, the base written after the scope",
                  {
                      in_lazy([](Tensor& x, auto& h) {
                        Tensor t = x + 1.0f;
                        h = {t, t[1], t.transpose()};
                        t.add_(5.0f);  // recorded: the views follow
                      }),
                      eager_step([](Tensor& x, auto& h) {
                        h[0].mul_(2.0f);
                        h.push_back(h[1].clone());
                        h[2][0].fill_(-3.0f);
                      }),
                  });
    // an eager op reading a lazy view before anything realized it sees the view's own strides
    lazy_as_eager("eager ops on unrealized lazy views (strided slice, transpose) after the scope",
                  {
                      in_lazy([](Tensor& x, auto& h) {
                        Tensor t = x * 1.0f;
                        h = {t.reshape({-1}).slice(0, 0, 6, 2), t.transpose()};
                      }),
                      eager_step([](Tensor& x, auto& h) {
                        Tensor a = h[0] * 2.0f;  // the first read of the scope: through an eager op
                        Tensor b = h[1] + 0.0f;
                        h.push_back(a);
                        h.push_back(b);
                      }),
                  });
    lazy_as_eager("a lazy tensor assigned another lazy one is a copy of it",
                  {
                      in_lazy([](Tensor& x, auto& h) {
                        Tensor u = x * 1.0f, t = x * 0.0f;
                        Tensor w = u[1];
                        t.copy_(u);
                        h = {t, u, w, t[0]};
                      }),
                      eager_step([](Tensor& x, auto& h) {
                        h[0].add_(5.0f);
                        h[3].fill_(-2.0f);
                        h[2].mul_(3.0f);
                      }),
                  });
    lazy_as_eager("a lazy tensor assigned a realized one is a copy of it",
                  {
                      in_lazy([](Tensor& x, auto& h) {
                        Tensor t = x * 0.0f;
                        t.copy_(x);
                        h = {t, t[0]};
                      }),
                      eager_step([](Tensor& x, auto& h) {
                        h[0].add_(5.0f);
                        h[1].fill_(-2.0f);
                      }),
                  });
  }
}

// Random programs of views (of x, of views, of op results), op results,
// clone/contiguous, in-place writes (scalars, copy_, out=) and reads, with
// lazy scopes opened and closed at random points: the lazy run must give the
// eager run's bits for every tensor kept, and the same reads.
namespace {
struct RandomRun {
  std::vector<Tensor> pool;
  std::vector<std::string> log;
};
RandomRun random_program(uint64_t seed, int steps, bool lazy_mode) {
  std::mt19937_64 rng(seed);
  auto R = [&](int n) { return static_cast<int>(rng() % static_cast<uint64_t>(n)); };
  RandomRun r;
  r.pool.push_back(arange(0.0, 24.0, 1.0).reshape({4, 6}));
  std::optional<LazyScope> scope;
  bool open = false;
  auto pick = [&] { return static_cast<size_t>(R(static_cast<int>(r.pool.size()))); };
  for (int s = 0; s < steps; ++s) {
    const int what = R(10);
    if (what == 0) {  // a scope boundary: close, and maybe open a new one (the lazy run only)
      open = R(3) != 0;
      r.log.push_back(open ? "scope" : "no scope");
      if (lazy_mode) {
        scope.reset();
        if (open) scope.emplace();
      }
      continue;
    }
    if (what == 9 && !open) {  // a read between scopes
      const size_t i = pick();
      std::string m = "read " + std::to_string(i) + ":";
      for (float f : r.pool[i].to_vector<float>()) {
        m += ' ';  // piece by piece: GCC 12 warns (-Wrestrict, falsely) on " " + std::string&&
        m += std::to_string(f);
      }
      r.log.push_back(m);
      continue;
    }
    const size_t i = pick();
    Tensor t = r.pool[i];
    const Shape sh = t.shape();
    try {
      if (what <= 4) {  // a view
        const int k = R(6);
        Tensor v;
        if (k == 0 && !sh.empty() && sh[0] > 0) v = t[R(static_cast<int>(sh[0]))];
        else if (k == 1 && sh.size() == 2) v = t.transpose();
        else if (k == 3 && !sh.empty() && sh[0] > 1) v = t.slice(0, R(2), sh[0], 1 + R(2));
        else if (k == 4 && !sh.empty()) v = flip(t, {static_cast<int64_t>(sh.size()) - 1});
        else if (k == 5 && sh.size() < 3) v = unsqueeze(t, 0);
        else v = t.reshape({-1});  // a view or (of a non-contiguous view) a copy, as eagerly
        r.pool.push_back(v);
        r.log.push_back("view " + std::to_string(k) + " of " + std::to_string(i));
      } else if (what <= 6) {  // an op result
        const int k = R(4);
        r.pool.push_back(k == 0   ? t.clone()
                         : k == 1 ? t.contiguous()
                                  : t * static_cast<float>(R(3) + 1) + static_cast<float>(R(5)));
        r.log.push_back("op " + std::to_string(k) + " of " + std::to_string(i));
      } else {  // a write
        const int k = R(6);
        const size_t j = pick();
        if (k == 0) t.add_(static_cast<float>(R(7)));
        else if (k == 1) t.mul_(static_cast<float>(R(3) - 1));
        else if (k == 2) t.fill_(static_cast<float>(R(9)));
        else if (k == 3 && r.pool[j].shape() == sh) t.copy_(r.pool[j] + 1.0f);
        else if (k == 4 && r.pool[j].shape() == sh) t.copy_(r.pool[j]);
        else if (k == 5 && r.pool[j].shape() == sh) add(r.pool[j], t, Out(t));
        r.log.push_back("write " + std::to_string(k) + " into " + std::to_string(i));
      }
    } catch (const std::exception& e) {
      r.log.push_back(std::string("error: ") + e.what());
    }
    if (R(8) == 0 && r.pool.size() > 2) r.pool.erase(r.pool.begin() + 1 + R(static_cast<int>(r.pool.size()) - 1));
  }
  return r;
}
}  // namespace

TEST_SUITE("mutation") {
  TEST_CASE("lazy: random programs of views, op results and writes give eager's bits") {
    int differ = 0;
    for (uint64_t seed = 1; seed <= 300; ++seed) {
      CAPTURE(seed);
      const RandomRun e = random_program(seed, 50, false), l = random_program(seed, 50, true);
      CHECK(e.log == l.log);
      REQUIRE(e.pool.size() == l.pool.size());
      for (size_t i = 0; i < e.pool.size(); ++i) {
        const bool same = same_bits(e.pool[i], l.pool[i]);
        differ += !same;
        CHECK_MESSAGE(same, "tensor " << i << ": eager " << e.pool[i] << ", lazy " << l.pool[i]);
      }
    }
    CHECK(differ == 0);
  }
}

TEST_SUITE("mutation") {
  // out= into a realized tensor, in a lazy scope or after it, with a lazy op
  // result as input: the input keeps its value (its realization used to take
  // out's memory, so it read back as out's new value).
  TEST_CASE("lazy: out= into a realized tensor leaves its lazy inputs their values") {
    lazy_as_eager("r = x + 1; mul(r, 2, Out(x))", {in_lazy([](Tensor& x, auto& h) {
                    Tensor r = x + 1.0f;
                    mul(r, 2.0f, Out(x));
                    h = {r, r + 0.0f};
                  })});
    lazy_as_eager("p = x + 1; q = x * 10; add(p, q, Out(x)) (both slots lazy)", {in_lazy([](Tensor& x, auto& h) {
                    Tensor p = x + 1.0f, q = x * 10.0f;
                    add(p, q, Out(x));
                    h = {p, q, p * 1.0f, q + 0.0f};
                  })});
    const Tensor c = Tensor::from_vector(std::vector<float>{0.5f, -1.0f, 2.0f}, {3});  // realized
    lazy_as_eager("q = x * 10; add(c, q, Out(x)) (only the second slot lazy)", {in_lazy([c](Tensor& x, auto& h) {
                    Tensor q = x * 10.0f;
                    add(c, q, Out(x));
                    h = {q, q + 0.0f};
                  })});
    lazy_as_eager("r = x * 0.5; exp(r, Out(x))", {in_lazy([](Tensor& x, auto& h) {
                    Tensor r = x * 0.5f;
                    exp(r, Out(x));
                    h = {r, r - 1.0f};
                  })});
    lazy_as_eager("r = x + 1; m = x^T x; matmul(r, m, Out(x))", {in_lazy([](Tensor& x, auto& h) {
                    Tensor r = x + 1.0f;
                    Tensor m = matmul(x.transpose(), x);
                    matmul(r, m, Out(x));
                    h = {r, m};
                  })});
    lazy_as_eager("r = x + 1 in lazy(); after it mul(r, 2, Out(x))",
                  {in_lazy([](Tensor& x, auto& h) {
                     Tensor r = x + 1.0f;
                     h = {r, r * 10.0f};
                   }),
                   eager_step([](Tensor& x, auto& h) {
                     mul(h[0], 2.0f, Out(x));
                     h.push_back(h[0] + 0.0f);
                   })});
  }

  // A compiled call reads its arguments' layouts: a lazy view (its strides
  // placeholders until realized) is realized first, as eagerly.
  TEST_CASE("lazy: jit and compiled calls on views of unrealized lazy results see the views' strides") {
    auto f = [](Tensor t) { return t * 2.0f; };
    const Tensor x = lazy_view_x();
    const Tensor want_t = f(x.transpose());
    const Tensor want_s = f(x.index({Slice(), Slice(0, std::nullopt, 2)}));
    {
      Tensor v;
      {
        auto s = lazy();
        v = (x * 1.0f).transpose();
      }
      auto jf = jit(f);
      CHECK(same_bits(Tensor(jf(v)), want_t));
    }
    {
      auto jf = jit(f);
      Tensor r;
      {
        auto s = lazy();
        Tensor v = (x * 1.0f).transpose();
        r = jf(v);
      }
      CHECK(same_bits(r, want_t));
    }
    {
      Tensor v;
      {
        auto s = lazy();
        v = (x * 1.0f).index({Slice(), Slice(0, std::nullopt, 2)});
      }
      auto jf = jit(f);
      CHECK(same_bits(Tensor(jf(v)), want_s));
    }
    {
      // a tree that is not a fixed one (a vector): the layouts are read by the general lookup
      auto jv = jit([](std::vector<Tensor> ts) { return ts[0] * 2.0f; });
      Tensor v;
      {
        auto s = lazy();
        v = (x * 1.0f).transpose();
      }
      CHECK(same_bits(Tensor(jv(std::vector<Tensor>{v})), want_t));
    }
    {
      CompiledCallable c =
          compile(f)(TensorLayout(DType::float32, {3, 2}, Device::cpu(), StrideClass::transposed));
      Tensor v;
      {
        auto s = lazy();
        v = (x * 1.0f).transpose();
      }
      CHECK(same_bits(Tensor(c(v)), want_t));
      Tensor w;
      {
        auto s = lazy();
        w = (x * 1.0f).transpose();
        CHECK(same_bits(Tensor(c(w)), want_t));  // inside the scope
      }
    }
    {
      // compiled for contiguous: the transposed lazy view is refused, as its eager twin is
      CompiledCallable c = compile(f)(TensorLayout(DType::float32, {3, 2}));
      CHECK_THROWS_AS(c(x.transpose()), ValueError);
      Tensor v;
      {
        auto s = lazy();
        v = (x * 1.0f).transpose();
      }
      CHECK_THROWS_AS(c(v), ValueError);
    }
  }
}
