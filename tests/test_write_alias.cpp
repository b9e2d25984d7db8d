// The aliasing guard (jit/write_alias.h): a compiled function that writes one
// tensor in place and reads another that shares its memory (the same tensor
// passed twice, overlapping views, a captured tensor also passed in) gives
// eager's answer through jit (identical arguments traced as one tensor, other
// overlaps run eagerly) and a ValueError naming both positions through every
// other entry point; never a silently different answer. Values are small
// integers in float32, so every result below is exact: the expected numbers
// are written out, and the compiled results are also compared bitwise with
// the eager ones.
#include <filesystem>
#include <string>
#include <unistd.h>
#include <vector>

#include "../jit/write_alias.h"
#include "same_bits.h"
#include "test_util.h"

using namespace kiln;

namespace {
using kt::same_bits;
TensorLayout f32(Shape s) { return TensorLayout(DType::float32, std::move(s)); }
Tensor iota(int64_t n) { return arange(0.0, static_cast<double>(n), 1.0, DType::float32); }  // 0, 1, ..., n-1
std::vector<double> vals(const Tensor& t) { return t.to_vector<double>(); }

// f(a, b): writes a, then reads b.
Tensor add_then_read(Tensor a, Tensor b) {
  a.add_(1.0f);
  return b * 1.0f;
}
}  // namespace

TEST_SUITE("write aliasing") {
  TEST_CASE("jit: the same tensor passed twice, one written and the other read after: eager's answer") {
    auto f = jit(add_then_read);
    Tensor x = iota(4), xe = iota(4);
    Tensor r = f(x, x);
    Tensor re = add_then_read(xe, xe);
    CHECK(vals(r) == std::vector<double>{1, 2, 3, 4});  // the new x, as eagerly
    CHECK(vals(x) == std::vector<double>{1, 2, 3, 4});
    CHECK(same_bits(r, re));
    CHECK(same_bits(x, xe));
    // One compile, traced with them as one tensor (the entry for separate
    // arguments is not compiled for a call that would not run it).
    CHECK(f.stats().compiles == 1);
    CHECK(f.stats().misses == 1);
    CHECK(f.stats().hits == 0);
    // Cached from now on: each call counts once, as a hit.
    for (int i = 0; i < 3; ++i) {
      f(x, x);
      add_then_read(xe, xe);
    }
    CHECK(vals(x) == std::vector<double>{4, 5, 6, 7});
    CHECK(same_bits(x, xe));
    CHECK(f.stats().hits == 3);
    CHECK(f.stats().misses == 1);
    CHECK(f.stats().compiles == 1);
    Tensor y = iota(4);
    Tensor ry = f(x, y);  // separate tensors: the plain entry, compiled now
    CHECK(vals(ry) == std::vector<double>{0, 1, 2, 3});
    CHECK(vals(x) == std::vector<double>{5, 6, 7, 8});
    CHECK(f.last_miss_explanation().find("aliasing: separate arguments written in place vs cached identical "
                                         "arguments (1=0)") != std::string::npos);
    CHECK(f.stats().compiles == 2);
    CHECK(f.stats().misses == 2);
    // Both patterns cached: (x, x) after (x, y) finds the plain entry first,
    // sees the aliasing and runs the one-tensor entry: one hit per call.
    f(x, x);
    f(x, y);
    CHECK(vals(x) == std::vector<double>{7, 8, 9, 10});  // (x, x): +1; (x, y): +1
    JitStats st = f.stats();
    CHECK(st.hits == 5);
    CHECK(st.misses == 2);
    CHECK(st.compiles == 2);
    CHECK(st.eager_calls == 0);
    CHECK(st.hits + st.misses + st.eager_calls == 7);  // one count per call
  }

  TEST_CASE("jit: identical transposed (strided) arguments are one tensor too") {
    auto f = jit([](Tensor a, Tensor b) {
      a.mul_(3.0f);
      return b + 0.0f;
    });
    Tensor m = reshape(iota(6), {2, 3});
    Tensor t = m.transpose(0, 1);  // [3, 2], strides (1, 3)
    Tensor r = f(t, t);
    CHECK(vals(r) == std::vector<double>{0, 9, 3, 12, 6, 15});
    CHECK(vals(m) == std::vector<double>{0, 3, 6, 9, 12, 15});
    CHECK(f.stats().eager_calls == 0);
    CHECK(f.stats().compiles == 1);  // only the entry traced with them as one tensor
  }

  TEST_CASE("jit: both arguments written, index writes, writes through a view of an argument") {
    auto twice = jit([](Tensor a, Tensor b) {
      a.add_(1.0f);
      b.mul_(10.0f);
      return a + 0.0f;
    });
    Tensor x = iota(3);
    Tensor r = twice(x, x);
    CHECK(vals(x) == std::vector<double>{10, 20, 30});  // (x + 1) * 10
    CHECK(vals(r) == std::vector<double>{10, 20, 30});  // a is x: it sees b's write
    CHECK(twice.stats().eager_calls == 0);

    auto index_write = [](Tensor a, Tensor b) {
      a[1] = 7.0;
      return b * 1.0f;
    };
    auto ji = jit(index_write);
    Tensor z = iota(4), ze = iota(4);
    Tensor rz = ji(z, z);
    Tensor rze = index_write(ze, ze);
    CHECK(vals(rz) == std::vector<double>{0, 7, 2, 3});
    CHECK(same_bits(rz, rze));
    CHECK(same_bits(z, ze));

    auto view_write = [](Tensor a, Tensor b) {
      a.slice(0, 1, 3).fill_(0.0);
      return b * 2.0f;
    };
    auto jv = jit(view_write);
    Tensor v = iota(4) + 1.0f, ve = iota(4) + 1.0f;
    Tensor rv = jv(v, v);
    Tensor rve = view_write(ve, ve);
    CHECK(vals(rv) == std::vector<double>{2, 0, 0, 8});
    CHECK(vals(v) == std::vector<double>{1, 0, 0, 4});
    CHECK(same_bits(rv, rve));
    CHECK(jv.stats().eager_calls == 0);
  }

  TEST_CASE("jit: overlapping views and a view of the other argument run eagerly, with eager's bits") {
    auto f = jit(add_then_read);
    Tensor x = iota(6), xe = iota(6);
    Tensor r = f(x.slice(0, 0, 3), x.slice(0, 1, 4));  // x[0:3] and x[1:4]
    Tensor re = add_then_read(xe.slice(0, 0, 3), xe.slice(0, 1, 4));
    CHECK(vals(r) == std::vector<double>{2, 3, 3});  // x[1], x[2] written before the read, x[3] not
    CHECK(vals(x) == std::vector<double>{1, 2, 3, 3, 4, 5});
    CHECK(same_bits(r, re));
    CHECK(same_bits(x, xe));
    CHECK(f.stats().eager_calls == 1);
    // Each eager call counts once, as an eager call only (not also a hit or a
    // miss); the entry for separate arguments compiled by the first stays cached.
    for (int i = 0; i < 2; ++i) f(x.slice(0, 0, 3), x.slice(0, 1, 4));
    JitStats fs = f.stats();
    CHECK(fs.eager_calls == 3);
    CHECK(fs.hits == 0);
    CHECK(fs.misses == 0);
    CHECK(fs.compiles == 1);
    CHECK(vals(x) == std::vector<double>{3, 4, 5, 3, 4, 5});

    // One argument a view of the other (x and x[2:4] as a [2] and a [6]).
    auto g = jit([](Tensor whole, Tensor part) {
      whole.mul_(2.0f);
      return part + 0.0f;
    });
    Tensor w = iota(6);
    Tensor rp = g(w, w.slice(0, 2, 4));
    CHECK(vals(rp) == std::vector<double>{4, 6});
    CHECK(vals(w) == std::vector<double>{0, 2, 4, 6, 8, 10});
    CHECK(g.stats().eager_calls == 1);
    // The same view of a copy: no overlap, the compiled entry.
    Tensor w2 = iota(6);
    Tensor other = iota(6);
    Tensor rp2 = g(w2, other.slice(0, 2, 4));
    CHECK(vals(rp2) == std::vector<double>{2, 3});
    CHECK(g.stats().eager_calls == 1);
  }

  TEST_CASE("disjoint views of one buffer, and arguments that are only read, are not aliasing") {
    auto f = jit(add_then_read);
    Tensor x = iota(6);
    Tensor r = f(x.slice(0, 0, 3), x.slice(0, 3, 6));  // x[0:3], x[3:6]: no byte in common
    CHECK(vals(r) == std::vector<double>{3, 4, 5});
    CHECK(vals(x) == std::vector<double>{1, 2, 3, 3, 4, 5});
    CHECK(f.stats().compiles == 1);
    CHECK(f.stats().eager_calls == 0);
    CompiledCallable c = compile(add_then_read)(f32({3}), f32({3}));
    CHECK_NOTHROW(c(x.slice(0, 0, 3), x.slice(0, 3, 6)));
    CHECK(vals(x) == std::vector<double>{2, 3, 4, 3, 4, 5});

    // Only read: the same tensor twice is fine everywhere, with no recompile.
    auto add = [](Tensor a, Tensor b) { return a + b; };
    auto ja = jit(add);
    Tensor y = iota(3);
    CHECK(vals(ja(y, y)) == std::vector<double>{0, 2, 4});
    CHECK(vals(ja(y, iota(3))) == std::vector<double>{0, 2, 4});
    CHECK(ja.stats().compiles == 1);
    CompiledCallable ca = compile(add)(f32({3}), f32({3}));
    CHECK(vals(ca(y, y).tensor()) == std::vector<double>{0, 2, 4});
    const std::vector<Tensor> yy{y, y};
    CHECK(vals(ca.execute_raw(std::span<const Tensor>(yy))[0]) == std::vector<double>{0, 2, 4});

    // Written, but the other argument is read only before the write: the
    // compiled code's answer is eager's, so no error.
    auto read_first = [](Tensor a, Tensor b) {
      Tensor before = b * 2.0f;
      a.add_(1.0f);
      return before;
    };
    CompiledCallable cr = compile(read_first)(f32({3}), f32({3}));
    Tensor z = iota(3), ze = iota(3);
    Tensor rz = cr(z, z);
    Tensor rze = read_first(ze, ze);
    CHECK(vals(rz) == std::vector<double>{0, 2, 4});
    CHECK(vals(z) == std::vector<double>{1, 2, 3});
    CHECK(same_bits(rz, rze));
    auto jr = jit(read_first);  // jit: the plain entry, no second compile, nothing eager
    Tensor rj = jr(z, z);
    CHECK(vals(rj) == std::vector<double>{2, 4, 6});
    CHECK(vals(z) == std::vector<double>{2, 3, 4});
    CHECK(jr.stats().compiles == 1);
    CHECK(jr.stats().eager_calls == 0);
  }

  TEST_CASE("compile: an overlap the writes could show is a ValueError naming both arguments, before anything runs") {
    CompiledCallable c = compile(add_then_read)(f32({3}), f32({3}));
    Tensor x = iota(3);
    CHECK_THROWS_WITH_AS(c(x, x),
                         "compiled call of 'main': argument 0 and argument 1 overlap in memory and the function "
                         "writes argument 0 in place; the compiled code reads each argument, captured tensor and "
                         "weight as a separate tensor, so a read of one after the write to the other would see the "
                         "old value where an eager call sees the new one. Pass a copy instead (e.g. x.clone()), or "
                         "call the function through jit(fn), which recompiles for identical arguments and runs other "
                         "overlaps eagerly",
                         ValueError);
    CHECK(vals(x) == std::vector<double>{0, 1, 2});  // nothing written
    Tensor y = iota(4);
    CHECK_THROWS_WITH_AS(c(y.slice(0, 0, 3), y.slice(0, 1, 4)),
                         doctest::Contains("argument 0 and argument 1 overlap in memory"), ValueError);
    // Written second: named as written.
    auto g = [](Tensor a, Tensor b) {
      b.add_(1.0f);
      return a * 1.0f;
    };
    CompileOptions named;
    named.name = "step";
    CompiledCallable cg = compile(g, named)(f32({3}), f32({3}));
    CHECK_THROWS_WITH_AS(cg(x, x), doctest::Contains("compiled call of 'step': argument 1 and argument 0 overlap in "
                                                     "memory and the function writes argument 1 in place"),
                         ValueError);
    // A copy works, with eager's answer.
    Tensor r = c(x, x.clone());
    CHECK(vals(r) == std::vector<double>{0, 1, 2});
    CHECK(vals(x) == std::vector<double>{1, 2, 3});
  }

  TEST_CASE("a captured tensor also passed as an argument: an error compiled, eager's answer through jit") {
    // The argument is written and the captured tensor read after.
    Tensor s = iota(3);
    auto f = [&](Tensor a) {
      a.add_(1.0f);
      return s * 1.0f;
    };
    CompiledCallable c = compile(f)(f32({3}));
    std::string msg;
    try {
      c(s);
    } catch (const ValueError& e) {
      msg = e.what();
    }
    CHECK(msg.find("compiled call of 'main': argument 0 overlaps in memory with the captured tensor float32[3] cpu "
                   "(captured tensor ") != std::string::npos);
    CHECK(msg.find(" of the function, in the order it first used them)") != std::string::npos);
    CHECK(msg.find("captured constant") == std::string::npos);  // (the compiler's word, not the user's)
    CHECK(msg.find("and the function writes argument 0 in place") != std::string::npos);
    CHECK(msg.find("x.clone()") != std::string::npos);
    CHECK(vals(s) == std::vector<double>{0, 1, 2});
    auto jf = jit(f);
    Tensor r = jf(s);
    CHECK(vals(r) == std::vector<double>{1, 2, 3});  // as eagerly: s is the argument
    CHECK(vals(s) == std::vector<double>{1, 2, 3});
    CHECK(jf.stats().eager_calls == 1);

    // The captured tensor is written (a mutable source) and the argument read after.
    Tensor st = iota(3);
    auto g = [&](Tensor a) {
      st.add_(1.0f);
      return a * 1.0f;
    };
    CompiledCallable cg = compile(g)(f32({3}));
    CHECK_THROWS_WITH_AS(cg(st), doctest::Contains("argument 0 overlaps in memory with the captured tensor "
                                                   "(float32[3] cpu) that the function writes in place;"),
                         ValueError);
    try {
      cg(st);
    } catch (const ValueError& e) {
      CHECK(std::string(e.what()).find("mutable.0") == std::string::npos);  // the compiler's name for it
    }
    Tensor other = iota(3);
    CHECK(vals(cg(other).tensor()) == std::vector<double>{0, 1, 2});
    CHECK(vals(st) == std::vector<double>{1, 2, 3});
    auto jg = jit(g);
    Tensor rg = jg(st);
    CHECK(vals(rg) == std::vector<double>{2, 3, 4});
    CHECK(vals(st) == std::vector<double>{2, 3, 4});
    CHECK(jg.stats().eager_calls == 1);
  }

  TEST_CASE("execute_raw, engine execute and capture, a MEF read back, a call inside a trace: the same error") {
    CompiledCallable c = compile(add_then_read)(f32({3}), f32({3}));
    Tensor x = iota(3);
    const std::vector<Tensor> same{x, x};
    CHECK_THROWS_WITH_AS(c.execute_raw(std::span<const Tensor>(same)),
                         doctest::Contains("execute_raw of 'main': argument 0 and argument 1 overlap in memory"),
                         ValueError);
    CHECK_THROWS_WITH_AS(c.execute_raw(std::vector<Buffer>{x.buffer(), x.buffer()}),
                         doctest::Contains("execute_raw of 'main': argument 0 and argument 1 overlap"), ValueError);
    CHECK(vals(x) == std::vector<double>{0, 1, 2});
    // The engine never writes its inputs (the write-back is an output the
    // callable copies): alone, it computes the graph on separate values.
    std::vector<Tensor> graph_outs = c.engine_model().execute(same);
    CHECK(vals(graph_outs[0]) == std::vector<double>{0, 1, 2});  // b * 1
    CHECK(vals(graph_outs[1]) == std::vector<double>{1, 2, 3});  // a's new value, not written
    CHECK(vals(x) == std::vector<double>{0, 1, 2});

    // Read back from a MEF file: the signature records the write, so the
    // engine checks too; no record of what is read after the write, so any
    // overlap with the written argument counts.
    const std::string path = (std::filesystem::temp_directory_path() /
                              ("kiln_write_alias_" + std::to_string(::getpid()) + ".mef")).string();
    c.export_mef(path);
    CompiledCallable m = CompiledCallable::from_mef(path);
    std::filesystem::remove(path);
    CHECK_THROWS_WITH_AS(m(x, x), doctest::Contains("argument 0 and argument 1 overlap in memory"), ValueError);
    try {  // a callable read from MEF: the advice is not to jit a function it does not have
      m(x, x);
    } catch (const ValueError& e) {
      const std::string msg = e.what();
      CHECK(msg.find("jit(fn)") == std::string::npos);
      CHECK(msg.find("Pass a copy instead (e.g. x.clone()), or bind tensors that do not share memory with the "
                     "arguments to the file's weights when calling from_mef") != std::string::npos);
    }
    CHECK_THROWS_WITH_AS(m.engine_model().execute(same),
                         doctest::Contains("engine::Model::execute of 'main': argument 0 and argument 1 overlap"),
                         ValueError);
    CHECK_THROWS_WITH_AS(m.engine_model().capture(5, same),
                         doctest::Contains("capture(5) of 'main': argument 0 and argument 1 overlap"), ValueError);
    CHECK(m.engine_model().num_captures() == 0);
    // Separate buffers capture and replay as before.
    Tensor a = iota(3), b = iota(3) + 5.0f;
    const std::vector<Tensor> sep{a, b};
    std::vector<Tensor> outs = m.engine_model().capture(6, sep);
    m.engine_model().replay(6, sep);
    CHECK(vals(outs[0]) == std::vector<double>{5, 6, 7});
    m.engine_model().release(6);
    CHECK(vals(x) == std::vector<double>{0, 1, 2});
    Tensor y = iota(3);
    CHECK(vals(m(x, y).tensor()) == std::vector<double>{0, 1, 2});
    CHECK(vals(x) == std::vector<double>{1, 2, 3});

    // Inlined into another trace with one traced tensor for both arguments.
    auto outer = [&](Tensor t) { return c(t, t).tensor(); };
    CHECK_THROWS_WITH_AS(stage(outer)(f32({3})),
                         doctest::Contains("compiled call of 'main' inside a trace: argument 0 and argument 1 "
                                           "overlap in memory"),
                         ValueError);
  }

  TEST_CASE("a callable traced for identical arguments checks that it gets them, and is not exported") {
    StagedGraph s = stage(add_then_read, StageOptions{"main", true, {-1, 0}})(f32({3}), f32({3}));
    CHECK(s.same_as == std::vector<int32_t>{-1, 0});
    REQUIRE(s.writes.size() == 1);
    CHECK(s.writes[0].argument == 0);
    CompiledCallable c(std::move(s));
    Tensor x = iota(3);
    CHECK(vals(c(x, x).tensor()) == std::vector<double>{1, 2, 3});
    CHECK(vals(x) == std::vector<double>{1, 2, 3});
    CHECK_THROWS_WITH_AS(c(x, iota(3)),
                         doctest::Contains("this callable was traced with argument 1 the same tensor as argument 0"),
                         ValueError);
    CHECK_THROWS_WITH_AS(c.export_mef("/nonexistent/never_written.mef"), doctest::Contains("cannot record"),
                         ValueError);
    CHECK_THROWS_WITH_AS(stage(add_then_read, StageOptions{"main", true, {1, -1}})(f32({3}), f32({3})),
                         doctest::Contains("same_as[0] = 1 is not an earlier argument"), ValueError);
  }

  // A compiled callable (or one read back from MEF) inlined into a jit or
  // compile trace: its nodes are recorded before its write-backs, so the
  // outer trace must still learn what it reads after each write.
  TEST_CASE("a compiled callable inlined into a trace: its reads after its writes count for the outer call") {
    auto g = [](Tensor a, Tensor b) {
      a.mul_(2.0f);
      return b + 1.0f;
    };
    CompiledCallable c = compile(g)(f32({3}), f32({3}));
    auto body = [&](Tensor a, Tensor b) { return Tensor(c(a, b)); };
    StagedGraph s = stage(body)(f32({3}), f32({3}));
    REQUIRE(s.writes.size() == 1);
    REQUIRE(s.write_reads.size() == 1);
    CHECK(s.write_reads[0].arguments == std::vector<char>{1, 1});  // a: written; b: read after the write

    // Eagerly the body calls c with overlapping arguments: c's own guard
    // refuses before anything is written. jit gives the same answer (the
    // trace for identical arguments refuses too; a partial overlap runs
    // eagerly); compile's guard refuses; nothing is written in any case.
    Tensor x = full({3}, 1.0f);
    CHECK_THROWS_WITH_AS(body(x, x), doctest::Contains("argument 0 and argument 1 overlap in memory"), ValueError);
    auto j = jit(body);
    CHECK_THROWS_WITH_AS(j(x, x), doctest::Contains("argument 0 and argument 1 overlap in memory"), ValueError);
    CHECK(vals(x) == std::vector<double>{1, 1, 1});
    CompiledCallable cb = compile(body)(f32({3}), f32({3}));
    CHECK_THROWS_WITH_AS(cb(x, x),
                         doctest::Contains("compiled call of 'main': argument 0 and argument 1 overlap in memory and "
                                           "the function writes argument 0 in place"),
                         ValueError);
    CHECK(vals(x) == std::vector<double>{1, 1, 1});
    Tensor y = full({4}, 1.0f);
    Tensor y0 = slice(y, 0, 0, 3), y1 = slice(y, 0, 1, 4);
    CHECK_THROWS_AS(body(y0, y1), ValueError);
    CHECK_THROWS_AS(j(y0, y1), ValueError);
    CHECK_THROWS_WITH_AS(cb(y0, y1), doctest::Contains("argument 0 and argument 1 overlap in memory"), ValueError);
    CHECK(vals(y) == std::vector<double>{1, 1, 1, 1});
    auto cj = compile([&](Tensor a, Tensor b) { return Tensor(j(a, b)); })(f32({3}), f32({3}));
    CHECK_THROWS_AS(cj(x, x), ValueError);  // jit inside compile: the same trace
    CHECK(vals(x) == std::vector<double>{1, 1, 1});

    // Separate arguments: eager's bits, and a written.
    Tensor a1 = iota(3), b1 = iota(3) + 5.0f, a2 = iota(3), b2 = iota(3) + 5.0f, a3 = iota(3), b3 = iota(3) + 5.0f;
    Tensor re = g(a1, b1), rj = j(a2, b2), rc = Tensor(cb(a3, b3));
    CHECK(vals(re) == std::vector<double>{6, 7, 8});
    CHECK(vals(a1) == std::vector<double>{0, 2, 4});
    CHECK(same_bits(rj, re));
    CHECK(same_bits(rc, re));
    CHECK(same_bits(a2, a1));
    CHECK(same_bits(a3, a1));
  }

  TEST_CASE("an inlined callable that reads the other argument only before its write: identical arguments run") {
    auto g = [](Tensor a, Tensor b) {
      Tensor t = b + 1.0f;
      a.mul_(2.0f);
      return t;
    };
    CompiledCallable c = compile(g)(f32({3}), f32({3}));
    auto body = [&](Tensor a, Tensor b) { return Tensor(c(a, b)); };
    StagedGraph s = stage(body)(f32({3}), f32({3}));
    REQUIRE(s.write_reads.size() == 1);
    CHECK(s.write_reads[0].arguments == std::vector<char>{1, 0});  // b is not read after the write
    Tensor xe = iota(3), xj = iota(3), xc = iota(3);
    Tensor re = body(xe, xe);  // c's guard lets it run: eagerly t = x + 1 before x *= 2
    CHECK(vals(re) == std::vector<double>{1, 2, 3});
    CHECK(vals(xe) == std::vector<double>{0, 2, 4});
    Tensor rj = jit(body)(xj, xj);
    Tensor rc = Tensor(compile(body)(f32({3}), f32({3}))(xc, xc));
    CHECK(same_bits(rj, re));
    CHECK(same_bits(rc, re));
    CHECK(same_bits(xj, xe));
    CHECK(same_bits(xc, xe));
  }

  TEST_CASE("an inlined callable read back from MEF: every other argument counts as read after its write") {
    auto g = [](Tensor a, Tensor b) {
      Tensor t = b + 1.0f;
      a.mul_(2.0f);
      return t;
    };
    const std::string path = (std::filesystem::temp_directory_path() /
                              ("kiln_write_alias_inline_" + std::to_string(::getpid()) + ".mef")).string();
    compile(g)(f32({3}), f32({3})).export_mef(path);
    CompiledCallable m = CompiledCallable::from_mef(path);
    std::filesystem::remove(path);
    auto body = [&](Tensor a, Tensor b) { return Tensor(m(a, b)); };
    StagedGraph s = stage(body)(f32({3}), f32({3}));
    REQUIRE(s.write_reads.size() == 1);
    CHECK(s.write_reads[0].arguments == std::vector<char>{1, 1});
    Tensor x = iota(3);
    CHECK_THROWS_AS(body(x, x), ValueError);  // m's own guard: no record of its reads
    CHECK_THROWS_AS(jit(body)(x, x), ValueError);
    CHECK_THROWS_WITH_AS(compile(body)(f32({3}), f32({3}))(x, x),
                         doctest::Contains("compiled call of 'main': argument 0 and argument 1 overlap in memory"),
                         ValueError);
    CHECK(vals(x) == std::vector<double>{0, 1, 2});
    Tensor a1 = iota(3), b1 = iota(3), a2 = iota(3), b2 = iota(3);
    Tensor re = g(a1, b1), rj = jit(body)(a2, b2);
    CHECK(same_bits(rj, re));
    CHECK(same_bits(a2, a1));
  }

  TEST_CASE("an inlined callable that reads a captured tensor after its write: the outer call checks it") {
    Tensor w = iota(3);
    auto g = [&w](Tensor a) {
      a.mul_(2.0f);
      return a + w;
    };
    CompiledCallable c = compile(g)(f32({3}));
    auto body = [&](Tensor a) { return Tensor(c(a)); };
    StagedGraph s = stage(body)(f32({3}));
    REQUIRE(s.write_reads.size() == 1);
    size_t wi = s.captured.size();  // w among the outer trace's captured tensors
    for (size_t k = 0; k < s.captured.size(); ++k)
      if (s.captured[k].source.impl_ptr() == w.impl_ptr()) wi = k;
    REQUIRE(wi < s.captured.size());
    REQUIRE(s.write_reads[0].captured.size() == s.captured.size());
    CHECK(s.write_reads[0].captured[wi] == 1);
    CHECK_THROWS_WITH_AS(compile(body)(f32({3}))(w),
                         doctest::Contains("overlaps in memory with the captured tensor float32[3] cpu"), ValueError);
    CHECK(vals(w) == std::vector<double>{0, 1, 2});
  }
}

// Tester t17 F2: two captured tensors sharing memory, at least one written in
// place (two handles of one view, overlapping views, a written view and a
// read overlapping one), and two MEF write-back weights bound to one tensor,
// were traced as separate sources: one write was lost. jit now gives eager's
// answer (an eager call), compile and from_mef a ValueError naming both.
TEST_SUITE("write aliasing") {
  TEST_CASE("two handles of one captured view, both written: one source, eager's answer compiled too") {
    // (session 15: identical captured views are one traced source, so no
    // write is lost and neither jit nor compile needs the aliasing guard)
    for (int mode = 0; mode < 2; ++mode) {
      Tensor base = iota(8);
      Tensor a = base.index({Slice(0, 4)}), b = base.index({Slice(0, 4)});
      auto f = [&](Tensor g) {
        a.mul_(2.0f);
        b.add_(g);
        return sum(b);
      };
      Tensor e = iota(8);
      Tensor ea = e.index({Slice(0, 4)}), eb = e.index({Slice(0, 4)});
      ea.mul_(2.0f);
      eb.add_(ones({4}));
      const double want = sum(eb).item<double>();
      CHECK(want == 16.0);  // (0+1) + (2+1) + (4+1) + (6+1)
      CHECK(vals(e) == std::vector<double>{1, 3, 5, 7, 4, 5, 6, 7});
      if (mode == 0) {
        auto jf = jit(f);
        CHECK(jf(ones({4})).tensor().item<double>() == want);
        CHECK(jf.stats().eager_calls == 0);
      } else {
        CompiledCallable c = compile(f)(f32({4}));
        CHECK(c(ones({4})).tensor().item<double>() == want);
      }
      CHECK(vals(base) == vals(e));
    }
  }

  TEST_CASE("overlapping captured views, both written: eager's answer through jit, an error compiled") {
    // eager: a.mul_ on elements 0..3, then b.add_ on elements 2..5 (2 and 3 already doubled)
    for (int mode = 0; mode < 2; ++mode) {
      Tensor base = iota(8);
      Tensor a = base.index({Slice(0, 4)}), b = base.index({Slice(2, 6)});
      auto f = [&](Tensor g) {
        a.mul_(2.0f);
        b.add_(g);
        return sum(b);
      };
      Tensor e = iota(8);
      Tensor ea = e.index({Slice(0, 4)}), eb = e.index({Slice(2, 6)});
      ea.mul_(2.0f);
      eb.add_(ones({4}));
      const double want = sum(eb).item<double>();
      CHECK(want == 23.0);  // (4+1) + (6+1) + (4+1) + (5+1)
      if (mode == 0) {
        auto jf = jit(f);
        CHECK(jf(ones({4})).tensor().item<double>() == want);
        CHECK(vals(base) == vals(e));
        CHECK(jf.stats().eager_calls == 1);
      } else {
        CompiledCallable c = compile(f)(f32({4}));
        std::string msg;
        try {
          c(ones({4}));
        } catch (const ValueError& err) {
          msg = err.what();
        }
        CHECK(msg.find("compiled call of 'main': the captured tensor (float32[4] cpu) that the function writes in "
                       "place and the captured tensor (float32[4] cpu) that the function also writes in place share "
                       "memory") != std::string::npos);
        CHECK(msg.find("mutable.") == std::string::npos);  // the compiler's names for them
        CHECK(msg.find("jit(fn)") != std::string::npos);
        CHECK(vals(base) == std::vector<double>{0, 1, 2, 3, 4, 5, 6, 7});  // nothing ran
      }
    }
  }

  TEST_CASE("a captured view read before the function writes its base: eager's answer every call (tester t18 N1)") {
    // y = x WT with WT = W^T captured, then W -= 0.1: each call reads the W
    // the previous call left (eagerly); the compiled code's constant would
    // be the first call's.
    Tensor W = iota(6).reshape({2, 3}), We = W.clone();
    Tensor WT = W.transpose(), WTe = We.transpose();
    auto f = [&](Tensor x) {
      Tensor y = matmul(x, WT);
      W.sub_(0.1f);
      return y;
    };
    auto jf = jit(f);
    for (int call = 0; call < 3; ++call) {
      CAPTURE(call);
      const Tensor x = ones({1, 3});
      const Tensor got = jf(x).tensor();
      const Tensor want = matmul(x, WTe);
      We.sub_(0.1f);
      CHECK(vals(got) == vals(want));
      CHECK(vals(W) == vals(We));
    }
    CHECK(jf.stats().eager_calls == 3);
    const std::vector<double> before = vals(W);
    CompiledCallable c = compile(f)(f32({1, 3}));
    CHECK_THROWS_WITH_AS(c(ones({1, 3})), doctest::Contains("share memory"), ValueError);
    CHECK(vals(W) == before);  // nothing ran
  }

  TEST_CASE("a written captured view and a read overlapping one, and a tied weight under two shapes (jit)") {
    // B: write a = base[0:4], read b = base[2:6] after
    Tensor base = iota(8), be = iota(8);
    Tensor a = base.index({Slice(0, 4)}), b = base.index({Slice(2, 6)});
    auto f = [&](Tensor g) {
      a.add_(g);
      return b * 1.0f;
    };
    auto jf = jit(f);
    Tensor r = jf(ones({4}) * 100.0f);
    be.index({Slice(0, 4)}).add_(ones({4}) * 100.0f);
    const Tensor re = be.index({Slice(2, 6)}) * 1.0f;
    CHECK(vals(re) == std::vector<double>{102, 103, 4, 5});
    CHECK(vals(r) == vals(re));
    CHECK(vals(base) == vals(be));
    CHECK(jf.stats().eager_calls == 1);
    CompiledCallable c = compile(f)(f32({4}));
    CHECK_THROWS_WITH_AS(c(ones({4})), doctest::Contains("share memory"), ValueError);

    // C: a parameter list holding a tied weight and a reshaped view of it; an SGD step
    Tensor W = iota(6).reshape({2, 3}), We = W.clone();
    std::vector<Tensor> ps{W, W.reshape({3, 2})}, pe{We, We.reshape({3, 2})};
    auto step = jit([&](Tensor g0, Tensor g1) {
      ps[0].sub_(g0 * 0.5f);
      ps[1].sub_(g1 * 0.5f);
      return sum(ps[0]);
    });
    const Tensor g0 = ones({2, 3}), g1 = ones({3, 2}) * 2.0f;
    const double rs = step(g0, g1).tensor().item<double>();
    pe[0].sub_(g0 * 0.5f);
    pe[1].sub_(g1 * 0.5f);
    CHECK(vals(We) == std::vector<double>{-1.5, -0.5, 0.5, 1.5, 2.5, 3.5});  // i - 0.5 - 1
    CHECK(vals(W) == vals(We));
    CHECK(rs == 6.0);
    CHECK(step.stats().eager_calls == 1);
  }

  TEST_CASE("from_mef with two write-back weights bound to one tensor: a ValueError naming both") {
    Tensor w = ones({4}), v = zeros({4});
    auto step = [&](Tensor g) {
      v.mul_(0.9f).add_(g);
      w -= 0.1f * v;
      return sum(w * w);
    };
    const std::string path = (std::filesystem::temp_directory_path() /
                              ("kiln_t17_mut2_" + std::to_string(::getpid()) + ".mef")).string();
    compile(step)(f32({4})).export_mef(path);
    Tensor same = ones({4});
    std::string msg;
    try {
      CompiledCallable::from_mef(path, {{"mutable.0", same}, {"mutable.1", same}});
    } catch (const ValueError& e) {
      msg = e.what();
    }
    CHECK(msg.find("from_mef '" + path + "': the tensor bound to the file's write-back weight 'mutable.") !=
          std::string::npos);
    CHECK(msg.find("(float32[4] cpu) and the tensor bound to the file's write-back weight 'mutable.") !=
          std::string::npos);
    CHECK(msg.find("share memory") != std::string::npos);
    // from_mef's own advice: what to bind (there is no function to jit)
    CHECK(msg.find("Bind tensors that do not share memory to the file's weights (e.g. a .clone() of one of them) "
                   "when calling from_mef") != std::string::npos);
    CHECK(msg.find("jit(fn)") == std::string::npos);
    // separate tensors: accepted, and the answer of an eager step with separate w, v
    Tensor w2 = ones({4}), v2 = zeros({4});
    CompiledCallable back = CompiledCallable::from_mef(path, {{"mutable.0", v2}, {"mutable.1", w2}});
    std::filesystem::remove(path);
    const Tensor g = iota(4);
    const double r = back(g).tensor().item<double>();
    Tensor we = ones({4}), ve = zeros({4});
    ve.mul_(0.9f).add_(g);
    we -= 0.1f * ve;
    // (float32; the compiled code may contract w - 0.1 * v into one FMA)
    CHECK(r == doctest::Approx(sum(we * we).item<double>()).epsilon(1e-6));
    const std::vector<double> vw = vals(w2), vv = vals(v2), ew = vals(we), ev = vals(ve);
    for (size_t i = 0; i < 4; ++i) {  // v is written first: 'mutable.0'
      CHECK(vv[i] == ev[i]);
      CHECK(vw[i] == doctest::Approx(ew[i]).epsilon(1e-6));
    }
  }

  // Many written tensors (tester N8: 50 captured tensors, each written): the
  // guard sorts the tensors by memory (MemoryOverlaps) instead of testing
  // every pair; every overlap the pairwise test finds it still finds.
  TEST_CASE("many captured tensors written: an overlapping pair among 40 is found, disjoint slices of one buffer pass") {
    for (int mode = 0; mode < 3; ++mode) {
      CAPTURE(mode);
      // mode 0: 40 separate buffers, except captured 17 and 33, overlapping
      // views of one; mode 1: 40 disjoint, adjacent slices of one buffer;
      // mode 2: mode 1 plus an argument that is a view of slice 25.
      // The 40 captured tensors, in `base` and `other`, and the argument.
      auto make = [mode](const Tensor& base, const Tensor& other) {
        std::vector<Tensor> st;
        for (int i = 0; i < 40; ++i)
          st.push_back(mode == 0 ? (i == 17   ? other.index({Slice(0, 4)})
                                    : i == 33 ? other.index({Slice(2, 6)})
                                              : iota(4) + static_cast<float>(4 * i))
                                 : base.index({Slice(4 * i, 4 * i + 4)}));
        st.push_back(mode == 2 ? base.index({Slice(100, 104)}) : ones({4}));
        return st;
      };
      const Tensor base = iota(4 * 40), other = iota(8);
      std::vector<Tensor> state = make(base, other);
      const Tensor x = state.back();
      state.pop_back();
      auto f = [&](Tensor x) {
        for (const Tensor& t : state) t.add_(1.0f);
        x.mul_(2.0f);
        return sum(state[33]) + sum(x);
      };
      // eager answer on copies laid out the same way
      const Tensor ebase = iota(4 * 40), eother = iota(8);
      std::vector<Tensor> estate = make(ebase, eother);
      const Tensor ex = estate.back();
      estate.pop_back();
      for (const Tensor& t : estate) t.add_(1.0f);
      ex.mul_(2.0f);
      const double want = (sum(estate[33]) + sum(ex)).item<double>();
      // by hand: mode 0: other = 0..7, views [0, 4) and [2, 6) each + 1, so
      // state 33 = other[2..5] = {2+2, 3+2, 4+1, 5+1} = 20, and x = 2 * 1 four
      // times = 8; modes 1, 2: slice 33 = {132..135} + 1 = 538, and x = 8, or
      // (mode 2) slice 25 = {100..103} + 1, then * 2 = 820
      CHECK(want == (mode == 0 ? 28.0 : mode == 1 ? 546.0 : 538.0 + 820.0));
      auto jf = jit(f);
      CHECK(jf(x).tensor().item<double>() == want);
      CHECK(vals(base) == vals(ebase));
      CHECK(vals(other) == vals(eother));
      CHECK(jf.stats().eager_calls == (mode == 1 ? 0 : 1));
    }
  }

  TEST_CASE("MemoryOverlaps reports every tensor may_share_memory finds, for random views of a few buffers") {
    // Slices, strided and flipped views of 3 buffers, and tensors of their own:
    // the candidates of each query include every tensor that shares memory
    // with it (brute force), and a query of another buffer gets none.
    random::Generator gen(7);
    const Tensor bufs[3] = {iota(64), iota(64), iota(48).reshape({6, 8})};
    std::vector<Tensor> ts;
    const std::vector<double> u = random::uniform({400}, 0.0, 1.0, DType::float64, &gen).to_vector<double>();
    size_t r = 0;
    auto pick = [&](int64_t n) { return static_cast<int64_t>(u[r++ % u.size()] * static_cast<double>(n)); };
    for (int i = 0; i < 60; ++i) {
      const int which = static_cast<int>(pick(4));
      if (which == 3) {
        ts.push_back(iota(1 + pick(8)));
        continue;
      }
      const Tensor& b = bufs[which];
      if (which == 2) {
        const int64_t r0 = pick(6), c0 = pick(8);
        Tensor v = b.index({Slice(r0, r0 + 1 + pick(6 - r0)), Slice(c0, c0 + 1 + pick(8 - c0))});
        ts.push_back(pick(2) ? transpose(v, 0, 1) : v);
      } else {
        const int64_t lo = pick(64), len = pick(64 - lo), step = 1 + pick(3);
        Tensor v = b.index({Slice(lo, lo + len, step)});  // may be empty
        ts.push_back(pick(2) ? flip(v, {0}) : v);
      }
    }
    detail::MemoryOverlaps index;
    for (size_t j = 0; j < ts.size(); ++j) index.add(ts[j], static_cast<int32_t>(j));
    index.build();
    size_t pairs = 0;
    for (size_t i = 0; i < ts.size(); ++i) {
      std::vector<char> found(ts.size(), 0);
      index.for_each_candidate(ts[i], [&](int32_t j) { found[static_cast<size_t>(j)] = 1; });
      for (size_t j = 0; j < ts.size(); ++j)
        if (may_share_memory(ts[i], ts[j])) {
          CAPTURE(i);
          CAPTURE(j);
          CHECK(found[j]);
          pairs += i != j;
        }
    }
    CHECK(pairs > 20);  // the views do overlap
    int none = 0;
    index.for_each_candidate(iota(64), [&](int32_t) { ++none; });
    CHECK(none == 0);
  }
}
