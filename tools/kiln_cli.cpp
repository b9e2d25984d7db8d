// kiln: the command-line tool for MEF files (installed as `kiln`).
//   kiln info  FILE.mef                       signature, weights, op counts, fusion groups
//   kiln dot   FILE.mef                       Graphviz DOT of the graph (render: dot -Tsvg)
//   kiln run   FILE.mef [--weights W.safetensors] --input x.npy ... [--output out.npy ...]
//              (a callable that writes arguments in place: one --output per result, then
//              optionally one per written-back argument, in `kiln info`'s order)
//   kiln bench FILE.mef [--weights W.safetensors] [--input x.npy ...] [--samples N]
// Exit status: 0 on success, 1 when a file or a run fails (writing stdout
// included: `kiln info f.mef > /dev/full` is an error), 2 for bad usage.
// .npy has no bfloat16: a bfloat16 argument takes a float32 .npy (rounded to
// nearest even), and a bfloat16 result is written as float32 (exact), each
// with a note on stderr.
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <chrono>
#include <cstdio>
#include <cstring>
#include <iostream>
#include <map>
#include <string>
#include <vector>

#include <kiln/kiln.h>

#include "../io/npy.h"
#include "../io/safetensors.h"
#include "../jit/elementwise_program.h"
#include "../jit/mef.h"
#include "../jit/plan.h"

using namespace kiln;

namespace {

struct UsageError : std::runtime_error {
  using std::runtime_error::runtime_error;
};

const char* kUsage =
    "usage: kiln <command> FILE.mef [options]\n"
    "commands:\n"
    "  info  FILE.mef    signature, weights expected, op counts, fusion groups\n"
    "  dot   FILE.mef    the graph in Graphviz DOT (render with: dot -Tsvg)\n"
    "  run   FILE.mef [--weights W.safetensors] --input x.npy ... [--output out.npy ...]\n"
    "                    runs the callable; inputs in argument order; without --output the\n"
    "                    results are printed (and the arguments a callable writes in place,\n"
    "                    after the call); --output takes one file per result, then optionally\n"
    "                    one per written-back argument (in the order 'kiln info' lists its\n"
    "                    in-place write-backs); .npy has no bfloat16, so a bfloat16 argument\n"
    "                    takes a float32 .npy (rounded to nearest even) and a bfloat16\n"
    "                    result is written as float32 (exact)\n"
    "  bench FILE.mef [--weights W.safetensors] [--input x.npy ...] [--samples N]\n"
    "                    times checked calls, execute_raw and replays (random inputs when\n"
    "                    none are given: floats N(0, 1), integers in [0, 10), so pass --input\n"
    "                    for a callable that needs other values, e.g. nonzero divisors;\n"
    "                    checked calls get inputs laid out as the callable was compiled\n"
    "                    for); prints the median and the p10-p90 spread\n"
    "  help              this text\n";

const char* class_name(StrideClass c) {
  static const char* n[] = {"contiguous", "broadcast", "transposed", "general"};
  return n[static_cast<int>(c)];
}

struct Args {
  std::string command, file, weights;
  std::vector<std::string> inputs, outputs;
  int samples = 30;
};

Args parse_args(int argc, char** argv) {
  Args a;
  if (argc < 2) throw UsageError("no command given");
  a.command = argv[1];
  if (a.command == "help" || a.command == "--help" || a.command == "-h") return a;
  if (a.command != "info" && a.command != "dot" && a.command != "run" && a.command != "bench")
    throw UsageError("unknown command '" + a.command + "' (expected info, dot, run, bench or help)");
  auto value = [&](int& i) -> std::string {
    if (i + 1 >= argc) throw UsageError(std::string(argv[i]) + " needs a value");
    return argv[++i];
  };
  for (int i = 2; i < argc; ++i) {
    std::string s = argv[i];
    const bool takes_options = a.command == "run" || a.command == "bench";
    if (takes_options && s == "--weights") {
      if (!a.weights.empty()) throw UsageError("--weights given twice");
      a.weights = value(i);
    } else if (takes_options && s == "--input") {
      a.inputs.push_back(value(i));
    } else if (a.command == "run" && s == "--output") {
      a.outputs.push_back(value(i));
    } else if (a.command == "bench" && s == "--samples") {
      std::string v = value(i);
      char* end = nullptr;
      long n = std::strtol(v.c_str(), &end, 10);
      if (v.empty() || *end || n < 1 || n > 100000)
        throw UsageError("--samples takes an integer in 1..100000, got '" + v + "'");
      a.samples = static_cast<int>(n);
    } else if (!s.empty() && s[0] == '-') {
      throw UsageError("unknown option '" + s + "' for '" + a.command + "'");
    } else if (a.file.empty()) {
      a.file = s;
    } else {
      throw UsageError("unexpected argument '" + s + "' (one MEF file per command)");
    }
  }
  if (a.file.empty()) throw UsageError("'" + a.command + "' needs a MEF file");
  return a;
}

std::string layout_str(const TensorLayout& l) {
  return TensorType(l).str() + " (" + class_name(l.stride_class) + ")";
}

// ---- info / dot -----------------------------------------------------------------------------

int cmd_info(const Args& a) {
  auto art = engine::read(a.file);
  const engine::Signature& s = *art->signature();
  const engine::MefOrigin& o = art->mef_origin();
  const Graph& g = art->graph();
  std::cout << "file:      " << a.file << " (MEF format version " << o.format_version
            << (o.writer.empty() ? "" : ", written by " + o.writer) << ")\n";
  std::cout << "graph:     @" << g.name() << ", " << g.num_nodes() << " nodes, " << g.num_values() << " values\n";
  std::cout << "arguments: " << s.in_tree.str() << "\n";
  auto paths = s.in_tree.leaf_paths();
  for (size_t i = 0; i < s.in_layouts.size(); ++i)
    std::cout << "  " << i << " (" << (i < paths.size() && !paths[i].empty() ? paths[i] : "0") << "): "
              << layout_str(s.in_layouts[i]) << "\n";
  std::cout << "results:   " << s.out_tree.str() << "\n";
  auto opaths = s.out_tree.leaf_paths();
  for (size_t i = 0; i < opaths.size() && i < s.out_layouts.size(); ++i)
    std::cout << "  " << i << " (" << (!opaths[i].empty() ? opaths[i] : "0") << "): "
              << TensorType(s.out_layouts[i]).str() << "\n";
  if (!s.writes.empty()) {
    std::cout << "in-place write-backs: " << s.writes.size() << "\n";
    for (size_t k = 0; k < s.writes.size(); ++k) {
      const WriteBack& wb = s.writes[k];
      std::cout << "  " << (wb.argument >= 0 ? "argument " + std::to_string(wb.argument) : "weight " + wb.weight)
                << ": " << TensorType(s.out_layouts[s.out_layouts.size() - s.writes.size() + k]).str() << "\n";
    }
  }
  const auto& w = art->weight_slots();
  std::cout << "weights expected: " << w.size() << "\n";
  for (const auto& [name, t] : w) std::cout << "  " << name << ": " << t.str() << "\n";
  std::cout << "op counts:\n";
  for (const auto& [op, n] : g.op_counts()) std::cout << "  " << op << ": " << n << "\n";
  const auto& plan = art->plan();
  int fused = 0;
  for (const auto& st : plan.steps()) fused += st.kind == codegen::PlanStep::Kind::fused;
  std::cout << "execution plan (this CPU: " << codegen::cpu_target_name(codegen::detect_cpu_target())
            << "): " << plan.steps().size() << " steps, " << fused << " fusion group(s), " << plan.code_bytes()
            << " bytes of generated code\n";
  std::cout << "plan:      "
            << (plan.read_note().empty() ? std::string("restored from the file's PLAN section (no planning)")
                                         : plan.read_note())
            << "\n";
  std::cout << plan.describe(false);
  return 0;
}

int cmd_dot(const Args& a) {
  auto art = engine::read(a.file);
  std::cout << art->graph().to_dot();
  return 0;
}

// ---- run / bench ------------------------------------------------------------------------------

CompiledCallable load_callable(const Args& a) {
  std::map<std::string, Tensor> weights;
  if (!a.weights.empty()) weights = read_safetensors(a.weights);
  auto art = engine::read(a.file);
  if (a.weights.empty() && !art->weight_slots().empty()) {
    std::string names;
    for (const auto& [n, t] : art->weight_slots()) names += (names.empty() ? "" : ", ") + n + " (" + t.str() + ")";
    throw ValueError("the callable expects " + std::to_string(art->weight_slots().size()) +
                     " weight(s): " + names + "; pass them with --weights W.safetensors");
  }
  // Every weight the file lacks, named in one error (sorted by name), rather
  // than the first one engine::Model meets.
  std::vector<std::pair<std::string, std::string>> missing;  // name, type
  for (const auto& [n, t] : art->weight_slots())
    if (!weights.count(n)) missing.emplace_back(n, t.str());
  std::sort(missing.begin(), missing.end());
  const std::string from = " from --weights '" + a.weights + "'";
  if (missing.size() == 1)
    throw ValueError("weight '" + missing[0].first + "' (" + missing[0].second + ") is missing" + from +
                     "; bind a tensor of that type under that name");
  if (!missing.empty()) {
    std::string names;
    for (const auto& [n, t] : missing) names += (names.empty() ? "'" : ", '") + n + "' (" + t + ")";
    throw ValueError(std::to_string(missing.size()) + " of the " + std::to_string(art->weight_slots().size()) +
                     " weights the callable expects are missing" + from + ": " + names +
                     "; bind a tensor of each type under its name");
  }
  const engine::Signature& s = *art->signature();
  auto model = std::make_shared<engine::Model>(art, weights, "kiln " + a.command,
                                               "--weights '" + a.weights + "'");
  return CompiledCallable::from_compiled(art, std::move(model), s.in_layouts, s.in_tree, s.out_layouts, s.out_tree,
                                         std::move(weights));
}

std::vector<Tensor> load_inputs(const Args& a, const CompiledCallable& run) {
  const auto& want = run.in_layouts();
  if (a.inputs.size() != want.size()) {
    std::string list;
    for (size_t i = 0; i < want.size(); ++i) list += "\n  " + std::to_string(i) + ": " + TensorType(want[i]).str();
    throw UsageError("the callable takes " + std::to_string(want.size()) + " tensor argument(s), got " +
                     std::to_string(a.inputs.size()) + " --input" + (want.empty() ? "" : "; expected, in order:" + list));
  }
  std::vector<Tensor> in;
  for (size_t i = 0; i < want.size(); ++i) {
    Tensor t = read_npy(a.inputs[i]);
    TensorType got(t.dtype(), t.shape(), t.device());
    const bool bf16 = want[i].dtype == DType::bfloat16;
    if (bf16 && t.dtype() == DType::float32 && t.shape() == want[i].shape) {
      // .npy has no bfloat16 (numpy needs the ml_dtypes package for it): a
      // float32 file is rounded to nearest even, as ml_dtypes and t.to() do.
      std::cerr << "kiln " << a.command << ": note: input " << i << " ('" << a.inputs[i]
                << "') is float32; rounded to nearest even for the bfloat16 argument\n";
      t = t.to(DType::bfloat16);
      got = TensorType(t.dtype(), t.shape(), t.device());
    }
    if (!(got == TensorType(want[i])))
      throw ValueError("input " + std::to_string(i) + " ('" + a.inputs[i] + "'): expected " +
                       TensorType(want[i]).str() + ", got " + got.str() +
                       (bf16 ? " (.npy has no bfloat16: give a float32 .npy of the same shape; it is rounded to "
                               "bfloat16, to nearest even)"
                             : ""));
    in.push_back(t);
  }
  return in;
}

// Inputs that index an embedding table: graph input k reaching, through
// views only, the indices of an index_select along axis 0 of a weight.
// index_select counts negative indices from the end (numpy.take), so a
// negative token id would silently read one of the table's last rows: here
// it is an IndexError naming the input (ids past the table too, with the
// same naming). Other int inputs are left to their ops.
void check_token_ids(const Graph& g, const std::vector<Tensor>& in, const std::vector<std::string>& paths) {
  auto input_index = [&](int32_t v) -> int {
    for (;;) {
      const Node& p = g.node(g.producer(v));
      if (p.kind == NodeKind::input) {
        const auto& ids = g.input_ids();
        return static_cast<int>(std::find(ids.begin(), ids.end(), v) - ids.begin());
      }
      if (p.kind != NodeKind::op || op_info(p.op).category != OpCategory::View || p.inputs.empty()) return -1;
      v = p.inputs[0];
    }
  };
  for (const Node& n : g.nodes()) {
    if (n.kind != NodeKind::op || n.op != OpId::IndexSelect || n.attrs.axis != 0 || n.inputs.size() != 2) continue;
    const Node& table = g.node(g.producer(n.inputs[0]));
    const int k = input_index(n.inputs[1]);
    if (table.kind != NodeKind::weight || k < 0 || k >= static_cast<int>(in.size())) continue;
    const int64_t rows = g.type(n.inputs[0]).shape.at(0);
    const std::vector<int64_t> ids = in[k].to_vector<int64_t>();
    for (size_t j = 0; j < ids.size(); ++j)
      if (ids[j] < 0 || ids[j] >= rows)
        throw IndexError("input " + std::to_string(k) + " ('" + paths.at(k) + "'): id " + std::to_string(ids[j]) +
                         " at flat position " + std::to_string(j) + " is outside the rows 0.." +
                         std::to_string(rows - 1) + " of embedding table '" + table.name + "'" +
                         (ids[j] < 0 ? " (a negative id would wrap to the table's last rows)" : ""));
  }
}

// Writes `t` to `path` (.npy has no bfloat16: float32 instead, exact, with a
// note naming `what`).
void write_result(const std::string& path, const Tensor& t, const std::string& what) {
  if (t.dtype() == DType::bfloat16) {
    // .npy has no bfloat16; float32 holds every bfloat16 value exactly and
    // numpy reads it without extra packages (ml_dtypes' '<V2' would not).
    std::cerr << "kiln run: note: " << what << " is bfloat16, which .npy cannot store; writing '" << path
              << "' as float32 (exact: every bfloat16 value is a float32)\n";
    write_npy(path, t.to(DType::float32));
  } else {
    write_npy(path, t);
  }
}

int cmd_run(const Args& a) {
  CompiledCallable run = load_callable(a);
  // Arguments the callable writes in place (an optimizer step): after the
  // call the input tensors hold the updated values; --output may take them.
  const std::vector<WriteBack>& writes = run.engine_model().artifact().signature()->writes;
  std::vector<int> written;  // graph-input indices, in the signature's order
  for (const WriteBack& wb : writes)
    if (wb.argument >= 0) written.push_back(wb.argument);
  const size_t results = run.out_tree().num_leaves();
  if (!a.outputs.empty() && a.outputs.size() != results && a.outputs.size() != results + written.size())
    throw UsageError("the callable returns " + std::to_string(results) + " tensor(s)" +
                     (written.empty() ? std::string()
                                      : " and writes " + std::to_string(written.size()) +
                                            " argument(s) in place (give " + std::to_string(results) + " --output, or " +
                                            std::to_string(results + written.size()) +
                                            " to also write the updated arguments)") +
                     ", got " + std::to_string(a.outputs.size()) + " --output");
  std::vector<Tensor> in = load_inputs(a, run);
  check_token_ids(run.engine_model().artifact().plan().graph(), in, a.inputs);
  // Same path as an in-process call: inputs are contiguous, the model runs them.
  std::vector<Tensor> out = run.execute_raw(std::span<const Tensor>(in));
  if (a.outputs.empty()) {
    auto paths = run.out_tree().leaf_paths();
    for (size_t i = 0; i < out.size(); ++i)
      std::cout << "result " << i << (i < paths.size() && !paths[i].empty() ? " (" + paths[i] + ")" : "") << ": "
                << TensorType(out[i].dtype(), out[i].shape(), out[i].device()).str() << "\n"
                << out[i] << "\n";
    for (int k : written)
      std::cout << "argument " << k << " (written in place, after the call): "
                << TensorType(in[k].dtype(), in[k].shape(), in[k].device()).str() << "\n"
                << in[k] << "\n";
  } else {
    for (size_t i = 0; i < out.size() && i < results; ++i) write_result(a.outputs[i], out[i], "result " + std::to_string(i));
    for (size_t k = 0; results + k < a.outputs.size(); ++k)
      write_result(a.outputs[results + k], in[written[k]], "argument " + std::to_string(written[k]));
  }
  return 0;
}

Tensor random_input(const TensorLayout& l, uint64_t k) {
  if (is_floating(l.dtype)) return random::normal(l.shape, 0.0, 1.0, DType::float32).to(l.dtype);
  Tensor u = random::uniform(l.shape, 0.0, l.dtype == DType::bool_ ? 2.0 : 10.0, DType::float32);
  (void)k;
  return floor(u).to(l.dtype);
}

// `t` (contiguous) as a tensor of the same shape and dtype with stride class
// `c`: transposed: the transpose of a contiguous copy of its reversed-axes
// form; general: every other element of a buffer twice as large along an
// axis; broadcast: its first entry along an axis of more than one element,
// broadcast along it (values change there). Sets `why` (and returns t) when
// the shape allows no such layout (e.g. a single element).
Tensor with_stride_class(const Tensor& t, StrideClass c, std::string& why) {
  if (c == StrideClass::contiguous) return t;
  const Shape& s = t.shape();
  int64_t axis = -1;  // the last axis with more than one element
  for (int64_t d = t.ndim(); d-- > 0;)
    if (s[static_cast<size_t>(d)] > 1) {
      axis = d;
      break;
    }
  Tensor r = t;
  if (c == StrideClass::transposed) {
    std::vector<int64_t> rev(static_cast<size_t>(t.ndim()));
    for (int64_t d = 0; d < t.ndim(); ++d) rev[static_cast<size_t>(d)] = t.ndim() - 1 - d;
    r = permute(permute(t, rev).contiguous(), rev);
  } else if (c == StrideClass::general && axis >= 0) {
    Tensor two = concat({unsqueeze(t, axis + 1), unsqueeze(t, axis + 1)}, axis + 1);
    r = select(two, axis + 1, 0);
  } else if (c == StrideClass::broadcast && axis >= 0) {
    r = broadcast_to(slice(t, axis, 0, 1), s);
  }
  if (r.stride_class() != c) {
    why = std::string("no ") + class_name(c) + " layout exists for shape " + TensorType(t.layout()).str() +
          ", so no tensor can match the compiled layout in a checked call";
    return t;
  }
  return r;
}

struct Timing {
  double median = 0, p10 = 0, p90 = 0;
  int64_t per_sample = 0;
};

// Times `fn` in `samples` batches of calls (each batch about 2 ms), with a
// progress bar on stderr when it is a terminal.
template <class F>
Timing time_it(const std::string& label, int samples, F&& fn) {
  using clock = std::chrono::steady_clock;
  for (int i = 0; i < 3; ++i) fn();  // warm up
  auto t0 = clock::now();
  int64_t calib = 0;
  while (std::chrono::duration<double>(clock::now() - t0).count() < 2e-3 && calib < 1000000) {
    fn();
    ++calib;
  }
  const int64_t per = std::max<int64_t>(1, calib);
  const bool tty = isatty(STDERR_FILENO);
  std::vector<double> t;
  for (int s = 0; s < samples; ++s) {
    auto b = clock::now();
    for (int64_t i = 0; i < per; ++i) fn();
    t.push_back(std::chrono::duration<double, std::micro>(clock::now() - b).count() / static_cast<double>(per));
    if (tty) {
      const int width = 30, done = (s + 1) * width / samples;
      std::fprintf(stderr, "\r%-14s [%s%s] %3d%%", label.c_str(), std::string(done, '#').c_str(),
                   std::string(width - done, ' ').c_str(), (s + 1) * 100 / samples);
      std::fflush(stderr);
    }
  }
  if (tty) std::fprintf(stderr, "\r%*s\r", 60, "");
  std::sort(t.begin(), t.end());
  auto q = [&](double f) { return t[static_cast<size_t>(f * static_cast<double>(t.size() - 1) + 0.5)]; };
  return Timing{q(0.5), q(0.1), q(0.9), per};
}

void print_timing(const std::string& label, const Timing& t, int samples) {
  std::printf("%-14s median %10.3f us   spread (p10-p90) %.3f-%.3f us   [%d samples x %lld calls]\n", label.c_str(),
              t.median, t.p10, t.p90, samples, static_cast<long long>(t.per_sample));
}

int cmd_bench(const Args& a) {
  CompiledCallable run = load_callable(a);
  std::vector<Tensor> in;
  if (!a.inputs.empty()) {
    in = load_inputs(a, run);
  } else {
    for (size_t i = 0; i < run.in_layouts().size(); ++i) in.push_back(random_input(run.in_layouts()[i], i));
    // A callable that refuses random values (an integer division by a drawn
    // 0, an id past a table) fails here, once, with a hint to give inputs.
    try {
      (void)run.execute_raw(std::span<const Tensor>(in));
    } catch (const Error& e) {
      throw ValueError(std::string(e.what()) +
                       " (on random inputs: floats N(0, 1), integers in [0, 10); pass inputs that suit the callable "
                       "with --input x.npy, one per argument)");
    }
  }
  std::cout << "bench " << a.file << ": " << run.in_layouts().size() << " argument(s), "
            << run.engine_model().artifact().plan().steps().size() << " plan steps\n";
  // A checked call checks each argument's stride class against the compiled
  // one: arguments compiled non-contiguous get inputs laid out that way.
  std::vector<Tensor> checked;
  std::string laid_out, skipped;
  for (size_t i = 0; i < in.size() && skipped.empty(); ++i) {
    const TensorLayout& l = run.in_layouts()[i];
    checked.push_back(with_stride_class(in[i], l.stride_class, skipped));
    if (!skipped.empty()) skipped = "argument " + std::to_string(i) + " (" + layout_str(l) + "): " + skipped;
    else if (!l.is_contiguous())
      laid_out += (laid_out.empty() ? "argument " : ", argument ") + std::to_string(i) + " " + class_name(l.stride_class);
  }
  if (!skipped.empty()) {
    std::cout << "checked call: skipped (" << skipped << ")\n";
  } else {
    if (!laid_out.empty())
      std::cout << "checked call: arguments laid out as compiled (" << laid_out
                << "; a broadcast argument repeats its first entry along the broadcast axis)\n";
    Timing t = time_it("checked call", a.samples, [&] { (void)run.call_flat(checked, run.in_tree()); });
    print_timing("checked call", t, a.samples);
  }
  std::span<const Tensor> span(in);
  Timing raw = time_it("execute_raw", a.samples, [&] { (void)run.execute_raw(span); });
  print_timing("execute_raw", raw, a.samples);
  if (!in.empty()) {
    const engine::Model& m = run.engine_model();
    m.capture(0, span);
    Timing rep = time_it("replay", a.samples, [&] { m.replay(0, span); });
    m.release(0);
    print_timing("replay", rep, a.samples);
  } else {
    std::cout << "replay: skipped (the callable takes no tensor arguments; a capture needs input buffers)\n";
  }
  return 0;
}

}  // namespace

// Checks stdout at exit: a failed write (a full disk, `> /dev/full`) is an
// error (exit status 1) with the OS's reason, not a silent success.
int checked_exit(int code) {
  // std::cout shares stdout's buffer (sync_with_stdio): flush that first, so
  // its errno is the write's.
  errno = 0;
  const int flushed = std::fflush(stdout);
  int err = flushed != 0 ? errno : 0;
  std::cout.flush();
  if (flushed == 0 && std::cout && !std::ferror(stdout)) return code;
  if (err == 0) {
    // The write failed earlier (output larger than the buffer) and its errno
    // is gone: one more byte, to an output already broken, tells why.
    if (::write(STDOUT_FILENO, "\n", 1) < 0) err = errno;
  }
  std::fprintf(stderr, "kiln: error writing to stdout: %s\n", std::strerror(err != 0 ? err : EIO));
  return code == 0 ? 1 : code;
}

int run_command(int argc, char** argv) {
  Args a;
  try {
    a = parse_args(argc, argv);
    if (a.command == "help" || a.command == "--help" || a.command == "-h") {
      std::cout << kUsage;
      return 0;
    }
    if (a.command == "info") return cmd_info(a);
    if (a.command == "dot") return cmd_dot(a);
    if (a.command == "run") return cmd_run(a);
    return cmd_bench(a);
  } catch (const UsageError& e) {
    std::cerr << "kiln: " << e.what() << "\n\n" << kUsage;
    return 2;
  } catch (const Error& e) {
    // One prefix: a message that already names the command (engine::Model's
    // weight checks, told who = "kiln <command>") is printed as it is.
    const std::string prefix = "kiln " + a.command + ": ";
    const std::string what = e.what();
    std::cerr << (what.rfind(prefix, 0) == 0 ? "" : prefix) << what << "\n";
    return 1;
  } catch (const std::exception& e) {
    std::cerr << "kiln " << a.command << ": unexpected error: " << e.what() << "\n";
    return 1;
  }
}

int main(int argc, char** argv) { return checked_exit(run_command(argc, argv)); }
