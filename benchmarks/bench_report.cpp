#include "bench_report.h"

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <cstring>
#include <ctime>
#include <fstream>
#include <iostream>
#include <map>
#include <sstream>
#include <thread>

namespace kb {

namespace {
std::vector<Comparison>& comparisons() {
  static std::vector<Comparison> v;
  return v;
}
std::vector<std::string>& notes() {
  static std::vector<std::string> v;
  return v;
}

struct Collecting : benchmark::ConsoleReporter {
  std::map<std::string, double> ns;   // benchmark name -> real time per iteration, ns
  std::map<std::string, double> cpu;  // benchmark name -> CPU time per iteration, ns
  std::map<std::string, bool> median;  // the figure is the median of repetitions
  void ReportRuns(const std::vector<Run>& runs) override {
    for (const auto& r : runs) {
      if (r.error_occurred) continue;
      const bool is_median = r.run_type == Run::RT_Aggregate && r.aggregate_name == "median";
      if (r.run_type != Run::RT_Iteration && !is_median) continue;
      const std::string name = is_median ? r.run_name.str() : r.benchmark_name();
      if (!is_median && median[name]) continue;
      double mult = r.time_unit == benchmark::kNanosecond    ? 1.0
                    : r.time_unit == benchmark::kMicrosecond ? 1e3
                    : r.time_unit == benchmark::kMillisecond ? 1e6
                                                             : 1e9;
      ns[name] = r.GetAdjustedRealTime() * mult;  // in r.time_unit
      cpu[name] = r.GetAdjustedCPUTime() * mult;
      median[name] = is_median;
    }
    ConsoleReporter::ReportRuns(runs);
  }
};

std::string fmt_time(double ns) {
  char b[64];
  if (ns < 1e3) std::snprintf(b, sizeof b, "%.1f ns", ns);
  else if (ns < 1e6) std::snprintf(b, sizeof b, "%.2f us", ns / 1e3);
  else std::snprintf(b, sizeof b, "%.2f ms", ns / 1e6);
  return b;
}

std::string cpu_model() {
  std::ifstream f("/proc/cpuinfo");
  std::string line;
  while (std::getline(f, line))
    if (line.rfind("model name", 0) == 0) return line.substr(line.find(':') + 2);
  return "unknown CPU";
}

std::string cpu_flags() {
  std::ifstream f("/proc/cpuinfo");
  std::string line, out;
  while (std::getline(f, line))
    if (line.rfind("flags", 0) == 0) {
      for (const char* fl : {"sse2", "avx", "avx2", "fma", "f16c", "avx512f", "avx512bw", "avx512vl", "avx512_bf16"})
        if ((" " + line + " ").find(std::string(" ") + fl + " ") != std::string::npos) out += std::string(fl) + " ";
      break;
    }
  return out;
}
}  // namespace

void compare(Comparison c) { comparisons().push_back(std::move(c)); }
void note(std::string line) { notes().push_back(std::move(line)); }

int run_main(int argc, char** argv, const char* title) {
  std::string results_file;
  std::vector<char*> args;
  for (int i = 0; i < argc; ++i) {
    if (std::strncmp(argv[i], "--kiln_results=", 15) == 0) results_file = argv[i] + 15;
    else args.push_back(argv[i]);
  }
  int n = static_cast<int>(args.size());
  benchmark::Initialize(&n, args.data());
  if (benchmark::ReportUnrecognizedArguments(n, args.data())) return 1;
  Collecting rep;
  benchmark::RunSpecifiedBenchmarks(&rep);
  benchmark::Shutdown();

  std::ostringstream md;
  md << "\n## " << title << "\n\n| what | kiln eager | kiln compiled | eager / compiled | best peer | kiln / best peer "
        "| target | peers |\n|---|---|---|---|---|---|---|---|\n";
  auto time_of = [&](const std::string& name) {
    auto it = rep.ns.find(name);
    return it == rep.ns.end() ? std::string("-") : fmt_time(it->second);
  };
  for (const auto& c : comparisons()) {
    auto k = rep.ns.find(c.kiln);
    if (k == rep.ns.end()) continue;
    std::string best_name;
    double best = 0;
    std::string peers;
    for (const auto& p : c.peers) {
      auto it = rep.ns.find(p);
      if (it == rep.ns.end()) continue;
      auto sc = c.peer_scale.find(p);
      const double t = it->second * (sc == c.peer_scale.end() ? 1.0 : sc->second);
      peers += p + " " + fmt_time(it->second) + (c.cpu_time ? " (CPU " + fmt_time(rep.cpu[p]) + ")" : "") +
               (sc == c.peer_scale.end() ? "" : " (x" + std::to_string(sc->second).substr(0, 4) + " bytes: " + fmt_time(t) + ")") + "; ";
      if (best_name.empty() || t < best) {
        best = t;
        best_name = p;
      }
    }
    char ratio[32] = "n/a", speedup[32] = "-";
    if (!best_name.empty()) std::snprintf(ratio, sizeof ratio, "%.2fx", k->second / best);
    auto e = c.eager.empty() ? rep.ns.end() : rep.ns.find(c.eager);
    if (e != rep.ns.end()) std::snprintf(speedup, sizeof speedup, "%.2fx", e->second / k->second);
    if (c.cpu_time) {
      peers += "kiln CPU " + fmt_time(rep.cpu[c.kiln]);
      if (e != rep.ns.end()) peers += ", kiln eager CPU " + fmt_time(rep.cpu[c.eager]);
      peers += "; ";
    }
    const bool is_compiled = c.compiled || !c.eager.empty();
    md << "| " << c.title << " | " << (is_compiled ? (c.eager.empty() ? "-" : time_of(c.eager)) : fmt_time(k->second)) << " | "
       << (is_compiled ? fmt_time(k->second) : "-") << " | " << speedup << " | "
       << (best_name.empty() ? "-" : best_name + " " + fmt_time(best)) << " | " << ratio << " | " << c.budget
       << " | " << peers << " |\n";
  }
  md << "\n(kiln / best peer < 1 means kiln is faster than the best peer; compile-time rows give\n"
        "the compile time in the kiln compiled column)\n";
  bool medians = false;
  for (const auto& [name, m] : rep.median) medians |= m;
  if (medians) md << "\nFigures are medians of the repetitions (--benchmark_repetitions).\n";
  for (const auto& line : notes()) md << "\n" << line << "\n";
  std::cout << md.str();
  if (!results_file.empty()) {
    std::ofstream f(results_file, std::ios::app);
    std::time_t now = std::time(nullptr);
    char date[64];
    std::strftime(date, sizeof date, "%Y-%m-%d %H:%M UTC", std::gmtime(&now));
    f << "\n<!-- " << title << " -->\nMachine: " << cpu_model() << ", " << std::thread::hardware_concurrency()
      << " cores, flags: " << cpu_flags() << "; run " << date << "\n" << md.str();
  }
  return 0;
}

}  // namespace kb
