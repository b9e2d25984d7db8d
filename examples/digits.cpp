// kiln's main job: a handwritten-digits classifier (UCI optical digits,
// 1,797 8x8 images) trained twice from the same initial weights: eagerly, and
// with the whole training step (forward, loss, hand-derived gradients,
// momentum SGD) compiled into one callable that takes and returns the
// weights. Prints both runs' test accuracy, how far apart their final weights
// are, and the time per step of each. Each epoch runs only full batches of
// 64 (the shuffled order's last n % 64 rows wait for a later epoch; see
// digits::train_epoch), so one compiled step serves every batch.
//
// The model, step and data helpers are in digits_model.h (shared with
// tests/test_digits.cpp). Data: scripts/fetch_digits.sh writes
// data/digits.csv.gz.
#include <unistd.h>

#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <iostream>
#include <optional>
#include <string>

#include "cli_args.h"
#include "digits_model.h"

namespace {

constexpr uint64_t kSplitSeed = 20240601, kInitSeed = 7, kShuffleSeed = 1000;
constexpr int64_t kBatch = 64;
constexpr double kTestFraction = 0.2;

#ifndef KILN_SOURCE_DIR
#define KILN_SOURCE_DIR "."
#endif

struct Options {
  std::string data = KILN_SOURCE_DIR "/data/digits.csv.gz";
  bool data_given = false;
  int epochs = 30;
  int threads = 0;  // 0: kiln's default
  bool strict = false;
};

const char* kUsage =
    "usage: digits [--data PATH] [--epochs N] [--threads N] [--strict] [--help]\n"
    "  Trains a 64-128-10 MLP on the UCI handwritten digits twice, eagerly and\n"
    "  compiled, and compares the two runs.\n"
    "  --data PATH   CSV or gzip-compressed CSV: 64 pixel columns (0..16), then\n"
    "                the label (0..9) (default: <repo>/data/digits.csv.gz,\n"
    "                written by scripts/fetch_digits.sh)\n"
    "  --epochs N    training epochs (default 30)\n"
    "  --threads N   CPU threads for kiln's kernels (default: all cores)\n"
    "  --strict      compile with strict numerics (KernelOptions::strict) and\n"
    "                check that both runs' weights are bitwise equal\n"
    "  --help        this text\n";

Options parse_args(int argc, char** argv) {
  Options o;
  example_cli::Args a("digits", kUsage, argc, argv);
  while (a.next()) {
    const std::string& arg = a.arg();
    if (arg == "--help" || arg == "-h") a.help();
    else if (arg == "--data") {
      o.data = a.value();
      o.data_given = true;
    } else if (arg == "--epochs") o.epochs = a.positive(1000000);
    else if (arg == "--threads") o.threads = a.positive(1000000);
    else if (arg == "--strict") {
      a.no_value();
      o.strict = true;
    } else a.error("unknown option '" + arg + "'");
  }
  return o;
}

/// A one-line progress bar, redrawn in place; only used on a terminal.
void draw_bar(const char* run, int epoch, int epochs, int64_t done, int64_t total) {
  constexpr int kWidth = 30;
  const auto filled = static_cast<int>(kWidth * done / total);
  std::printf("\r  %-8s epoch %2d/%d [%.*s%*s] %lld/%lld", run, epoch, epochs, filled,
              "##############################", kWidth - filled, "", static_cast<long long>(done),
              static_cast<long long>(total));
  std::fflush(stdout);
}

struct RunResult {
  digits::Mlp params;
  double test_accuracy = 0;
  /// Median wall time of one step call: robust to other load on the machine.
  double seconds_per_step = 0;
};

double median(std::vector<double> v) {
  if (v.empty()) return 0;
  auto mid = v.begin() + static_cast<std::ptrdiff_t>(v.size() / 2);
  std::nth_element(v.begin(), mid, v.end());
  return *mid;
}

RunResult train(const char* name, const digits::StepFn& step, const digits::Split& data,
                const kiln::Tensor& y_train_onehot, const Options& opt) {
  digits::Mlp p = digits::init_mlp(kInitSeed), v = digits::zeros_like(p);
  const bool tty = isatty(STDOUT_FILENO);
  std::vector<double> step_times;
  std::printf("%s run:\n", name);
  for (int e = 1; e <= opt.epochs; ++e) {
    std::function<void(int64_t, int64_t)> bar;
    if (tty) bar = [&](int64_t done, int64_t total) { draw_bar(name, e, opt.epochs, done, total); };
    digits::EpochStats st = digits::train_epoch(step, p, v, data.x_train, y_train_onehot, kBatch,
                                                kShuffleSeed + static_cast<uint64_t>(e), bar);
    step_times.insert(step_times.end(), st.step_times.begin(), st.step_times.end());
    double acc = digits::accuracy(p, data.x_train, data.y_train);
    std::printf("%s  %-8s epoch %2d/%d  loss %.4f  train accuracy %6.2f%%\n", tty ? "\r\033[K" : "", name, e,
                opt.epochs, st.mean_loss, 100 * acc);
  }
  std::fflush(stdout);
  return {p, digits::accuracy(p, data.x_test, data.y_test), median(std::move(step_times))};
}

int run(const Options& opt) {
  if (opt.threads > 0) kiln::set_num_threads(opt.threads);
  if (!opt.data_given && access(opt.data.c_str(), F_OK) != 0) {
    std::cerr << "digits: the data set is missing: " << opt.data << "\n"
              << "  run `bash scripts/fetch_digits.sh` (from the repository root) to download it,\n"
              << "  or pass another CSV of the same format with --data PATH\n";
    return 1;
  }
  kiln::CsvTable table = kiln::read_csv_dataset(opt.data, digits::kClasses);
  if (table.features.size(1) != digits::kInputs)
    throw kiln::ValueError(opt.data + " has " + std::to_string(table.features.size(1)) +
                           " feature columns, expected " + std::to_string(digits::kInputs));
  digits::Split data = digits::split_dataset(table, kTestFraction, kSplitSeed);
  if (data.x_train.size(0) < kBatch)
    throw kiln::ValueError(opt.data + " has too few rows for one training batch of " +
                           std::to_string(kBatch));
  kiln::Tensor y_onehot = digits::one_hot_targets(data.y_train);
  std::printf("digits: %lld examples (%lld train, %lld test), %d epochs of %lld steps (batch %lld), %d threads%s\n",
              static_cast<long long>(table.labels.size(0)), static_cast<long long>(data.x_train.size(0)),
              static_cast<long long>(data.x_test.size(0)), opt.epochs,
              static_cast<long long>(data.x_train.size(0) / kBatch), static_cast<long long>(kBatch),
              kiln::get_num_threads(), opt.strict ? ", strict numerics" : "");

  const digits::Hyper hp;
  RunResult eager = train("eager", digits::eager_step(hp), data, y_onehot, opt);

  // Compile for the layouts of one batch; the step keeps no state, so the
  // same initial weights go in and the trained weights come out.
  std::shared_ptr<kiln::InferenceSession> session;
  if (opt.strict) session = std::make_shared<kiln::InferenceSession>(kiln::KernelOptions{.strict = true});
  digits::Mlp p0 = digits::init_mlp(kInitSeed);
  kiln::Tensor xb = kiln::slice(data.x_train, 0, 0, kBatch).contiguous();
  kiln::Tensor yb = kiln::slice(y_onehot, 0, 0, kBatch).contiguous();
  double compile_s = 0;
  digits::StepFn step = digits::compiled_step(hp, p0, digits::zeros_like(p0), xb, yb, session, &compile_s);
  RunResult compiled = train("compiled", step, data, y_onehot, opt);

  auto [max_diff, bitwise] = digits::compare(eager.params, compiled.params);
  std::printf("\ntest accuracy:   eager %.2f%%, compiled %.2f%% (%lld test examples)\n", 100 * eager.test_accuracy,
              100 * compiled.test_accuracy, static_cast<long long>(data.x_test.size(0)));
  std::printf("final weights:   largest |eager - compiled| = %.3g%s\n", max_diff,
              bitwise ? " (bitwise equal)" : "");
  if (opt.strict) std::printf("strict numerics: weights bitwise equal: %s\n", bitwise ? "yes" : "NO");
  std::printf("time per step:   eager %.1f us, compiled %.1f us (medians; compile took %.1f ms)\n",
              1e6 * eager.seconds_per_step, 1e6 * compiled.seconds_per_step, 1e3 * compile_s);
  std::printf("speedup:         %.2fx\n", eager.seconds_per_step / compiled.seconds_per_step);
  return opt.strict && !bitwise ? 1 : 0;
}

}  // namespace

int main(int argc, char** argv) {
  Options opt = parse_args(argc, argv);
  try {
    return run(opt);
  } catch (const kiln::Error& e) {
    std::cerr << "digits: " << e.what() << "\n";
    return 1;
  }
}
