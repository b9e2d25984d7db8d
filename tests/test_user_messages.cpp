// Messages and side effects a new user met (the s9 new-user run): each names
// the user's operation and fits the case, and a cache side effect (the
// session's MEF export folder) never aborts a compile.
#include <fcntl.h>
#include <unistd.h>

#include <cstdint>
#include <filesystem>
#include <fstream>
#include <iostream>
#include <sstream>

#include "test_util.h"

using namespace kiln;
namespace fs = std::filesystem;

namespace {

// Redirects fd 2 (std::cerr and stderr) into a file until text() is called.
class StderrCapture {
 public:
  explicit StderrCapture(fs::path file) : file_(std::move(file)) {
    std::fflush(stderr);
    saved_ = ::dup(2);
    const int fd = ::open(file_.c_str(), O_WRONLY | O_CREAT | O_TRUNC, 0644);
    ::dup2(fd, 2);
    ::close(fd);
  }
  ~StderrCapture() { restore(); }
  std::string text() {
    restore();
    std::ifstream f(file_);
    return std::string((std::istreambuf_iterator<char>(f)), std::istreambuf_iterator<char>());
  }

 private:
  void restore() {
    if (saved_ < 0) return;
    std::cerr.flush();
    std::fflush(stderr);
    ::dup2(saved_, 2);
    ::close(saved_);
    saved_ = -1;
  }
  fs::path file_;
  int saved_ = -1;
};

size_t count(const std::string& s, const std::string& what) {
  size_t n = 0;
  for (size_t p = s.find(what); p != std::string::npos; p = s.find(what, p + 1)) ++n;
  return n;
}

}  // namespace

TEST_SUITE("user_messages") {
  TEST_CASE("an unwritable export_mefs folder warns once, naming it and the OS error, and the compile goes on") {
    const fs::path dir = fs::temp_directory_path() / ("kiln_user_messages_" + std::to_string(::getpid()));
    fs::create_directories(dir);
    // A regular file where the folder's parent should be: no folder can be
    // made there, whoever runs the test (root ignores permission bits).
    std::ofstream(dir / "a_file") << "x";
    const std::string folder = (dir / "a_file" / "mefs").string();
    auto session = std::make_shared<InferenceSession>();
    session->export_mefs = folder;
    CompileOptions o;
    o.session = session;
    auto f = [](Tensor a) { return a * 3.0f + 1.0f; };
    const auto before = engine::mef_cache_stats();
    StderrCapture err(dir / "stderr.txt");
    CompiledCallable c4 = compile(f, o)(TensorLayout(DType::float32, {4}));
    CompiledCallable c2 = compile(f, o)(TensorLayout(DType::float32, {2}));  // a second graph: no second warning
    const std::string text = err.text();
    CHECK(count(text, "kiln: warning: InferenceSession export_mefs folder '" + folder + "' is not writable") == 1);
    CHECK(text.find(std::make_error_code(std::errc::not_a_directory).message()) != std::string::npos);
    CHECK(engine::mef_cache_stats().exported == before.exported);
    // The callables work: 3a + 1 on exact values.
    CHECK(c4(Tensor::from_vector(std::vector<float>{0, 1, -2, 0.5f}, {4})).tensor().to_vector<float>() ==
          std::vector<float>{1, 4, -5, 2.5f});
    CHECK(c2(Tensor::from_vector(std::vector<float>{2, 3}, {2})).tensor().to_vector<float>() == std::vector<float>{7, 10});
    std::error_code ec;
    fs::remove_all(dir, ec);
  }

  TEST_CASE("a missing precompiled_mefs folder warns once like export_mefs, and the compile goes on") {
    const fs::path dir = fs::temp_directory_path() / ("kiln_user_messages_pre_" + std::to_string(::getpid()));
    fs::create_directories(dir);
    const std::string folder = (dir / "no_such_folder").string();
    auto session = std::make_shared<InferenceSession>();
    session->precompiled_mefs = folder;
    CompileOptions o;
    o.session = session;
    auto f = [](Tensor a) { return a * 3.0f + 1.0f; };
    StderrCapture err(dir / "stderr.txt");
    CompiledCallable c4 = compile(f, o)(TensorLayout(DType::float32, {4}));
    CompiledCallable c2 = compile(f, o)(TensorLayout(DType::float32, {2}));  // a second graph: no second warning
    // The same missing folder as the export folder too: the first run creates it, no warning.
    const std::string both = (dir / "both").string();
    auto session2 = std::make_shared<InferenceSession>();
    session2->precompiled_mefs = session2->export_mefs = both;
    CompileOptions o2;
    o2.session = session2;
    CompiledCallable c3 = compile(f, o2)(TensorLayout(DType::float32, {3}));
    const std::string text = err.text();
    CHECK(count(text, "kiln: warning: InferenceSession precompiled_mefs folder '" + folder + "' does not exist") == 1);
    CHECK(text.find(both) == std::string::npos);
    CHECK(fs::is_directory(both));
    CHECK(c4(Tensor::from_vector(std::vector<float>{0, 1, -2, 0.5f}, {4})).tensor().to_vector<float>() ==
          std::vector<float>{1, 4, -5, 2.5f});
    CHECK(c2(Tensor::from_vector(std::vector<float>{2, 3}, {2})).tensor().to_vector<float>() == std::vector<float>{7, 10});
    CHECK(c3(Tensor::from_vector(std::vector<float>{1, 2, 3}, {3})).tensor().to_vector<float>() ==
          std::vector<float>{4, 7, 10});
    std::error_code ec;
    fs::remove_all(dir, ec);
  }

  TEST_CASE("an int64 tensor against a scalar beyond int64 gets a hint that fits (no wider integer dtype)") {
    const Tensor x = Tensor::from_vector(std::vector<int64_t>{1, 2}, {2});
    const uint64_t two63 = uint64_t{1} << 63;
    try {
      (void)(x == two63);
      FAIL("expected a ValueError");
    } catch (const ValueError& e) {
      const std::string m = e.what();
      CHECK(m.find("the integer scalar 9223372036854775808 is out of range for int64") != std::string::npos);
      CHECK(m.find("there is no wider integer dtype than int64: compute in float64 (x.to(DType::float64)") !=
            std::string::npos);
      CHECK(m.find("x.to(DType::int64)") == std::string::npos);
    }
    // uint64 and a negative scalar: the same kind of hint
    const Tensor u = x.to(DType::uint64);
    CHECK_THROWS_WITH_AS((void)(u < -1), doctest::Contains("no wider integer dtype than uint64"), ValueError);
    // a narrower dtype keeps the hint to widen
    CHECK_THROWS_WITH_AS((void)(x.to(DType::int32) == (int64_t{1} << 40)),
                         doctest::Contains("cast the tensor to a wider dtype first, e.g. x.to(DType::int64)"),
                         ValueError);
  }

  TEST_CASE("print, item and to_vector of a traced tensor name the operation and say when values exist") {
    const Tensor x = Tensor::from_vector(std::vector<float>{1, 2, 3}, {3});
    auto expect = [&](auto body, const std::string& op) {
      CAPTURE(op);
      try {
        (void)jit(body)(x);
        FAIL("expected a RealizationError");
      } catch (const RealizationError& e) {
        const std::string m = e.what();
        CHECK(m.rfind(op + ": the tensor is a traced value of graph '", 0) == 0);
        CHECK(m.find("values exist only when the compiled function runs") != std::string::npos);
        CHECK(m.find("can't realize from a graph context") == std::string::npos);
      }
    };
    expect(
        [](Tensor t) {
          std::ostringstream os;
          os << t * 2.0f;
          return t;
        },
        "print");
    expect([](Tensor t) { return t * (sum(t).item<float>() > 0 ? 1.0f : 2.0f); }, "item");
    expect([](Tensor t) { return t + static_cast<float>((t * 2.0f).to_vector<float>().size()); }, "to_vector");
  }

  TEST_CASE("argwhere's error names argwhere; a bool mask inside lazy() names lazy()") {
    const Tensor x = Tensor::from_vector(std::vector<float>{1, 0, 3}, {3});
    CHECK_THROWS_WITH_AS(jit([](Tensor t) { return argwhere(t); })(x), doctest::Contains("argwhere: the result's shape"),
                         RealizationError);
    CHECK_THROWS_WITH_AS(jit([](Tensor t) { return argwhere(t); })(x), doctest::Contains("jit/compile/stage"),
                         RealizationError);
    // eager: the positions (numpy.argwhere([1, 0, 3]) == [[0], [2]])
    CHECK(argwhere(x).to_vector<int64_t>() == std::vector<int64_t>{0, 2});
    try {
      auto scope = lazy();
      Tensor y = x * 2.0f;
      (void)y.index({y > 1.0f});
      FAIL("expected a RealizationError");
    } catch (const RealizationError& e) {
      const std::string m = e.what();
      CHECK(m.rfind("index (a bool mask): the result's shape depends on the data, which a kiln::lazy() scope computes "
                    "only when it ends",
                    0) == 0);
      CHECK(m.find("jit/compile/stage") == std::string::npos);
    }
    // the same mask after the scope: y[y > 1] == [2, 6]
    Tensor y;
    {
      auto scope = lazy();
      y = x * 2.0f;
    }
    CHECK(y.index({y > 1.0f}).to_vector<float>() == std::vector<float>{2, 6});
  }

  TEST_CASE("an in-place write into a broadcast argument under jit names the user's op, as eagerly") {
    const Tensor base = Tensor::from_vector(std::vector<float>{1, 2, 3, 4}, {4});
    const Tensor x = broadcast_to(base, {3, 4});  // stride 0 on axis 0
    REQUIRE(x.stride_class() == StrideClass::broadcast);
    auto f = [](Tensor t) {
      t.add_(1.0f);
      return t * 2.0f;
    };
    CHECK_THROWS_WITH_AS(f(x), doctest::Contains("add_: the destination (shape [3, 4]) is a broadcast view"), ValueError);
    try {
      (void)jit(f)(x);
      FAIL("expected a ValueError");
    } catch (const ValueError& e) {
      const std::string m = e.what();
      CHECK(m.rfind("add_: the destination (shape [3, 4]) is argument 0 or a view of it, traced for a broadcast "
                    "layout whose elements share memory",
                    0) == 0);
      CHECK(m.find("copy_") == std::string::npos);
    }
    // through a view of the argument: named too
    auto g = [](Tensor t) {
      select(t, 1, 2).mul_(2.0f);
      return t + 0.0f;
    };
    CHECK_THROWS_WITH_AS(jit(g)(x), doctest::Contains("mul_: the destination (shape [3]) is argument 0 or a view of it"),
                         ValueError);
    CHECK(base.to_vector<float>() == std::vector<float>{1, 2, 3, 4});  // nothing written
    // a contiguous argument is written as before: x + 1, then 2(x + 1)
    Tensor c = x.contiguous();
    CHECK(jit(f)(c).tensor().to_vector<float>() ==
          std::vector<float>{4, 6, 8, 10, 4, 6, 8, 10, 4, 6, 8, 10});
    CHECK(c.to_vector<float>() == std::vector<float>{2, 3, 4, 5, 2, 3, 4, 5, 2, 3, 4, 5});
  }

  TEST_CASE("broadcast arguments belong to their trace: later traces and nested traces are not refused") {
    // The graph context of a trace keeps its broadcast arguments: a trace
    // that ends leaves nothing behind for a later graph (which may reuse its
    // address), and a nested trace's values (ids from 0 again) are its own.
    const TensorLayout bcast(DType::float32, {3, 4}, Device::cpu(), StrideClass::broadcast);
    const TensorLayout dense(DType::float32, {3, 4});
    auto write = [](Tensor t) {
      t.add_(1.0f);
      return t * 2.0f;
    };
    for (int round = 0; round < 8; ++round) {
      CAPTURE(round);
      CHECK_THROWS_WITH_AS(stage(write)(bcast), doctest::Contains("add_: the destination (shape [3, 4]) is argument 0"),
                           ValueError);
      // The next trace, same function, contiguous argument: its input %0 is
      // written, recorded as the write-back into argument 0.
      const StagedGraph s = stage(write)(dense);
      REQUIRE(s.writes.size() == 1);
      CHECK(s.writes[0].argument == 0);
    }
    // Nested: inside a trace with a broadcast argument 0, a trace of its own
    // (a contiguous argument 0, the same value id) writes its argument; the
    // outer trace still refuses a write into its own after the inner one ended.
    size_t inner_writes = 99;
    auto outer = [&](Tensor b, Tensor u) {
      inner_writes = stage(write)(dense).writes.size();
      b.add_(1.0f);
      return b + u;
    };
    CHECK_THROWS_WITH_AS(stage(outer)(bcast, dense),
                         doctest::Contains("add_: the destination (shape [3, 4]) is argument 0"), ValueError);
    CHECK(inner_writes == 1);
    // And a compiled call of the contiguous trace computes eager's values:
    // x + 1 written back, 2 (x + 1) returned.
    Tensor x = Tensor::from_vector(std::vector<float>{0, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11}, {3, 4});
    CompiledCallable run = compile(write)(dense);
    CHECK(run(x).tensor().to_vector<float>() == std::vector<float>{2, 4, 6, 8, 10, 12, 14, 16, 18, 20, 22, 24});
    CHECK(x.to_vector<float>() == std::vector<float>{1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12});
  }

  TEST_CASE("memory that cannot be had: the message names the operation that asked, not Buffer::allocate") {
    // (the new-user run t20: zeros, random::normal and compiled calls said "Buffer::allocate: ...")
    const Shape huge{int64_t(1) << 40};
    auto starts = [](const std::function<void()>& f, const std::string& prefix, bool device_error = false) {
      std::string m;
      try {
        f();
      } catch (const DeviceError& e) {
        CHECK(device_error);
        m = e.what();
      } catch (const ValueError& e) {
        CHECK(!device_error);
        m = e.what();
      }
      INFO(m);
      CHECK(m.rfind(prefix, 0) == 0);
    };
    starts([&] { zeros(huge); }, "zeros: out of memory allocating 4398046511104 bytes");
    starts([&] { ones(huge); }, "ones: out of memory");
    starts([&] { full(huge, 2.0); }, "full: out of memory");
    starts([&] { empty(huge); }, "empty: out of memory");
    starts([&] { random::normal(huge); }, "normal: out of memory");
    starts([&] { random::uniform(huge); }, "uniform: out of memory");
    starts([&] { random::randint(0, 3, huge); }, "randint: out of memory");
    starts([&] { zeros({3}, DType::float32, Device::cpu(-1)); }, "zeros: CPU device -1 does not exist", true);
    const Tensor b = broadcast_to(tensor({1.0f}), {int64_t(1) << 20, int64_t(1) << 20});  // a view: no memory
    starts([&] { compile([](Tensor x) { return exp(x); })(b.layout())(b); }, "compiled call (its results and scratch): out of memory");
    starts([&] { exp(b); }, "exp: out of memory for its result");
  }
}
