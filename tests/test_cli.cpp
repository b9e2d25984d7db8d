// The `kiln` command-line tool end to end: export a callable, then run
// `kiln info`, `kiln dot`, `kiln run` (on .npy inputs and safetensors
// weights, results compared bit for bit with the in-process call) and
// `kiln bench`, and check that bad arguments or files fail with a message.
#include <sys/wait.h>
#include <unistd.h>

#include <cerrno>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <fstream>

#include "../io/npy.h"
#include "../io/safetensors.h"
#include "same_bits.h"
#include "test_util.h"

#ifdef KILN_CLI_PATH

using namespace kiln;
namespace fs = std::filesystem;

namespace {

struct Run {
  int code = -1;
  std::string out, err;
};

std::string slurp(const fs::path& p) {
  std::ifstream f(p, std::ios::binary);
  return std::string((std::istreambuf_iterator<char>(f)), std::istreambuf_iterator<char>());
}

struct Cli {
  fs::path dir;
  Cli() {
    dir = fs::temp_directory_path() / ("kiln_cli_test_" + std::to_string(getpid()));
    fs::create_directories(dir);
  }
  ~Cli() {
    std::error_code ec;
    fs::remove_all(dir, ec);
  }
  std::string file(const std::string& n) const { return (dir / n).string(); }
  // Runs `kiln ARGS` with stdout and stderr captured in files (stdout into
  // `stdout_to` instead when given, e.g. /dev/full).
  Run operator()(const std::string& args, const std::string& stdout_to = "") const {
    const std::string cmd = std::string("'") + KILN_CLI_PATH + "' " + args + " >'" +
                            (stdout_to.empty() ? file("stdout") : stdout_to) + "' 2>'" + file("stderr") + "' </dev/null";
    const int st = std::system(cmd.c_str());
    Run r;
    r.code = WIFEXITED(st) ? WEXITSTATUS(st) : -1;
    r.out = slurp(dir / "stdout");
    r.err = slurp(dir / "stderr");
    return r;
  }
};

using kt::same_bits;

}  // namespace

TEST_SUITE("cli") {
  TEST_CASE("kiln info, dot, run and bench on an exported callable") {
    Cli kiln;
    nn::Linear lin(4, 3);
    CompileOptions o;
    o.weights = lin.state_dict();
    auto f = [&](Tensor x, Tensor y) {
      Tensor h = lin(x);
      return std::make_tuple(tanh(h * 2.0f + 1.0f) - y, sum(h, {1}));
    };
    CompiledCallable run = compile(f, o)(TensorLayout(DType::float32, {2, 4}), TensorLayout(DType::float32, {2, 3}));
    const std::string mef = kiln.file("f.mef");
    run.export_mef(mef);
    write_safetensors(kiln.file("w.safetensors"), lin.state_dict());
    Tensor x = random::normal({2, 4}), y = random::normal({2, 3});
    write_npy(kiln.file("x.npy"), x);
    write_npy(kiln.file("y.npy"), y);

    Run info = kiln("info '" + mef + "'");
    CHECK(info.code == 0);
    CHECK(info.out.find("MEF format version 2") != std::string::npos);
    CHECK(info.out.find("arguments: (T, T)") != std::string::npos);
    CHECK(info.out.find("  0 (0): float32[2, 4] cpu (contiguous)") != std::string::npos);
    CHECK(info.out.find("weights expected: 2") != std::string::npos);
    CHECK(info.out.find("weight: float32[3, 4] cpu") != std::string::npos);
    CHECK(info.out.find("bias: float32[3] cpu") != std::string::npos);
    CHECK(info.out.find("op counts:") != std::string::npos);
    CHECK(info.out.find("matmul: 1") != std::string::npos);
    CHECK(info.out.find("execution plan (this CPU: ") != std::string::npos);
    CHECK(info.out.find("fusion group(s)") != std::string::npos);
    // the file's PLAN section was used: no planning on reading
    CHECK(info.out.find("plan:      restored from the file's PLAN section (no planning)") != std::string::npos);

    Run dot = kiln("dot '" + mef + "'");
    CHECK(dot.code == 0);
    CHECK(dot.out.rfind("digraph", 0) == 0);
    CHECK(dot.out.find("matmul") != std::string::npos);

    Run r = kiln("run '" + mef + "' --weights '" + kiln.file("w.safetensors") + "' --input '" + kiln.file("x.npy") +
                 "' --input '" + kiln.file("y.npy") + "' --output '" + kiln.file("a.npy") + "' --output '" +
                 kiln.file("b.npy") + "'");
    CHECK_MESSAGE(r.code == 0, r.err);
    auto [want_a, want_b] = run(x, y).as<std::tuple<Tensor, Tensor>>();
    CHECK(same_bits(read_npy(kiln.file("a.npy")), want_a));
    CHECK(same_bits(read_npy(kiln.file("b.npy")), want_b));

    Run printed = kiln("run '" + mef + "' --weights '" + kiln.file("w.safetensors") + "' --input '" +
                       kiln.file("x.npy") + "' --input '" + kiln.file("y.npy") + "'");
    CHECK(printed.code == 0);
    CHECK(printed.out.find("result 1 (1): float32[2] cpu") != std::string::npos);

    Run bench = kiln("bench '" + mef + "' --weights '" + kiln.file("w.safetensors") + "' --samples 3");
    CHECK_MESSAGE(bench.code == 0, bench.err);
    CHECK(bench.out.find("checked call") != std::string::npos);
    CHECK(bench.out.find("replay") != std::string::npos);
    CHECK(bench.out.find("median") != std::string::npos);

    // Errors: each says what is wrong and exits non-zero.
    Run no_w = kiln("run '" + mef + "' --input '" + kiln.file("x.npy") + "' --input '" + kiln.file("y.npy") + "'");
    CHECK(no_w.code == 1);
    CHECK(no_w.err.find("expects 2 weight(s): weight (float32[3, 4] cpu), bias (float32[3] cpu); pass them with "
                        "--weights") != std::string::npos);
    // A weights file without one of them: the message names `kiln run` and the file (not "compile:").
    write_safetensors(kiln.file("w1.safetensors"), std::map<std::string, Tensor>{{"weight", lin.state_dict()["weight"]}});
    Run part_w = kiln("run '" + mef + "' --weights '" + kiln.file("w1.safetensors") + "' --input '" + kiln.file("x.npy") +
                      "' --input '" + kiln.file("y.npy") + "'");
    CHECK(part_w.code == 1);
    CHECK_MESSAGE(part_w.err.find("kiln run: weight 'bias' (float32[3] cpu) is missing from --weights '" +
                                  kiln.file("w1.safetensors") + "'") != std::string::npos,
                  part_w.err);
    CHECK(part_w.err.find("compile:") == std::string::npos);
    CHECK_MESSAGE(part_w.err.rfind("kiln run: weight 'bias'", 0) == 0, part_w.err);  // one prefix, not two
    // A weights file without several of them: all named in one error, sorted, with their count.
    write_safetensors(kiln.file("w0.safetensors"), std::map<std::string, Tensor>{{"other", zeros({2})}});
    for (const std::string cmd : {"run", "bench"}) {
      Run none_w = kiln(cmd + " '" + mef + "' --weights '" + kiln.file("w0.safetensors") + "' --input '" +
                        kiln.file("x.npy") + "' --input '" + kiln.file("y.npy") + "'");
      CHECK(none_w.code == 1);
      CHECK_MESSAGE(none_w.err == "kiln " + cmd + ": 2 of the 2 weights the callable expects are missing from --weights '" +
                                      kiln.file("w0.safetensors") + "': 'bias' (float32[3] cpu), 'weight' (float32[3, 4] "
                                      "cpu); bind a tensor of each type under its name\n",
                    none_w.err);
    }
    // A weight of the wrong shape, and of the wrong dtype: one "kiln run: " prefix.
    for (const auto& [name, w] : std::vector<std::pair<std::string, Tensor>>{
             {"w_shape.safetensors", zeros({3, 5})}, {"w_dtype.safetensors", zeros({3, 4}, DType::float64)}}) {
      write_safetensors(kiln.file(name), std::map<std::string, Tensor>{{"weight", w}, {"bias", lin.state_dict()["bias"]}});
      Run bad_w = kiln("run '" + mef + "' --weights '" + kiln.file(name) + "' --input '" + kiln.file("x.npy") +
                       "' --input '" + kiln.file("y.npy") + "'");
      CHECK(bad_w.code == 1);
      const std::string want = std::string("kiln run: weight 'weight' expects float32[3, 4] cpu, got ") +
                               (name == "w_shape.safetensors" ? "float32[3, 5]" : "float64[3, 4]") + " cpu in --weights";
      CHECK_MESSAGE(bad_w.err.rfind(want, 0) == 0, bad_w.err);
      CHECK_MESSAGE(bad_w.err.find("kiln run: kiln run:") == std::string::npos, bad_w.err);
    }
    Run swapped = kiln("run '" + mef + "' --weights '" + kiln.file("w.safetensors") + "' --input '" +
                       kiln.file("y.npy") + "' --input '" + kiln.file("x.npy") + "'");
    CHECK(swapped.code == 1);
    CHECK(swapped.err.find("input 0 ('" + kiln.file("y.npy") + "'): expected float32[2, 4] cpu, got float32[2, 3] cpu") !=
          std::string::npos);
    Run one = kiln("run '" + mef + "' --weights '" + kiln.file("w.safetensors") + "' --input '" + kiln.file("x.npy") + "'");
    CHECK(one.code == 2);
    CHECK(one.err.find("the callable takes 2 tensor argument(s), got 1 --input") != std::string::npos);
    Run outs = kiln("run '" + mef + "' --weights '" + kiln.file("w.safetensors") + "' --input '" + kiln.file("x.npy") +
                    "' --input '" + kiln.file("y.npy") + "' --output '" + kiln.file("a.npy") + "'");
    CHECK(outs.code == 2);
    CHECK(outs.err.find("the callable returns 2 tensor(s), got 1 --output") != std::string::npos);
    Run missing = kiln("info '" + kiln.file("nope.mef") + "'");
    CHECK(missing.code == 1);
    CHECK(missing.err.find("engine::read: cannot open") != std::string::npos);
    Run notmef = kiln("info '" + kiln.file("x.npy") + "'");
    CHECK(notmef.code == 1);
    CHECK(notmef.err.find("not a MEF file") != std::string::npos);
    Run badcmd = kiln("frobnicate '" + mef + "'");
    CHECK(badcmd.code == 2);
    CHECK(badcmd.err.find("unknown command 'frobnicate'") != std::string::npos);
    CHECK(badcmd.err.find("usage: kiln") != std::string::npos);
    Run badopt = kiln("info '" + mef + "' --weights w");
    CHECK(badopt.code == 2);
    CHECK(badopt.err.find("unknown option '--weights' for 'info'") != std::string::npos);
    Run nofile = kiln("dot");
    CHECK(nofile.code == 2);
    CHECK(nofile.err.find("'dot' needs a MEF file") != std::string::npos);
    Run samples = kiln("bench '" + mef + "' --samples 0");
    CHECK(samples.code == 2);
    CHECK(samples.err.find("--samples takes an integer in 1..100000, got '0'") != std::string::npos);
    Run help = kiln("help");
    CHECK(help.code == 0);
    CHECK(help.out.find("kiln run FILE.mef") == std::string::npos);  // usage lists commands, not this phrase
    CHECK(help.out.find("run   FILE.mef") != std::string::npos);
  }

  TEST_CASE("kiln run refuses token ids outside the embedding table, naming the input") {
    Cli kiln;
    nn::Embedding emb(5, 3);
    CompileOptions o;
    o.weights = emb.state_dict();
    auto f = [&](Tensor mask, Tensor ids) { return emb(ids) * unsqueeze(mask, -1); };
    CompiledCallable run = compile(f, o)(TensorLayout(DType::float32, {2, 4}), TensorLayout(DType::int64, {2, 4}));
    const std::string mef = kiln.file("e.mef");
    run.export_mef(mef);
    write_safetensors(kiln.file("w.safetensors"), emb.state_dict());
    const Tensor mask = ones({2, 4});
    write_npy(kiln.file("mask.npy"), mask);
    auto run_ids = [&](std::vector<int64_t> ids) {
      write_npy(kiln.file("ids.npy"), Tensor::from_vector(ids, {2, 4}));
      return kiln("run '" + mef + "' --weights '" + kiln.file("w.safetensors") + "' --input '" + kiln.file("mask.npy") +
                  "' --input '" + kiln.file("ids.npy") + "' --output '" + kiln.file("out.npy") + "'");
    };
    Run ok = run_ids({0, 1, 2, 3, 4, 4, 3, 2});
    CHECK_MESSAGE(ok.code == 0, ok.err);
    CHECK(same_bits(read_npy(kiln.file("out.npy")),
                    run(mask, Tensor::from_vector(std::vector<int64_t>{0, 1, 2, 3, 4, 4, 3, 2}, {2, 4})).leaves[0]));
    Run neg = run_ids({0, 1, 2, 3, 4, -1, 3, 2});
    CHECK(neg.code == 1);
    CHECK(neg.err.find("IndexError") == std::string::npos);  // the message, not a type dump
    CHECK(neg.err.find("input 1 ('" + kiln.file("ids.npy") + "'): id -1 at flat position 5 is outside the rows 0..4 of "
                       "embedding table 'weight' (a negative id would wrap to the table's last rows)") != std::string::npos);
    Run past = run_ids({0, 1, 2, 3, 4, 5, 3, 2});
    CHECK(past.code == 1);
    CHECK(past.err.find("input 1 ('" + kiln.file("ids.npy") + "'): id 5 at flat position 5 is outside the rows 0..4") !=
          std::string::npos);
  }

  TEST_CASE("a failed write to stdout is an error (kiln info/run/dot/help > /dev/full)") {
    if (!fs::exists("/dev/full")) return;  // Linux's always-full device; nothing to test without it
    Cli kiln;
    auto f = [](Tensor x) { return x * 2.0f; };
    CompiledCallable run = compile(f)(TensorLayout(DType::float32, {3}));
    const std::string mef = kiln.file("f.mef");
    run.export_mef(mef);
    write_npy(kiln.file("x.npy"), Tensor::from_vector(std::vector<float>{1, 2, 3}, {3}));
    for (const std::string& args : {"info '" + mef + "'", "dot '" + mef + "'", "run '" + mef + "' --input '" +
                                    kiln.file("x.npy") + "'", std::string("help")}) {
      CAPTURE(args);
      Run r = kiln(args, "/dev/full");
      CHECK(r.code == 1);
      CHECK(r.err.find("kiln: error writing to stdout: " + std::string(std::strerror(ENOSPC))) != std::string::npos);
      Run ok = kiln(args);  // the same command into a file succeeds
      CHECK_MESSAGE(ok.code == 0, ok.err);
      CHECK(ok.err.empty());
    }
    // bench prints with printf (stdio) as well as iostreams
    Run b = kiln("bench '" + mef + "' --samples 2", "/dev/full");
    CHECK(b.code == 1);
    CHECK(b.err.find("kiln: error writing to stdout: ") != std::string::npos);
  }

  TEST_CASE("kiln run: an argument written in place is printed after the call, and --output can take it") {
    Cli kiln;
    auto f = [](Tensor x, Tensor y) {
      x += y;
      x.mul_(2.0f);
      return y * 3.0f;
    };
    CompiledCallable run = compile(f)(TensorLayout(DType::float32, {3}), TensorLayout(DType::float32, {3}));
    const std::string mef = kiln.file("mut.mef");
    run.export_mef(mef);
    write_npy(kiln.file("x.npy"), Tensor::from_vector(std::vector<float>{1, 2, 3}));
    write_npy(kiln.file("y.npy"), Tensor::from_vector(std::vector<float>{10, 20, 30}));
    const std::string ins = " --input '" + kiln.file("x.npy") + "' --input '" + kiln.file("y.npy") + "'";
    Run info = kiln("info '" + mef + "'");
    REQUIRE(info.out.find("in-place write-backs: 1\n  argument 0: float32[3]") != std::string::npos);
    Run p = kiln("run '" + mef + "'" + ins);
    CHECK_MESSAGE(p.code == 0, p.err);
    CHECK_MESSAGE(p.out.find("argument 0 (written in place, after the call): float32[3] cpu") != std::string::npos, p.out);
    // one --output per result, then one per written-back argument: (x + y) * 2 = [22, 44, 66]
    Run o = kiln("run '" + mef + "'" + ins + " --output '" + kiln.file("r.npy") + "' --output '" + kiln.file("x2.npy") + "'");
    CHECK_MESSAGE(o.code == 0, o.err);
    CHECK(read_npy(kiln.file("r.npy")).to_vector<float>() == std::vector<float>{30, 60, 90});
    CHECK(read_npy(kiln.file("x2.npy")).to_vector<float>() == std::vector<float>{22, 44, 66});
    // the results alone still work
    Run r = kiln("run '" + mef + "'" + ins + " --output '" + kiln.file("r1.npy") + "'");
    CHECK_MESSAGE(r.code == 0, r.err);
    CHECK(read_npy(kiln.file("r1.npy")).to_vector<float>() == std::vector<float>{30, 60, 90});
    Run bad = kiln("run '" + mef + "'" + ins + " --output a.npy --output b.npy --output c.npy");
    CHECK(bad.code == 2);
    CHECK_MESSAGE(bad.err.find("the callable returns 1 tensor(s) and writes 1 argument(s) in place (give 1 --output, or 2 "
                               "to also write the updated arguments), got 3 --output") != std::string::npos,
                  bad.err);
    Run help = kiln("help");
    CHECK(help.out.find("one per written-back argument") != std::string::npos);
  }

  TEST_CASE("kiln bench on random inputs a callable refuses: the error hints at --input") {
    Cli kiln;
    auto f = [](Tensor a, Tensor b) { return floor_divide(a * 3, b) + remainder(a, 7); };
    CompiledCallable run = compile(f)(TensorLayout(DType::int64, {256}), TensorLayout(DType::int64, {256}));
    const std::string mef = kiln.file("int.mef");
    run.export_mef(mef);
    Run b = kiln("bench '" + mef + "' --samples 2");  // 256 draws from [0, 10): a 0 divisor (1 - 0.9^256)
    CHECK(b.code == 1);
    CHECK_MESSAGE(b.err.find("integer division by zero") != std::string::npos, b.err);
    CHECK_MESSAGE(b.err.find("(on random inputs: floats N(0, 1), integers in [0, 10); pass inputs that suit the callable "
                             "with --input x.npy, one per argument)") != std::string::npos,
                  b.err);
    // with inputs given, it runs
    std::vector<int64_t> ones_v(256, 1);
    write_npy(kiln.file("a.npy"), Tensor::from_vector(ones_v));
    write_npy(kiln.file("b.npy"), Tensor::from_vector(ones_v));
    Run ok = kiln("bench '" + mef + "' --samples 2 --input '" + kiln.file("a.npy") + "' --input '" + kiln.file("b.npy") + "'");
    CHECK_MESSAGE(ok.code == 0, ok.err);
  }

  TEST_CASE("kiln bench times checked calls of arguments compiled non-contiguous, in their layout") {
    Cli kiln;
    auto f = [](Tensor x, Tensor y) { return x * 2.0f + y; };
    const Shape s{3, 4};
    for (StrideClass c : {StrideClass::transposed, StrideClass::general, StrideClass::broadcast}) {
      CAPTURE(static_cast<int>(c));
      CompiledCallable run = compile(f)(TensorLayout(DType::float32, s, Device::cpu(), c), TensorLayout(DType::float32, s));
      const std::string mef = kiln.file("nc.mef");
      run.export_mef(mef);
      Run b = kiln("bench '" + mef + "' --samples 2");
      CHECK_MESSAGE(b.code == 0, b.err);
      const char* names[] = {"contiguous", "broadcast", "transposed", "general"};
      CHECK(b.out.find(std::string("checked call: arguments laid out as compiled (argument 0 ") + names[static_cast<int>(c)]) !=
            std::string::npos);
      CHECK(b.out.find("checked call   median") != std::string::npos);
      CHECK(b.out.find("execute_raw    median") != std::string::npos);
    }
    // A shape with no such layout (one element cannot be transposed) says why it skipped.
    CompiledCallable one = compile([](Tensor x) { return x + 1.0f; })(
        TensorLayout(DType::float32, {1, 1}, Device::cpu(), StrideClass::general));
    one.export_mef(kiln.file("one.mef"));
    Run b = kiln("bench '" + kiln.file("one.mef") + "' --samples 2");
    CHECK_MESSAGE(b.code == 0, b.err);
    CHECK(b.out.find("checked call: skipped (argument 0 (float32[1, 1] cpu (general)): no general layout exists for "
                     "shape float32[1, 1] cpu") != std::string::npos);
    CHECK(b.out.find("execute_raw    median") != std::string::npos);
  }

  TEST_CASE("kiln run: bfloat16 arguments take float32 .npy (rounded to nearest even), results are written as float32") {
    Cli kiln;
    auto f = [](Tensor x) { return x * 2.0f; };
    CompiledCallable run = compile(f)(TensorLayout(DType::bfloat16, {4}));
    const std::string mef = kiln.file("bf.mef");
    run.export_mef(mef);
    // bfloat16 keeps 8 significant bits: near 1 its spacing is 2^-7.
    //   1 + 2^-8   halfway between 1 and 1 + 2^-7: to even  -> 1
    //   1 + 3*2^-8 halfway between 1 + 2^-7 and 1 + 2^-6: to even -> 1 + 2^-6
    //   1 + 2^-7   exact;  -3 exact
    const std::vector<float> x{1.0f + 0x1p-8f, 1.0f + 3 * 0x1p-8f, 1.0f + 0x1p-7f, -3.0f};
    const std::vector<float> want{2.0f, 2.0f + 0x1p-5f, 2.0f + 0x1p-6f, -6.0f};  // 2 * rounded, exact in bfloat16
    write_npy(kiln.file("x.npy"), Tensor::from_vector(x, {4}));
    Run r = kiln("run '" + mef + "' --input '" + kiln.file("x.npy") + "' --output '" + kiln.file("y.npy") + "'");
    CHECK_MESSAGE(r.code == 0, r.err);
    CHECK(r.err.find("note: input 0 ('" + kiln.file("x.npy") +
                     "') is float32; rounded to nearest even for the bfloat16 argument") != std::string::npos);
    CHECK(r.err.find("note: result 0 is bfloat16, which .npy cannot store; writing '" + kiln.file("y.npy") +
                     "' as float32") != std::string::npos);
    CHECK(r.err.find("DType::") == std::string::npos);  // no C++ hint
    Tensor y = read_npy(kiln.file("y.npy"));
    CHECK(y.dtype() == DType::float32);
    CHECK(y.to_vector<float>() == want);
    // Printed (no --output): bfloat16 values as they are.
    Run p = kiln("run '" + mef + "' --input '" + kiln.file("x.npy") + "'");
    CHECK_MESSAGE(p.code == 0, p.err);
    CHECK_MESSAGE(p.out.find("result 0: bfloat16[4] cpu") != std::string::npos, p.out);
    // Another dtype for a bfloat16 argument says what to give.
    write_npy(kiln.file("x64.npy"), Tensor::from_vector(std::vector<double>{1, 2, 3, 4}, {4}));
    Run bad = kiln("run '" + mef + "' --input '" + kiln.file("x64.npy") + "'");
    CHECK(bad.code == 1);
    CHECK(bad.err.find("expected bfloat16[4] cpu, got float64[4] cpu (.npy has no bfloat16: give a float32 .npy of "
                       "the same shape; it is rounded to bfloat16, to nearest even)") != std::string::npos);
  }

  TEST_CASE("a malformed KILN_BUFFER_CACHE_BYTES is an error naming the variable, not silently ignored") {
    Cli kiln;
    auto f = [](Tensor x) { return x * 2.0f; };
    const std::string mef = kiln.file("twice.mef");
    compile(f)(TensorLayout(DType::float32, {4})).export_mef(mef);
    write_npy(kiln.file("x.npy"), Tensor::from_vector(std::vector<float>{1, 2, 3, 4}, {4}));
    // The child reads the variable at its first allocation (this process read it long ago).
    auto run_with = [&](const char* value) {
      setenv("KILN_BUFFER_CACHE_BYTES", value, 1);
      Run r = kiln("run '" + mef + "' --input '" + kiln.file("x.npy") + "'");
      unsetenv("KILN_BUFFER_CACHE_BYTES");
      return r;
    };
    // Before: "-5" was strtoull's 2^64 - 5 (an unbounded cache), the others the default, without a word.
    for (const char* bad : {"1G", "512MB", "1e9", "lots", "-5", " 5", "+5", "99999999999999999999999"}) {
      CAPTURE(bad);
      Run r = run_with(bad);
      CHECK(r.code == 1);
      CHECK_MESSAGE(r.err.find("KILN_BUFFER_CACHE_BYTES: expected a number of bytes (digits only: 1073741824 for 1 GiB) "
                               "in [0, 18446744073709551615], got '" + std::string(bad) + "'") != std::string::npos,
                    r.err);
    }
    for (const char* good : {"0", "1073741824", "18446744073709551615", ""}) {
      CAPTURE(good);
      Run r = run_with(good);
      CHECK_MESSAGE(r.code == 0, r.err);
      CHECK(r.out.find("result 0: float32[4] cpu") != std::string::npos);
    }
  }
}

#endif  // KILN_CLI_PATH
