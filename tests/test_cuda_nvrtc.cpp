// The CUDA kernel templates through NVRTC (no GPU needed): one generated
// kernel per elementwise row of the op table, walked from the table, is
// compiled to PTX (compute_90) and to an sm_90 cubin (nvrtcGetCUBIN), as the
// fused compiled plans will. ptxas's register and spill counts per row are
// reported; a spill fails the row.
#include "test_util.h"

#if KILN_TEST_CUDA_BUILT
#include <nvrtc.h>

#include <fstream>
#include <map>
#include <regex>
#include <sstream>

namespace {
using namespace kiln;

std::string read_text(const std::string& path) {
  std::ifstream f(path);
  std::stringstream s;
  s << f.rdbuf();
  return s.str();
}

struct Row {
  std::string id;
  OpCategory cat;
  DTypeRule rule;
};

std::vector<Row> elementwise_rows() {
  std::vector<Row> rows;
#define KILN_OP(id, name, arity, cat, rule)                                                       \
  if (OpCategory::cat == OpCategory::Unary || OpCategory::cat == OpCategory::Binary ||            \
      OpCategory::cat == OpCategory::Ternary)                                                     \
    rows.push_back({#id, OpCategory::cat, DTypeRule::rule});
#include "../tensor/ops.def"
#undef KILN_OP
  return rows;
}

/// One float kernel per row: out[i] = hd::Row{}(a[i], ...).
std::string kernel_source(const std::vector<Row>& rows) {
  std::string s = "#include \"kernel_templates.h\"\n";
  for (const Row& r : rows) {
    const bool to_bool = r.rule == DTypeRule::ToBool || r.rule == DTypeRule::Compare;
    const std::string out = to_bool ? "bool" : "float";
    s += "extern \"C\" __global__ void kiln_" + r.id + "(" + out + "* out, ";
    if (r.cat == OpCategory::Unary) {
      s += "const float* a, int n) { int i = blockIdx.x * blockDim.x + threadIdx.x; if (i < n) out[i] = kiln::hd::" +
           r.id + "{}(a[i]); }\n";
    } else if (r.cat == OpCategory::Binary) {
      s += "const float* a, const float* b, int n) { int i = blockIdx.x * blockDim.x + threadIdx.x; if (i < n) "
           "out[i] = kiln::hd::" + r.id + "{}(a[i], b[i]); }\n";
    } else {
      const std::string a0 = r.id == "Where" ? "const bool*" : "const float*";
      s += a0 + " a, const float* b, const float* c, int n) { int i = blockIdx.x * blockDim.x + threadIdx.x; "
           "if (i < n) out[i] = kiln::hd::" + r.id + "{}(a[i], b[i], c[i]); }\n";
    }
  }
  return s;
}

struct Compiled {
  std::string log;
  std::vector<char> code;
};

Compiled compile(const std::string& src, const std::string& header, const std::vector<std::string>& opts, bool cubin) {
  nvrtcProgram prog;
  const char* hdr_src[1] = {header.c_str()};
  const char* hdr_name[1] = {"kernel_templates.h"};
  REQUIRE(nvrtcCreateProgram(&prog, src.c_str(), "kiln_rows.cu", 1, hdr_src, hdr_name) == NVRTC_SUCCESS);
  std::vector<const char*> o;
  for (const auto& x : opts) o.push_back(x.c_str());
  const nvrtcResult rc = nvrtcCompileProgram(prog, int(o.size()), o.data());
  Compiled c;
  size_t n = 0;
  nvrtcGetProgramLogSize(prog, &n);
  c.log.resize(n);
  if (n) nvrtcGetProgramLog(prog, c.log.data());
  CHECK_MESSAGE(rc == NVRTC_SUCCESS, "NVRTC: " << nvrtcGetErrorString(rc) << "\n" << c.log);
  if (rc == NVRTC_SUCCESS) {
    if (cubin) {
      nvrtcGetCUBINSize(prog, &n);
      c.code.resize(n);
      nvrtcGetCUBIN(prog, c.code.data());
    } else {
      nvrtcGetPTXSize(prog, &n);
      c.code.resize(n);
      nvrtcGetPTX(prog, c.code.data());
    }
  }
  nvrtcDestroyProgram(&prog);
  return c;
}
}  // namespace

TEST_SUITE("cuda_nvrtc") {
  TEST_CASE("every elementwise row's functor compiles through NVRTC to PTX and an sm_90 cubin") {
    const std::string header = read_text(std::string(KILN_SOURCE_DIR) + "/backends/cuda/kernel_templates.h");
    REQUIRE(!header.empty());
    const std::vector<Row> rows = elementwise_rows();
    REQUIRE(rows.size() > 40);
    const std::string src = kernel_source(rows);

    const Compiled ptx = compile(src, header, {"-arch=compute_90", "-std=c++17"}, false);
    const std::string ptx_text(ptx.code.begin(), ptx.code.end());
    for (const Row& r : rows) {
      CAPTURE(r.id);
      CHECK(ptx_text.find(".entry kiln_" + r.id + "(") != std::string::npos);
    }

    const Compiled bin = compile(src, header, {"-arch=sm_90", "-std=c++17", "-Xptxas=-v"}, true);
    REQUIRE(bin.code.size() > 4);
    CHECK(std::string(bin.code.begin(), bin.code.begin() + 4) == "\x7f" "ELF");
    // ptxas -v: "Compiling entry function 'kiln_Exp' for 'sm_90'" ... "Used N registers, ..."
    // and "N bytes spill stores, N bytes spill loads" per kernel.
    std::map<std::string, std::string> info;
    std::regex entry(R"(Compiling entry function '(kiln_\w+)')");
    std::string current;
    std::istringstream lines(bin.log);
    for (std::string line; std::getline(lines, line);) {
      std::smatch m;
      if (std::regex_search(line, m, entry)) current = m[1];
      else if (!current.empty() && line.find("ptxas") != std::string::npos) info[current] += line + "\n";
    }
    std::regex regs(R"(Used (\d+) registers)"), spill(R"((\d+) bytes spill stores, (\d+) bytes spill loads)");
    std::string table;
    for (const Row& r : rows) {
      CAPTURE(r.id);
      const std::string& s = info["kiln_" + r.id];
      std::smatch m;
      REQUIRE_MESSAGE(std::regex_search(s, m, regs), "no ptxas register line for " << r.id << "\n" << bin.log);
      const std::string nregs = m[1];
      std::smatch sm;
      const bool has_spill = std::regex_search(s, sm, spill);
      const int stores = has_spill ? std::stoi(sm[1]) : 0, loads = has_spill ? std::stoi(sm[2]) : 0;
      CHECK_MESSAGE(stores + loads == 0, r.id << " spills " << stores << "/" << loads << " bytes");
      table += r.id + ": " + nregs + " registers, spill " + std::to_string(stores) + "/" + std::to_string(loads) + "\n";
    }
    MESSAGE("sm_90 cubin of " << rows.size() << " rows (float; registers, spill stores/loads bytes):\n" << table);
  }
}
#else
TEST_SUITE("cuda_nvrtc") {
  TEST_CASE("NVRTC compile of the kernel templates (needs the CUDA build)") {
    MESSAGE("kiln built without CUDA: the NVRTC compile of the kernel templates is skipped");
  }
}
#endif
