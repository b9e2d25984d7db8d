// The PLAN section (format and checks in mef_plan.h).
#include "mef_plan.h"

#include <algorithm>
#include <array>
#include <cstdio>
#include <cstring>
#include <optional>
#include <unordered_map>

#include "../backends/cpu/jit/small_gemm.h"
#include "../backends/cpu/reduce_kernels.h"
#include "cpu_lowering.h"
#include "memory_plan.h"
#include "step_pairs.h"
#include "mef_io.h"

namespace kiln::mef {

using codegen::ElementwiseProgram;
using codegen::Instr;
using codegen::PlanStep;
using namespace io;

std::string plan_key(const KernelOptions& options) {
  // Inter-op pairs (jit/step_pairs.h) are derived again on read from the
  // steps' order; the memory plan was made for them, so a plan made with
  // pairing off is not read with it on.
  return codegen::codegen_feature_key(codegen::detect_cpu_target(), options.strict) +
         (options.fuse ? "; fusion on" : "; fusion off") +
         (codegen::interop_enabled() ? "; inter-op pairs" : "; no inter-op pairs");
}

// ---- writing ----------------------------------------------------------------------------

namespace {

void put_f64(std::string& o, double v) {
  uint64_t b;
  std::memcpy(&b, &v, 8);
  put_u64(o, b);
}

void put_program(std::string& o, const ElementwiseProgram& p) {
  put_u8(o, static_cast<uint8_t>((p.strict ? 1 : 0) | (p.streaming_stores ? 2 : 0)));
  put_u32(o, static_cast<uint32_t>(p.num_outputs));
  put_u32(o, static_cast<uint32_t>(p.table_slots));
  put_u32(o, static_cast<uint32_t>(p.operand_dtypes.size()));
  for (size_t k = 0; k < p.operand_dtypes.size(); ++k) {
    put_u8(o, static_cast<uint8_t>(p.operand_dtypes[k]));
    put_u8(o, k < p.operand_broadcast.size() && p.operand_broadcast[k]);
  }
  put_u32(o, static_cast<uint32_t>(p.code.size()));
  for (const Instr& in : p.code) {
    put_u8(o, static_cast<uint8_t>(in.kind));
    put_u8(o, static_cast<uint8_t>(in.dtype));
    put_i32(o, in.a);
    put_i32(o, in.b);
    put_i32(o, in.c);
    put_i32(o, in.arg);
    put_f64(o, in.imm);
    if (in.kind != Instr::Kind::op) continue;
    put_str(o, op_name(in.op));
    put_u32(o, static_cast<uint32_t>(in.attrs.ints.size()));
    for (int64_t v : in.attrs.ints) put_i64(o, v);
    put_i64(o, in.attrs.axis);
    put_f64(o, in.attrs.scalar);
    put_u8(o, in.attrs.flag);
    put_u8(o, static_cast<uint8_t>(in.attrs.dtype));
  }
}

void put_gemm_part(std::string& o, const PlanStep& s) {
  put_u32(o, static_cast<uint32_t>(s.node));
  put_i32(o, s.gemm_base[0]);
  put_i32(o, s.gemm_base[1]);
  put_u8(o, s.gemm_transposed[0]);
  put_u8(o, s.gemm_transposed[1]);
  const cpu::GemmCall& c = s.gemm;
  put_u8(o, c.small != nullptr);
  if (!c.small) return;
  for (int64_t v : {c.m, c.n, c.k, c.lda, c.ldb, c.ldc}) put_i64(o, v);
  put_u8(o, c.ta);
  put_u8(o, c.tb);
}

}  // namespace

std::string encode_plan(const codegen::ExecutionPlan& plan) {
  const Graph& g = plan.graph();
  std::string o;
  put_u32(o, kPlanLayoutVersion);
  put_str(o, plan.code_feature_key() + (plan.fused() ? "; fusion on" : "; fusion off") +
                 (plan.inter_op_pairs() ? "; inter-op pairs" : "; no inter-op pairs"));
  put_u32(o, static_cast<uint32_t>(g.num_nodes()));
  put_u32(o, static_cast<uint32_t>(g.num_values()));
  // the distinct programs, by their printed form
  std::unordered_map<std::string, uint32_t> index;
  std::vector<const ElementwiseProgram*> programs;
  for (const PlanStep& s : plan.steps()) {
    const bool has = s.kind == PlanStep::Kind::fused || s.kind == PlanStep::Kind::fused_row ||
                     s.kind == PlanStep::Kind::gemm_fused;
    if (!has) continue;
    if (!s.elementwise) return {};
    if (index.emplace(*s.program, static_cast<uint32_t>(programs.size())).second) programs.push_back(s.elementwise.get());
  }
  put_u32(o, static_cast<uint32_t>(programs.size()));
  for (const ElementwiseProgram* p : programs) put_program(o, *p);
  auto fused_part = [&](const PlanStep& s) {
    put_u32(o, index.at(*s.program));
    put_u32(o, static_cast<uint32_t>(s.operands.size()));
    for (int32_t v : s.operands) put_i32(o, v);
    put_u32(o, static_cast<uint32_t>(s.num_outputs));
    put_u32(o, static_cast<uint32_t>(s.imm_table.size()));
    for (uint64_t b : s.imm_table) put_u64(o, b);
    put_u32(o, static_cast<uint32_t>(s.group_nodes.size()));
    for (int32_t n : s.group_nodes) put_i32(o, n);
  };
  put_u32(o, static_cast<uint32_t>(plan.steps().size()));
  for (const PlanStep& s : plan.steps()) {
    put_u8(o, static_cast<uint8_t>(s.kind));
    switch (s.kind) {
      case PlanStep::Kind::op:
      case PlanStep::Kind::column_sum:
        put_u32(o, static_cast<uint32_t>(s.node));
        break;
      case PlanStep::Kind::row: {
        put_u32(o, static_cast<uint32_t>(s.node));
        int32_t pair = -1;
        if (s.output2 >= 0) pair = g.producer(s.output2);
        put_i32(o, pair);
        break;
      }
      case PlanStep::Kind::gemm:
        put_gemm_part(o, s);
        put_i32(o, s.gemm.bias ? s.inputs.back() : -1);
        put_i32(o, s.output);
        break;
      case PlanStep::Kind::fused:
        fused_part(s);
        put_i32(o, s.reduce_operand);
        if (s.reduce_operand >= 0) {
          put_u32(o, static_cast<uint32_t>(g.producer(s.reduce_output)));
          put_i64(o, s.reduce_nout);
          put_i64(o, s.reduce_nred);
        }
        break;
      case PlanStep::Kind::fused_row:
        put_u32(o, static_cast<uint32_t>(s.node));
        fused_part(s);
        break;
      case PlanStep::Kind::gemm_fused:
        put_gemm_part(o, s);
        put_i32(o, s.product_operand);
        fused_part(s);
        put_i32(o, s.column_sum_output >= 0 ? g.producer(s.column_sum_output) : -1);
        break;
    }
    if (s.node < 0 && s.kind != PlanStep::Kind::fused) return {};  // a step made without its node: not writable
  }
  put_u64(o, plan.arena_bytes());
  const std::vector<int64_t>& off = plan.arena_offsets();
  uint32_t n = 0;
  for (int64_t x : off) n += x >= 0;
  put_u32(o, n);
  for (size_t v = 0; v < off.size(); ++v)
    if (off[v] >= 0) {
      put_u32(o, static_cast<uint32_t>(v));
      put_u64(o, static_cast<uint64_t>(off[v]));
    }
  return o;
}

// ---- reading ----------------------------------------------------------------------------

std::string plan_mismatch(std::string_view payload, const KernelOptions& options, const std::string& what) {
  Cursor c{payload, 0, "PLAN", what};
  const uint32_t version = c.u32("the layout version");
  if (version != kPlanLayoutVersion)
    return "the file's plan has layout version " + std::to_string(version) + ", this kiln reads " +
           std::to_string(kPlanLayoutVersion);
  const std::string_view key = c.str_view("the plan key");
  const std::string mine = plan_key(options);
  if (key != mine) return "the file's plan was made for '" + std::string(key) + "', this kiln plans for '" + mine + "'";
  return {};
}

namespace {

double get_f64(Cursor& c, const char* field) {
  const uint64_t b = c.u64(field);
  double v;
  std::memcpy(&v, &b, 8);
  return v;
}

DType get_dtype(Cursor& c, const char* field) {
  const size_t at = c.pos;
  const uint8_t d = c.u8(field);
  if (d >= kNumDTypes) c.bad_at(at, std::string(field) + ": unknown dtype code " + std::to_string(d));
  return static_cast<DType>(d);
}

[[noreturn, gnu::cold, gnu::noinline]] void not_bool(const Cursor& c, size_t at, const char* field, uint8_t b) {
  c.bad_at(at, std::string(field) + ": " + std::to_string(b) + " is not 0 or 1");
}
inline bool get_bool(Cursor& c, const char* field) {
  const size_t at = c.pos;
  const uint8_t b = c.u8(field);
  if (b > 1) [[unlikely]]
    not_bool(c, at, field, b);
  return b != 0;
}

// Why program p cannot run as a kernel (operand, register and dtype rules
// of jit/elementwise_program.h), or "".
std::string program_problem(const ElementwiseProgram& p, codegen::CpuTarget target) {
  const size_t nops = p.operand_dtypes.size();
  if (nops == 0 || nops > static_cast<size_t>(codegen::kMaxFusedOperands))
    return std::to_string(nops) + " operands (expected 1 to " + std::to_string(codegen::kMaxFusedOperands) + ")";
  if (p.num_outputs < 1 || static_cast<size_t>(p.num_outputs) > nops)
    return std::to_string(p.num_outputs) + " outputs of " + std::to_string(nops) + " operands";
  if (p.table_slots < 0 || static_cast<size_t>(p.table_slots) + nops > static_cast<size_t>(codegen::kMaxFusedOperands) * 64)
    return "a constant table of " + std::to_string(p.table_slots) + " slots";
  std::vector<int> stores(static_cast<size_t>(p.num_outputs), 0);
  for (size_t i = 0; i < p.code.size(); ++i) {
    const Instr& in = p.code[i];
    const std::string at = "instruction " + std::to_string(i) + ": ";
    auto reg_ok = [&](int32_t r) {
      return r >= 0 && static_cast<size_t>(r) < i && p.code[static_cast<size_t>(r)].kind != Instr::Kind::store;
    };
    switch (in.kind) {
      case Instr::Kind::load:
        if (in.arg < p.num_outputs || static_cast<size_t>(in.arg) >= nops)
          return at + "loads operand " + std::to_string(in.arg) + " (inputs are " + std::to_string(p.num_outputs) +
                 ".." + std::to_string(nops - 1) + ")";
        if (in.dtype != p.operand_dtypes[static_cast<size_t>(in.arg)]) return at + "a load of another dtype than its operand";
        break;
      case Instr::Kind::imm:
        // A planned program reads every constant from its step's table (its
        // bits checked against the graph's constants on read); a value in
        // the instruction itself (slot -1) would be baked into the code unchecked.
        if (in.arg < 0 || in.arg >= p.table_slots)
          return at + "reads constant slot " + std::to_string(in.arg) + " of " + std::to_string(p.table_slots);
        break;
      case Instr::Kind::op: {
        const int arity = op_info(in.op).arity;
        if (arity < 1 || arity > 3) return at + "op '" + std::string(op_name(in.op)) + "' is not elementwise";
        const int32_t r[3] = {in.a, in.b, in.c};
        std::vector<DType> d;
        for (int j = 0; j < 3; ++j) {
          if (j < arity && !reg_ok(r[j])) return at + "operand register " + std::to_string(r[j]) + " is not an earlier value";
          if (j >= arity && r[j] != -1) return at + "a register past the op's arity";
          if (j < arity) d.push_back(p.code[static_cast<size_t>(r[j])].dtype);
        }
        DType want{};
        try {
          want = result_dtype(in.op, d, in.attrs);
        } catch (const Error& e) {
          return at + e.what();
        }
        if (want != in.dtype) return at + "dtype " + std::string(name(in.dtype)) + ", the op gives " + std::string(name(want));
        break;
      }
      case Instr::Kind::store:
        if (in.arg < 0 || in.arg >= p.num_outputs)
          return at + "stores operand " + std::to_string(in.arg) + " (outputs are 0.." + std::to_string(p.num_outputs - 1) + ")";
        if (!reg_ok(in.a)) return at + "stores register " + std::to_string(in.a) + ", not an earlier value";
        if (in.dtype != p.operand_dtypes[static_cast<size_t>(in.arg)] || p.code[static_cast<size_t>(in.a)].dtype != in.dtype)
          return at + "a store of another dtype than its operand";
        ++stores[static_cast<size_t>(in.arg)];
        break;
      default:
        return at + "unknown kind";
    }
  }
  for (size_t k = 0; k < stores.size(); ++k)
    if (stores[k] != 1) return "output " + std::to_string(k) + " is stored " + std::to_string(stores[k]) + " times";
  if (!codegen::can_generate(p, target)) return "the code generator has no form for it on this CPU";
  return {};
}

ElementwiseProgram get_program(Cursor& c) {
  ElementwiseProgram p;
  const size_t at = c.pos;
  const uint8_t flags = c.u8("a program's flags");
  if (flags > 3) c.bad_at(at, "a program's flags " + std::to_string(flags));
  p.strict = flags & 1;
  p.streaming_stores = flags & 2;
  const size_t oat = c.pos;
  const uint32_t nout = c.u32("a program's output count");
  if (nout > static_cast<uint32_t>(codegen::kMaxFusedOperands)) c.bad_at(oat, "a program's output count " + std::to_string(nout));
  p.num_outputs = static_cast<int>(nout);
  const size_t tat = c.pos;
  const uint32_t slots = c.u32("a program's constant table size");
  if (slots > 4096) c.bad_at(tat, "a program's constant table size " + std::to_string(slots));
  p.table_slots = static_cast<int>(slots);
  const uint32_t nops = c.count("a program's operand count", 2);
  for (uint32_t k = 0; k < nops; ++k) {
    p.operand_dtypes.push_back(get_dtype(c, "an operand's dtype"));
    p.operand_broadcast.push_back(get_bool(c, "an operand's broadcast flag"));
  }
  const uint32_t n = c.count("a program's instruction count", 26);
  p.code.resize(n);
  for (Instr& in : p.code) {
    const size_t kat = c.pos;
    const uint8_t kind = c.u8("an instruction's kind");
    if (kind > static_cast<uint8_t>(Instr::Kind::store)) c.bad_at(kat, "unknown instruction kind " + std::to_string(kind));
    in.kind = static_cast<Instr::Kind>(kind);
    in.dtype = get_dtype(c, "an instruction's dtype");
    in.a = c.i32("an instruction's register a");
    in.b = c.i32("an instruction's register b");
    in.c = c.i32("an instruction's register c");
    in.arg = c.i32("an instruction's operand");
    in.imm = get_f64(c, "an instruction's constant");
    if (in.kind != Instr::Kind::op) continue;
    const size_t oat = c.pos;
    const std::string_view op = c.str_view("an op name");
    try {
      in.op = op_from_name(op);
    } catch (const Error&) {
      c.bad_at(oat, "unknown op '" + std::string(op.substr(0, 40)) + "'");
    }
    const uint32_t ni = c.count("an attribute's ints", 8);
    in.attrs.ints.resize(ni);
    for (int64_t& v : in.attrs.ints) v = c.i64("an attribute int");
    in.attrs.axis = c.i64("an attribute's axis");
    in.attrs.scalar = get_f64(c, "an attribute's scalar");
    in.attrs.flag = get_bool(c, "an attribute's flag");
    in.attrs.dtype = get_dtype(c, "an attribute's dtype");
  }
  return p;
}

// A value id read from the section, in range of the graph.
// (the messages out of line: the checks run for every id read)
[[noreturn, gnu::cold, gnu::noinline]] void value_out_of_range(const Cursor& c, size_t at, const char* field, int32_t v,
                                                              size_t nv) {
  c.bad_at(at, std::string(field) + ": value " + std::to_string(v) + " is out of range (the graph has " +
                   std::to_string(nv) + " values)");
}
[[noreturn, gnu::cold, gnu::noinline]] void node_out_of_range(const Cursor& c, size_t at, const char* field, uint32_t n,
                                                             size_t nn) {
  c.bad_at(at, std::string(field) + ": node " + std::to_string(n) + " is out of range (the graph has " +
                   std::to_string(nn) + " nodes)");
}
inline int32_t get_value(Cursor& c, size_t nv, const char* field, bool allow_none = false) {
  const size_t at = c.pos;
  const int32_t v = c.i32(field);
  if (allow_none && v == -1) return v;
  if (v < 0 || static_cast<size_t>(v) >= nv) [[unlikely]]
    value_out_of_range(c, at, field, v, nv);
  return v;
}
inline int32_t get_node(Cursor& c, size_t nn, const char* field) {
  const size_t at = c.pos;
  const uint32_t n = c.u32(field);
  if (n >= nn) [[unlikely]]
    node_out_of_range(c, at, field, n, nn);
  return static_cast<int32_t>(n);
}

// A graph constant's bytes (a realized tensor read where it is, without
// Tensor::data_ptr's checks).
const void* constant_bytes(const Tensor& t) {
  if (!t.is_realized()) return t.data_ptr();
  const detail::TensorImpl& i = t.impl();
  return static_cast<const char*>(i.storage.data()) + i.offset * static_cast<int64_t>(size_of(i.dtype));
}

struct Program {
  std::shared_ptr<const ElementwiseProgram> p;
  std::shared_ptr<const std::string> text;           // p->str(), made on first use (the steps share it)
  std::shared_ptr<codegen::ElementwiseKernel> kernel;  // made on first use by a fused or fused_row step
};

// The epilogue GEMMs of gemm_fused steps, one per distinct key.
struct EpilogueGemm {
  uint32_t program;
  int64_t m, n, k, lda, ldb;
  bool ta, tb;
  int column_sums;
  size_t nops;
  std::array<codegen::EpiLayout, codegen::kMaxFusedOperands> layouts;
  std::array<int64_t, codegen::kMaxFusedOperands> lds;
  std::shared_ptr<const codegen::SmallGemm> gemm;
};

std::optional<codegen::EpiLayout> epi_layout(const TensorType& t, int64_t m, int64_t n) {
  if (t.dtype != DType::float32) return std::nullopt;
  const Shape& s = t.shape;
  if (s.size() == 2 && s[0] == m && s[1] == n) return codegen::EpiLayout::matrix;
  if (checked_numel(s) == 1) return codegen::EpiLayout::scalar;
  if ((s.size() == 1 && s[0] == n) || (s.size() == 2 && s[0] == 1 && s[1] == n)) return codegen::EpiLayout::row;
  return std::nullopt;
}

int64_t numel_of(const TensorType& t) {
  int64_t n = 1;
  for (int64_t e : t.shape) n *= e;  // verified graph: no overflow (checked by build())
  return n;
}

class PlanReader {
 public:
  PlanReader(std::string_view payload, std::shared_ptr<const Graph> graph, const KernelOptions& opt,
             const codegen::CodeImages* images, const std::string& what)
      : c_{payload, 0, "PLAN", what},
        graph_(std::move(graph)),
        g_(*graph_),
        opt_(opt),
        images_(images),
        target_(codegen::detect_cpu_target()),
        kernels_(target_, opt, images),
        nn_(g_.num_nodes()),
        nv_(g_.num_values()) {}

  std::shared_ptr<codegen::ExecutionPlan> read();

 private:
  Cursor c_;
  std::shared_ptr<const Graph> graph_;
  const Graph& g_;
  KernelOptions opt_;
  const codegen::CodeImages* images_;
  codegen::CpuTarget target_;
  codegen::KernelSource kernels_;
  size_t nn_, nv_;
  std::vector<Program> programs_;
  std::vector<EpilogueGemm> gemms_;
  std::vector<std::array<int64_t, 8>> seeded_;  // GEMM problems offered to eager's cache
  codegen::GemmCallMemo gemm_memo_;             // the last GEMM call planned (steps repeat one problem)

  const codegen::CodeImage* image(const std::string& text) const {
    if (!images_ || opt_.dump) return nullptr;
    auto it = images_->find(text);
    return it == images_->end() ? nullptr : &it->second;
  }
  void gemm_part(PlanStep& s, size_t at);
  void fused_part(PlanStep& s, size_t at, bool loop);
  void epilogue_gemm(PlanStep& s, size_t at, int32_t column_sum_node);
  [[noreturn]] void bad_step(size_t at, size_t k, const std::string& msg) const {
    c_.bad_at(at, "step " + std::to_string(k) + ": " + msg);
  }
  size_t step_ = 0;
  std::vector<std::pair<int32_t, int32_t>> made_;  // fused_part's instruction check: (value, register)
};

void PlanReader::gemm_part(PlanStep& s, size_t at) {
  const int32_t node = get_node(c_, nn_, "a GEMM's matmul node");
  codegen::GemmOperands ops;
  ops.base[0] = get_value(c_, nv_, "a GEMM's operand A");
  ops.base[1] = get_value(c_, nv_, "a GEMM's operand B");
  ops.transposed[0] = get_bool(c_, "a GEMM's transpose flag of A");
  ops.transposed[1] = get_bool(c_, "a GEMM's transpose flag of B");
  const bool small = get_bool(c_, "a GEMM's generated-GEMM flag");
  int64_t call[6] = {};
  bool tt[2] = {false, false};
  if (small) {
    for (int64_t& v : call) v = c_.i64("a GEMM's size or leading dimension");
    tt[0] = get_bool(c_, "a GEMM's ta");
    tt[1] = get_bool(c_, "a GEMM's tb");
    for (int64_t v : call)
      if (v < 1 || v > (int64_t(1) << 20)) bad_step(at, step_, "a GEMM size or leading dimension " + std::to_string(v));
    // eager's generated GEMM from the CODE section, so planning the call
    // generates nothing (once per problem)
    const std::array<int64_t, 8> problem{call[0], call[1], call[2], call[3], call[4], call[5], tt[0], tt[1]};
    if (std::find(seeded_.begin(), seeded_.end(), problem) == seeded_.end()) {
      seeded_.push_back(problem);
      codegen::seed_eager_small_gemm(call[0], call[1], call[2], tt[0], tt[1], call[3], call[4], call[5],
                                     [&](const codegen::SmallGemmKey& key) { return image(key.str()); });
    }
  }
  if (!codegen::restore_gemm_step(g_, node, ops, opt_, s, &gemm_memo_))
    bad_step(at, step_, "node " + std::to_string(node) + " with these operands is not a GEMM this kiln runs as one call");
  const cpu::GemmCall& gc = s.gemm;
  if (small && (gc.m != call[0] || gc.n != call[1] || gc.k != call[2] || gc.lda != call[3] || gc.ldb != call[4] ||
                gc.ldc != call[5] || gc.ta != tt[0] || gc.tb != tt[1]))
    bad_step(at, step_, "the GEMM call differs from the one this graph's matmul makes");
}

void PlanReader::fused_part(PlanStep& s, size_t at, bool loop) {
  const size_t pat = c_.pos;
  const uint32_t pi = c_.u32("a step's program");
  if (pi >= programs_.size())
    c_.bad_at(pat, "a step's program: " + std::to_string(pi) + " of " + std::to_string(programs_.size()));
  Program& prog = programs_[pi];
  const ElementwiseProgram& p = *prog.p;
  const uint32_t nops = c_.count("a step's operand count", 4);
  if (nops != p.operand_dtypes.size())
    bad_step(at, step_, std::to_string(nops) + " operands for a program of " + std::to_string(p.operand_dtypes.size()));
  s.operands.resize(nops);
  for (int32_t& v : s.operands) v = get_value(c_, nv_, "a step's operand");
  s.num_outputs = static_cast<int>(c_.u32("a step's output count"));
  if (s.num_outputs != p.num_outputs)
    bad_step(at, step_, std::to_string(s.num_outputs) + " outputs for a program of " + std::to_string(p.num_outputs));
  const uint32_t nt = c_.count("a step's constant table", 8);
  if (nt != static_cast<uint32_t>(p.table_slots))
    bad_step(at, step_, std::to_string(nt) + " table constants for a program of " + std::to_string(p.table_slots));
  s.imm_table.resize(nt);
  for (uint64_t& b : s.imm_table) b = c_.u64("a table constant");
  const uint32_t ng = c_.count("a step's fused node count", 4);
  s.group_nodes.resize(ng);
  for (int32_t& n : s.group_nodes) n = get_node(c_, nn_, "a fused node");
  // The program is checked against the graph: its op instructions are the
  // fused elementwise nodes' ops, in order (one per node, as the lowering
  // writes them: jit/cpu_lowering.cpp, build_fused_step), each with the
  // node's attributes and result dtype, reading what the node reads: a
  // loaded operand that is the node's input value, a table constant with the
  // bits of the graph's one-element constant it reads, or the register of
  // the fused node that made it. So a program or a constant edited in the
  // file (its checksums recomputed) is refused instead of computing what the
  // graph does not say. One pass, no allocation per step (the reader's time
  // is budgeted: bench_export's BM_read_1000_code_plan).
  {
    std::vector<std::pair<int32_t, int32_t>>& made = made_;  // (value, register) of the nodes met
    made.clear();
    size_t next = 0;
    auto next_op = [&]() -> int32_t {
      while (next < p.code.size() && p.code[next].kind != Instr::Kind::op) ++next;
      return next < p.code.size() ? static_cast<int32_t>(next++) : -1;
    };
    for (int32_t ni : s.group_nodes) {
      const Node& n = g_.node(static_cast<size_t>(ni));
      if (n.kind != NodeKind::op) continue;
      const OpCategory cat = op_info(n.op).category;
      if (cat != OpCategory::Unary && cat != OpCategory::Binary && cat != OpCategory::Ternary) continue;  // a GEMM, a column sum
      const int32_t r = next_op();
      auto who = [&] { return "fused node " + std::to_string(ni) + " (" + std::string(op_name(n.op)) + ")"; };
      if (r < 0) bad_step(at, step_, "the program has no instruction for " + who());
      const Instr& in = p.code[static_cast<size_t>(r)];
      if (in.op != n.op || !(in.attrs == n.attrs) || in.dtype != g_.type(n.outputs[0]).dtype)
        bad_step(at, step_, "instruction " + std::to_string(r) + " (" + std::string(op_name(in.op)) +
                                ") is not " + who() + " with its attributes and dtype");
      const int32_t regs[3] = {in.a, in.b, in.c};
      for (size_t k = 0; k < n.inputs.size() && k < 3; ++k) {
        const int32_t v = n.inputs[k], reg = regs[k];
        bool ok = reg >= 0 && reg < r;
        if (ok) {
          const Instr& src = p.code[static_cast<size_t>(reg)];
          switch (src.kind) {
            case Instr::Kind::load: ok = s.operands[static_cast<size_t>(src.arg)] == v; break;
            case Instr::Kind::imm: {
              const Node& prod = g_.node(static_cast<size_t>(g_.producer(v)));
              if (prod.kind != NodeKind::constant || !g_.type(v).shape.empty()) {
                ok = false;
                break;
              }
              uint64_t bits = 0;
              std::memcpy(&bits, constant_bytes(prod.data), size_of(g_.type(v).dtype));
              const uint64_t got = s.imm_table[static_cast<size_t>(src.arg)];
              if (got != bits) {
                char want_s[24], got_s[24];
                std::snprintf(want_s, sizeof want_s, "0x%llx", static_cast<unsigned long long>(bits));
                std::snprintf(got_s, sizeof got_s, "0x%llx", static_cast<unsigned long long>(got));
                bad_step(at, step_, "table constant " + std::to_string(src.arg) + " is " + got_s + ", but " + who() +
                                        " reads the graph's constant %" + std::to_string(v) + " (" +
                                        g_.type(v).str() + ") with the bits " + want_s);
              }
              break;
            }
            case Instr::Kind::op:
              ok = std::find(made.begin(), made.end(), std::make_pair(v, reg)) != made.end();
              break;
            case Instr::Kind::store: ok = false; break;
          }
        }
        if (!ok)
          bad_step(at, step_, "instruction " + std::to_string(r) + " input " + std::to_string(k) +
                                  " does not read what " + who() + " reads (value %" + std::to_string(v) + ")");
      }
      made.emplace_back(n.outputs[0], r);
    }
    if (next_op() >= 0) bad_step(at, step_, "the program has more op instructions than the step's fused nodes");
    // each output is stored from the register of the fused node that makes it
    for (size_t i = 0; i < p.code.size(); ++i) {
      const Instr& st = p.code[i];
      if (st.kind != Instr::Kind::store) continue;
      const int32_t v = s.operands[static_cast<size_t>(st.arg)];
      if (std::find(made.begin(), made.end(), std::make_pair(v, st.a)) == made.end())
        bad_step(at, step_, "instruction " + std::to_string(i) + " stores output " + std::to_string(st.arg) +
                                " (value %" + std::to_string(v) + ") from a register no fused node making it wrote");
    }
  }
  for (size_t k = 0; k < nops; ++k)
    if (g_.type(s.operands[k]).dtype != p.operand_dtypes[k])
      bad_step(at, step_, "operand " + std::to_string(k) + " (value %" + std::to_string(s.operands[k]) + ") is " +
                              std::string(name(g_.type(s.operands[k]).dtype)) + ", the program reads " +
                              std::string(name(p.operand_dtypes[k])));
  s.elementwise = prog.p;
  if (!prog.text) prog.text = std::make_shared<const std::string>(p.str());
  s.program = prog.text;
  if (!loop) return;
  // outputs have the loop's shape; inputs broadcast to it
  const Shape& shape = g_.type(s.operands[0]).shape;
  for (size_t k = 0; k < nops; ++k) {
    const Shape& os = g_.type(s.operands[k]).shape;
    bool ok = static_cast<int>(k) < s.num_outputs ? os == shape : os.size() <= shape.size();
    for (size_t d = 0; ok && d < os.size(); ++d) {
      const int64_t e = shape[shape.size() - os.size() + d];
      ok = os[d] == e || os[d] == 1;
    }
    if (!ok)
      bad_step(at, step_, "operand " + std::to_string(k) + " of shape " + shape_str(os) + " does not fit the loop over " +
                              shape_str(shape));
  }
  s.loop = codegen::fused_loop(g_, s.operands, shape);
  const bool one_element = s.loop.numel == 1;
  for (size_t k = 0; k < nops; ++k)
    if ((!one_element && s.loop.stride[k].back() == 0) != p.operand_broadcast[k])
      bad_step(at, step_, "operand " + std::to_string(k) + "'s broadcasting differs from its program's");
  if (s.kind == PlanStep::Kind::fused)  // (a fused_row step keeps its row op's)
    for (int j = 0; j < s.num_outputs; ++j) s.out_layouts.push_back(g_.type(s.operands[j]).layout());
  if (!prog.kernel) prog.kernel = kernels_.get(p, *prog.text);
  s.kernel = prog.kernel;
}

void PlanReader::epilogue_gemm(PlanStep& s, size_t at, int32_t column_sum_node) {
  const cpu::GemmCall& c = s.gemm;
  if (c.f64 || c.bias) bad_step(at, step_, "a GEMM with an epilogue must be a float32 GEMM without bias");
  const int32_t product = s.gemm_base[0] < 0 ? -1 : g_.node(s.node).outputs[0];
  const size_t nops = s.operands.size();  // <= kMaxFusedOperands (program_problem)
  std::array<codegen::EpiLayout, codegen::kMaxFusedOperands> layouts{};
  std::array<int64_t, codegen::kMaxFusedOperands> lds{};
  int found = -1;
  for (size_t j = 0; j < nops; ++j) {
    const int32_t v = s.operands[j];
    if (static_cast<int>(j) >= s.num_outputs && v == product && static_cast<int>(j) == s.product_operand) {
      found = static_cast<int>(j);
      layouts[j] = codegen::EpiLayout::product;
      continue;
    }
    const std::optional<codegen::EpiLayout> l = epi_layout(g_.type(v), c.m, c.n);
    if (!l || (static_cast<int>(j) < s.num_outputs && *l != codegen::EpiLayout::matrix))
      bad_step(at, step_, "operand " + std::to_string(j) + " cannot be read by the GEMM's epilogue");
    layouts[j] = *l;
    lds[j] = *l == codegen::EpiLayout::matrix ? c.n : 0;
  }
  if (found < 0) bad_step(at, step_, "the product operand " + std::to_string(s.product_operand) + " is not the matmul's result");
  // column sums made in the epilogue: of the output the sum node reads, the
  // m x n result's rows (a column_sum step's node)
  int column_sums = -1;
  if (column_sum_node >= 0) {
    PlanStep cs;
    const Node& n = g_.node(column_sum_node);
    if (!codegen::restore_column_sum_step(g_, column_sum_node, cs) || cs.out_layouts[0].dtype != DType::float32 ||
        cs.rows != c.m || cs.row_n != c.n)
      bad_step(at, step_, "node " + std::to_string(column_sum_node) + " is not a float32 sum over axis 0 of the " +
                              std::to_string(c.m) + " x " + std::to_string(c.n) + " result");
    for (int j = 0; j < s.num_outputs; ++j)
      if (s.operands[static_cast<size_t>(j)] == n.inputs[0]) column_sums = j;
    if (column_sums < 0) bad_step(at, step_, "the column sums' node does not read an output of the step");
    s.column_sum_output = n.outputs[0];
  }
  const uint32_t pi = static_cast<uint32_t>(std::find_if(programs_.begin(), programs_.end(), [&](const Program& p) {
                                              return p.p == s.elementwise;
                                            }) - programs_.begin());
  for (const EpilogueGemm& e : gemms_)
    if (e.program == pi && e.m == c.m && e.n == c.n && e.k == c.k && e.lda == c.lda && e.ldb == c.ldb && e.ta == c.ta &&
        e.tb == c.tb && e.column_sums == column_sums && e.nops == nops && e.layouts == layouts && e.lds == lds) {
      s.small_gemm = e.gemm;
      return;
    }
  codegen::SmallGemmKey key = codegen::plain_gemm_key(target_, c.m, c.n, c.k, c.ta, c.tb, c.lda, c.ldb, c.ldc);
  key.epilogue = *s.elementwise;
  key.layouts.assign(layouts.begin(), layouts.begin() + static_cast<std::ptrdiff_t>(nops));
  key.lds.assign(lds.begin(), lds.begin() + static_cast<std::ptrdiff_t>(nops));
  key.column_sums = column_sums;
  const std::string why = codegen::small_gemm_why_not(key);
  if (!why.empty()) bad_step(at, step_, "no generated GEMM for it: " + why);
  std::shared_ptr<const codegen::SmallGemm> gen;
  if (const codegen::CodeImage* im = image(key.str())) {
    try {
      gen = codegen::load_small_gemm(key, *im);
    } catch (const Error&) {
      // a malformed image: generated instead
    }
  }
  if (!gen) gen = codegen::generate_small_gemm(key, opt_.dump);
  gemms_.push_back({pi, c.m, c.n, c.k, c.lda, c.ldb, c.ta, c.tb, column_sums, nops, layouts, lds, gen});
  s.small_gemm = std::move(gen);
}

std::shared_ptr<codegen::ExecutionPlan> PlanReader::read() {
  Cursor& c = c_;
  c.u32("the layout version");  // plan_mismatch checked version and key
  c.str_view("the plan key");
  {
    const size_t at = c.pos;
    const uint32_t nn = c.u32("the node count");
    const uint32_t nv = c.u32("the value count");
    if (nn != nn_ || nv != nv_)
      c.bad_at(at, "the plan is for a graph of " + std::to_string(nn) + " nodes and " + std::to_string(nv) +
                       " values, the file's graph has " + std::to_string(nn_) + " and " + std::to_string(nv_));
  }
  const uint32_t np = c.count("the program count", 17);
  programs_.resize(np);
  for (uint32_t i = 0; i < np; ++i) {
    const size_t at = c.pos;
    ElementwiseProgram p = get_program(c);
    const std::string why = program_problem(p, target_);
    if (!why.empty()) c.bad_at(at, "program " + std::to_string(i) + ": " + why);
    programs_[i].p = std::make_shared<const ElementwiseProgram>(std::move(p));
  }
  const uint32_t ns = c.count("the step count", 5);
  codegen::ExecutionPlan::Parts parts;
  parts.steps.resize(ns);
  std::vector<size_t> step_at(ns);
  for (uint32_t k = 0; k < ns; ++k) {
    step_ = k;
    PlanStep& s = parts.steps[k];
    const size_t at = step_at[k] = c.pos;
    const uint8_t kind = c.u8("a step's kind");
    if (kind > static_cast<uint8_t>(PlanStep::Kind::gemm_fused)) c.bad_at(at, "unknown step kind " + std::to_string(kind));
    switch (static_cast<PlanStep::Kind>(kind)) {
      case PlanStep::Kind::op: {
        const int32_t node = get_node(c, nn_, "an op step's node");
        if (!codegen::restore_op_step(g_, node, s)) bad_step(at, k, "node " + std::to_string(node) + " is not an op");
        break;
      }
      case PlanStep::Kind::column_sum: {
        const int32_t node = get_node(c, nn_, "a column sum's node");
        if (!codegen::restore_column_sum_step(g_, node, s))
          bad_step(at, k, "node " + std::to_string(node) + " is not a column sum this kiln runs as one");
        break;
      }
      case PlanStep::Kind::row: {
        const int32_t node = get_node(c, nn_, "a row step's node");
        const size_t pat = c.pos;
        const int32_t pair = c.i32("a row step's paired node");
        if (pair < -1 || (pair >= 0 && static_cast<size_t>(pair) >= nn_))
          c.bad_at(pat, "a row step's paired node " + std::to_string(pair) + " is out of range");
        if (!codegen::restore_row_step(g_, node, pair, opt_, s))
          bad_step(at, k, "node " + std::to_string(node) + (pair >= 0 ? " paired with node " + std::to_string(pair) : "") +
                              " is not a row op this kiln runs with a row kernel");
        break;
      }
      case PlanStep::Kind::gemm: {
        gemm_part(s, at);
        const int32_t bias = get_value(c, nv_, "a GEMM's bias", true);
        const int32_t out = get_value(c, nv_, "a GEMM's output");
        const TensorType& prod = g_.type(g_.node(s.node).outputs[0]);
        if (bias >= 0) {
          const TensorType& b = g_.type(bias);
          const int64_t n = s.gemm.n;
          if (b.dtype != prod.dtype || !((b.shape.size() == 1 && b.shape[0] == n) ||
                                         (b.shape.size() == 2 && b.shape[0] == 1 && b.shape[1] == n)))
            bad_step(at, k, "the bias " + b.str() + " is not a row of the product " + prod.str());
          if (!(g_.type(out) == prod)) bad_step(at, k, "the output " + g_.type(out).str() + " is not of the product's type");
          s.output = out;
          s.inputs.push_back(bias);
          s.gemm.bias = true;
        } else if (out != s.output) {
          bad_step(at, k, "the output of a GEMM without bias is the matmul's");
        }
        break;
      }
      case PlanStep::Kind::fused: {
        s.kind = PlanStep::Kind::fused;
        fused_part(s, at, true);
        const size_t rat = c.pos;
        s.reduce_operand = c.i32("a step's reduced operand");
        if (s.reduce_operand < -1 || s.reduce_operand >= s.num_outputs)
          c.bad_at(rat, "a step's reduced operand " + std::to_string(s.reduce_operand) + " of " +
                            std::to_string(s.num_outputs) + " outputs");
        if (s.operands.size() + !s.imm_table.empty() > static_cast<size_t>(codegen::kMaxFusedOperands))
          bad_step(at, k, "more operands than a kernel takes");
        if (s.reduce_operand >= 0) {
          const int32_t rn = get_node(c, nn_, "a step's reduction node");
          s.reduce_nout = c.i64("a reduction's row count");
          s.reduce_nred = c.i64("a reduction's row length");
          const Node& r = g_.node(rn);
          const int32_t x = s.operands[static_cast<size_t>(s.reduce_operand)];
          if (r.kind != NodeKind::op || r.inputs.size() != 1 || r.outputs.size() != 1 || r.inputs[0] != x ||
              !cpu::can_reduce_produced(r.op))
            bad_step(at, k, "node " + std::to_string(rn) + " is not a reduction of the step's operand " +
                                std::to_string(s.reduce_operand));
          const int64_t nx = numel_of(g_.type(x)), ny = numel_of(g_.type(r.outputs[0]));
          if (s.reduce_nout < 0 || s.reduce_nred < 0 || s.reduce_nout != ny ||
              (s.reduce_nred == 0 ? nx != 0 : nx / s.reduce_nred != s.reduce_nout || nx % s.reduce_nred != 0))
            bad_step(at, k, "a reduction of " + std::to_string(s.reduce_nout) + " rows of " +
                                std::to_string(s.reduce_nred) + " over " + std::to_string(nx) + " elements into " +
                                std::to_string(ny));
          s.reduce_op = r.op;
          s.reduce_output = r.outputs[0];
        }
        break;
      }
      case PlanStep::Kind::fused_row: {
        const int32_t node = get_node(c, nn_, "a fused row step's node");
        if (!codegen::restore_row_step(g_, node, -1, opt_, s))
          bad_step(at, k, "node " + std::to_string(node) + " is not a row op this kiln runs with a row kernel");
        s.kind = PlanStep::Kind::fused_row;
        fused_part(s, at, true);
        if (s.num_outputs != 1 || s.operands[0] != s.inputs[0])
          bad_step(at, k, "the fused group must compute the row op's input, and only it");
        if (s.operands.size() + !s.imm_table.empty() + s.inputs.size() - 1 > static_cast<size_t>(codegen::kMaxFusedOperands))
          bad_step(at, k, "more operands than a kernel takes");
        break;
      }
      case PlanStep::Kind::gemm_fused: {
        gemm_part(s, at);
        s.product_operand = c.i32("a step's product operand");
        s.kind = PlanStep::Kind::gemm_fused;
        s.output = -1;
        fused_part(s, at, false);
        const size_t cat = c.pos;
        const int32_t column_sum_node = c.i32("a step's column-sum node");
        if (column_sum_node < -1 || column_sum_node >= static_cast<int64_t>(nn_))
          c.bad_at(cat, "a step's column-sum node " + std::to_string(column_sum_node) + " is out of range");
        if (s.operands.size() + !s.imm_table.empty() + 2 + (column_sum_node >= 0) >
            static_cast<size_t>(codegen::kMaxFusedOperands))
          bad_step(at, k, "more operands than a GEMM with an epilogue takes");
        epilogue_gemm(s, at, column_sum_node);
        break;
      }
    }
    s.kind = static_cast<PlanStep::Kind>(kind);
  }
  // the memory plan
  const size_t aat = c.pos;
  const uint64_t arena = c.u64("the arena size");
  const uint32_t na = c.count("the arena slot count", 12);
  parts.arena_offset.assign(nv_, -1);
  std::vector<size_t> slot_at(nv_, 0);
  uint64_t room = 0;  // what the slots could need at most: the sum of their sizes
  for (uint32_t i = 0; i < na; ++i) {
    const size_t at = c.pos;
    const int32_t v = static_cast<int32_t>(c.u32("an arena slot's value"));
    const uint64_t off = c.u64("an arena slot's offset");
    if (v < 0 || static_cast<size_t>(v) >= nv_) c.bad_at(at, "an arena slot for value " + std::to_string(v) + " out of range");
    const TensorType& t = g_.type(v);
    const uint64_t numel = static_cast<uint64_t>(numel_of(t));
    if (numel > (uint64_t(1) << 56)) c.bad_at(at, "an arena slot for value %" + std::to_string(v) + " of " + t.str());
    const uint64_t bytes = numel * size_of(t.dtype);
    if (parts.arena_offset[static_cast<size_t>(v)] >= 0) c.bad_at(at, "value %" + std::to_string(v) + " has two arena slots");
    if (bytes == 0 || off % 64 != 0 || off > arena || bytes > arena - off)
      c.bad_at(at, "value %" + std::to_string(v) + " (" + std::to_string(bytes) + " bytes) at arena offset " +
                       std::to_string(off) + " does not fit an arena of " + std::to_string(arena) + " bytes");
    room += (bytes + 63) / 64 * 64;
    parts.arena_offset[static_cast<size_t>(v)] = static_cast<int64_t>(off);
    slot_at[static_cast<size_t>(v)] = at;
  }
  if (arena > room) c.bad_at(aat, "an arena of " + std::to_string(arena) + " bytes for slots of " + std::to_string(room));
  parts.arena_bytes = static_cast<size_t>(arena);
  c.end();

  // Values are read only once written; each is written once; the arena
  // holds only values a (non-view) step writes and no graph output; every
  // graph output is written. Release points as the memory plan makes them.
  std::vector<char> is_output(nv_, 0);
  for (int32_t v : g_.output_ids()) is_output[static_cast<size_t>(v)] = 1;
  std::vector<int> def(nv_, -1), last_read(nv_, -1);
  std::vector<char> ready(nv_, 0);
  for (const Node& n : g_.nodes())
    if (n.kind == NodeKind::input || n.kind == NodeKind::weight || n.kind == NodeKind::constant)
      for (int32_t v : n.outputs) ready[static_cast<size_t>(v)] = 1;
  for (uint32_t k = 0; k < ns; ++k) {
    const PlanStep& s = parts.steps[k];
    codegen::for_each_read(s, [&](int32_t v) {
      if (!ready[static_cast<size_t>(v)]) bad_step(step_at[k], k, "reads value %" + std::to_string(v) + " before it is written");
      last_read[static_cast<size_t>(v)] = static_cast<int>(k);
    });
    const bool view = codegen::step_is_view(g_, s);
    codegen::for_each_write(s, [&](int32_t v) {
      if (ready[static_cast<size_t>(v)]) bad_step(step_at[k], k, "writes value %" + std::to_string(v) + " a second time");
      if (parts.arena_offset[static_cast<size_t>(v)] >= 0 && (view || is_output[static_cast<size_t>(v)]))
        c.bad_at(slot_at[static_cast<size_t>(v)], "value %" + std::to_string(v) + " has an arena slot but is " +
                                                      (view ? "a view" : "a graph output"));
      ready[static_cast<size_t>(v)] = 1;
      def[static_cast<size_t>(v)] = static_cast<int>(k);
    });
  }
  for (size_t v = 0; v < nv_; ++v)
    if (parts.arena_offset[v] >= 0 && def[v] < 0)
      c.bad_at(slot_at[v], "value %" + std::to_string(v) + " has an arena slot but no step writes it");
  for (int32_t v : g_.output_ids())
    if (!ready[static_cast<size_t>(v)]) c.bad_at(aat, "graph output value %" + std::to_string(v) + " is never written");
  parts.release_after.assign(ns, {});
  for (size_t v = 0; v < nv_; ++v)
    if (def[v] >= 0 && !is_output[v]) parts.release_after[static_cast<size_t>(std::max(def[v], last_read[v]))].push_back(static_cast<int32_t>(v));
  // No two values live at once share arena bytes (an edited offset would
  // make one step overwrite what a later step still reads: a wrong answer,
  // silently). Liveness as the memory plan's, with the pairs the plan will
  // run at once (ExecutionPlan marks them the same way).
  {
    codegen::mark_adjacent_pairs(parts.steps, is_output, codegen::interop_enabled());  // the plan marks them again
    if (const auto clash = codegen::find_arena_overlap(g_, codegen::memory_step_values(g_, parts.steps), is_output,
                                                       parts.arena_offset)) {
      const auto [a, b] = *clash;
      const auto slot = [&](int32_t v) {
        const TensorType& t = g_.type(v);
        return "%" + std::to_string(v) + " (" + t.str() + ", arena offset " +
               std::to_string(parts.arena_offset[static_cast<size_t>(v)]) + ")";
      };
      c.bad_at(slot_at[static_cast<size_t>(b)],
               "values " + slot(a) + " and " + slot(b) + " are live at the same step and overlap in the arena");
    }
  }
  return std::make_shared<codegen::ExecutionPlan>(graph_, opt_, std::move(parts));
}

}  // namespace

std::shared_ptr<codegen::ExecutionPlan> decode_plan(std::string_view payload, std::shared_ptr<const Graph> graph,
                                                    const KernelOptions& options, const codegen::CodeImages* images,
                                                    const std::string& what) {
  PlanReader r(payload, std::move(graph), options, images, what);
  return r.read();
}

}  // namespace kiln::mef
