// kiln (internal): an executable CPU plan for one optimised, flat graph (no
// call nodes): a list of steps, each either a fused elementwise group running
// generated machine code, a bound BLAS call or row kernel, or one op running
// its eager CPU kernel. Built in three parts: fusion grouping (fusion.h,
// device-neutral), the CPU lowering of its groups to these steps
// (cpu_lowering.h), and the memory plan of the steps (memory_plan.h,
// device-neutral).
#pragma once
#include <array>
#include <atomic>
#include <cstdint>
#include <memory>
#include <mutex>
#include <span>
#include <stdexcept>
#include <string>
#include <vector>

#include "../backends/cpu/matmul.h"
#include "../backends/cpu/strided_loop_types.h"  // the loop structure only: no OpenMP runner
#include "../trace/graph.h"
#include "elementwise_program.h"
#include "inference_session.h"
#include "kernel_source.h"
#include "tensor_refs.h"

namespace kiln::codegen {

/// Up to this many operands (outputs + inputs) per fused group.
inline constexpr int kMaxFusedOperands = 8;

class RowKernel;  // backends/cpu/jit/row_kernels.h
class SmallGemm;  // backends/cpu/jit/small_gemm.h

/// A fused step's constant table (the bits of its program's table slots):
/// a vector of uint64_t that keeps up to 2 entries inside the step (most
/// programs read one or two constants), so restoring a plan from a MEF file
/// and freeing it cost no allocation per step for it. Same size as a
/// std::vector. Its data()
/// moves with the step (bindings take it once the plan's steps are placed).
using ImmTable = SmallVector<uint64_t, 2>;

struct PlanStep {
  /// op: the eager kernel; fused: a generated elementwise group; row: a
  /// RowNorm op on float32 rows running its generated row kernel; gemm: a
  /// 2-d float matmul bound to one BLAS call (inputs are the operands'
  /// contiguous bases: a transposing permute is folded into the call);
  /// column_sum: a float sum over axis 0 of a [rows, cols] value
  /// (cpu::column_sum, reduce()'s bits without its planning); fused_row: a
  /// row step whose input x is the one output of a fused elementwise group
  /// that nothing else reads (attention's softmax(scores * scale + mask), a
  /// layer_norm of a residual sum): the group's kernel computes x a block
  /// of rows at a time into a per-thread scratch that stays in L1, the row
  /// kernel reads it from there, and x is never stored. Each part runs the
  /// code it would run as a step of its own, so the bits are the unfused
  /// plan's (and eager's in strict mode).
  /// gemm_fused: a float32 gemm step whose product only a fused group read,
  /// merged with that group (jit/plan_small_gemm.h): the generated GEMM
  /// `small_gemm` runs the group's program as its epilogue on each tile in
  /// registers; inputs = {A's base, B's base}, the fused fields describe
  /// the group, operand `product_operand` is the product (never stored).
  enum class Kind : uint8_t { op, fused, row, gemm, column_sum, fused_row, gemm_fused };
  Kind kind = Kind::op;
  /// The node the step runs: op and column_sum steps their node, row and
  /// fused_row steps the row op (a pair's softmax), gemm and gemm_fused steps
  /// the matmul; -1 for fused steps (a MEF file's PLAN section names it).
  int32_t node = -1;
  /// gemm and gemm_fused steps: the value each GEMM operand reads and whether
  /// the call transposes it (a folded permute; jit/fusion.h GemmOperands).
  int32_t gemm_base[2] = {-1, -1};
  bool gemm_transposed[2] = {false, false};
  // op step (and row step: op, attrs, inputs, output; fused_row: the row
  // op's, its x = inputs[0] computed by the fused fields below, operand 0)
  OpId op{};
  Attrs attrs;
  // Value-id lists are ValueLists (trace/graph.h): up to 4 ids inside the
  // step, so a plan's steps own few heap blocks (restoring a plan from a MEF
  // file, and freeing it, costs an allocation per list otherwise).
  ValueList inputs;   // value ids
  int32_t output = -1;
  // fused step: operands = outputs first, then inputs (value ids)
  ValueList operands;
  int num_outputs = 0;
  std::vector<TensorLayout> out_layouts;
  std::shared_ptr<ElementwiseKernel> kernel;
  ValueList group_nodes;             // node indices fused (for dumps)
  ImmTable imm_table;                // the program's constant table (ElementwiseProgram::table_slots)
  // The printed program (dumps; the key of its machine code in a MEF file's
  // CODE section), shared by the steps that run the same program.
  std::shared_ptr<const std::string> program;
  std::shared_ptr<const ElementwiseProgram> elementwise;  // the program itself (a gemm epilogue may take it)
  std::shared_ptr<const SmallGemm> small_gemm;            // gemm_fused: the generated GEMM with its epilogue
  int product_operand = -1;                               // gemm_fused: the operand that is the product
  // gemm_fused: the value a sum over axis 0 of one of its outputs makes
  // (the key's column_sums says which), summed in the epilogue (its
  // column_sum step merged in: jit/plan_small_gemm.h); -1: none
  int32_t column_sum_output = -1;
  // Loop structure, fixed at plan time (shapes are static): one per operand count.
  cpu::StridedLoop<kMaxFusedOperands> loop;
  // row step: the kernel (shared with eager's cache), rows of row_n elements
  std::shared_ptr<const RowKernel> row_kernel;
  int64_t rows = 0, row_n = 0;  // also column_sum's extents
  // row step of RowOp::softmax_and_log_softmax: the log_softmax value (output
  // holds softmax's); -1 otherwise
  int32_t output2 = -1;
  // gemm step: the call (inputs = {A's base, B's base}, output = C)
  cpu::GemmCall gemm;
  // fused step with a trailing reduction: output operand `reduce_operand`
  // (a value only the reduction reads) is never stored; it is reduced by
  // `reduce_op` over the last reduce_nred elements of each of reduce_nout
  // rows into value `reduce_output` (cpu::reduce_produced).
  int reduce_operand = -1;
  OpId reduce_op{};
  int32_t reduce_output = -1;
  int64_t reduce_nout = 0, reduce_nred = 0;
  // Inter-op parallelism (jit/step_pairs.h): this step and the next are
  // independent single-threaded GEMMs run at once, one per thread, when the
  // call has two threads; the memory plan treats the pair as one step.
  // pair_writes_output: one of them writes a graph output (then the pair
  // runs in order when the caller gave output memory, which may be an
  // input's: in-place write-back).
  bool run_with_next = false;
  bool pair_writes_output = false;
};

/// A non-op step bound to buffers: its operand pointers and output tensor,
/// ready to run (ExecutionPlan::run and capture/replay share it).
struct BoundStep {
  const PlanStep* step = nullptr;
  std::array<char*, kMaxFusedOperands> base{};  // fused: operand pointers; others: output, then inputs
  Tensor out;  // a fused step's reduction result; an op step's planned output (ExecutionPlan::run)
};

/// Values a step reads, and values it writes (a fused step with a reduction
/// writes the reduction's result, not the reduced value): f(value id) for
/// each, in a fixed order, without building a list.
template <class F>
void for_each_read(const PlanStep& s, F&& f) {
  if (s.kind == PlanStep::Kind::fused_row) {  // the group's inputs and the row op's, but not x
    for (size_t j = static_cast<size_t>(s.num_outputs); j < s.operands.size(); ++j) f(s.operands[j]);
    for (size_t j = 1; j < s.inputs.size(); ++j) f(s.inputs[j]);
  } else if (s.kind == PlanStep::Kind::gemm_fused) {  // A, B and the group's inputs but the product
    for (int32_t v : s.inputs) f(v);
    for (size_t j = static_cast<size_t>(s.num_outputs); j < s.operands.size(); ++j)
      if (static_cast<int>(j) != s.product_operand) f(s.operands[j]);
  } else if (s.kind == PlanStep::Kind::fused) {
    for (size_t j = static_cast<size_t>(s.num_outputs); j < s.operands.size(); ++j) f(s.operands[j]);
  } else {
    for (int32_t v : s.inputs) f(v);
  }
}
template <class F>
void for_each_write(const PlanStep& s, F&& f) {
  if (s.kind != PlanStep::Kind::fused && s.kind != PlanStep::Kind::gemm_fused) {
    f(s.output);
    if (s.output2 >= 0) f(s.output2);
    return;
  }
  for (int j = 0; j < s.num_outputs; ++j)
    if (j != s.reduce_operand) f(s.operands[static_cast<size_t>(j)]);
  if (s.reduce_operand >= 0) f(s.reduce_output);
  if (s.column_sum_output >= 0) f(s.column_sum_output);
}
/// Whether step `s` runs its op's eager kernel on the values `vals` holds
/// (a one-step-at-a-time run: ExecutionPlan::run_stepwise, a capture): an
/// op step, and a column sum of a strided view (an argument of another
/// stride class, say), which eager's reduce() sums in the view's own order
/// (lanes along a unit-stride reduced axis), not a contiguous copy's.
inline bool runs_eager_kernel(const PlanStep& s, const std::vector<Tensor>& vals) {
  return s.kind == PlanStep::Kind::op ||
         (s.kind == PlanStep::Kind::column_sum && !vals[static_cast<size_t>(s.inputs[0])].is_contiguous());
}
/// for_each_read and for_each_write as lists.
std::vector<int32_t> step_reads(const PlanStep& s);
std::vector<int32_t> step_writes(const PlanStep& s);
/// The shape and strides (elements) value `v` of `g` has when the graph's
/// inputs, weights and constants are contiguous: a view op's result those
/// its view chain gives (the eager rule, replayed from the chain's base),
/// any other value contiguous ones.
void planned_strides(const Graph& g, int32_t v, Shape& shape, Strides& strides);
/// Whether step `s` of `g` makes a view of its input, so its value gets no
/// memory of its own: an op step of a view op, except a reshape that must
/// copy for the strides its input has when the graph's inputs, weights and
/// constants are contiguous (attention's heads merged back: a reshape of a
/// permuted value), which writes a planned tensor like any op step.
bool step_is_view(const Graph& g, const PlanStep& s);
struct StepValues;  // memory_plan.h
/// What the memory plan sees of `steps` (jit/memory_plan.h): each step's
/// reads, writes and view flag, a pair marked run_with_next counted as one
/// step (the second's), since both run at once.
std::vector<StepValues> memory_step_values(const Graph& g, const std::vector<PlanStep>& steps);

class ExecutionPlan {
 public:
  /// Plans `graph` (must verify and contain no call nodes). `images` (may
  /// be null): machine code of fused groups from a MEF file, used instead of
  /// generating the programs it holds (KernelSource).
  ExecutionPlan(std::shared_ptr<const Graph> graph, const KernelOptions& options,
                const CodeImages* images = nullptr);

  /// A plan whose steps and memory plan were made elsewhere (a MEF file's
  /// PLAN section, jit/mef_plan.h), already checked against `graph`.
  struct Parts {
    std::vector<PlanStep> steps;
    std::vector<ValueList> release_after;  ///< per step
    std::vector<int64_t> arena_offset;                ///< per value, -1 outside the arena
    size_t arena_bytes = 0;
  };
  ExecutionPlan(std::shared_ptr<const Graph> graph, const KernelOptions& options, Parts parts);
  // Its bindings point into its own steps (a constant table of up to 2
  // entries lives inside the PlanStep): a copy or move would leave them
  // pointing at the source. Plans are held by shared_ptr.
  ExecutionPlan(const ExecutionPlan&) = delete;
  ExecutionPlan& operator=(const ExecutionPlan&) = delete;
  ~ExecutionPlan();

  /// Weight slots in the order run() expects them: (name, type).
  const std::vector<std::pair<std::string, TensorType>>& weight_slots() const { return weight_slots_; }
  /// Runs the plan. `inputs` are contiguous tensors in graph-input order
  /// (an array of handles, or of their addresses: read where they are, no
  /// handle copied); `weights` are contiguous tensors in weight_slots()
  /// order. Nothing is checked here (the callers check). Results are
  /// written to `outputs` (resized to the output count). An output already
  /// defined on entry (contiguous, of the output's type) is the memory that
  /// output is computed into where the step allows; the caller compares
  /// addresses to see whether it was.
  /// Other outputs get memory of their own: an output up to
  /// kReusedOutputBytes may be one an earlier call returned that the caller
  /// has since dropped entirely (no handle, no view), never one it holds.
  void run(detail::TensorRefs inputs, std::span<const Tensor> weights, std::vector<Tensor>& outputs) const;

  const Graph& graph() const { return *graph_; }
  const std::vector<PlanStep>& steps() const { return steps_; }
  /// Binds non-op step `k` to the tensors in `vals`: inputs are made
  /// contiguous (in vals), outputs come from `dest(value id)` and are stored
  /// in vals. Run it with execute().
  template <class Dest>
  BoundStep bind(size_t k, std::vector<Tensor>& vals, Dest&& dest) const;
  /// bind() with the operand pointers given: in(v) and out(v) return the
  /// memory of value v (char*), out_tensor(v) a tensor for a reduction's
  /// result.
  template <class In, class Out, class OutTensor>
  BoundStep bind_to(size_t k, In&& in, Out&& out, OutTensor&& out_tensor) const;
  /// Runs a bound step (no checks, no allocation).
  static void execute(const BoundStep& b);

  /// Bytes of the one scratch buffer a run uses for intermediates (planned
  /// from liveness; 0 when every value is fused or an output). A call takes
  /// one the plan kept from an earlier call and gives it back when it ends,
  /// so only the first call (and each call running at the same time as
  /// others) allocates one; the plan keeps as many as ran at once. An arena
  /// a result still views (a returned view of an intermediate) is left to
  /// that result instead.
  size_t arena_bytes() const { return arena_bytes_; }
  /// Total bytes of generated machine code.
  size_t code_bytes() const;
  /// codegen_feature_key of the plan's generated code (target and options).
  const std::string& code_feature_key() const { return code_key_; }
  /// Whether elementwise chains were fused (KernelOptions::fuse).
  bool fused() const { return fuse_; }
  /// Whether the plan was made with inter-op pairs on (jit/step_pairs.h).
  bool inter_op_pairs() const { return pairs_; }
  /// Per value: its byte offset in the arena, or -1 (memory_plan.h).
  const std::vector<int64_t>& arena_offsets() const { return arena_offset_; }
  /// Per step: the values dropped after it.
  const std::vector<ValueList>& release_after() const { return release_after_; }
  /// How a plan read from a MEF file was made: restored from its PLAN
  /// section ("" then), or why it was planned again (no section, another
  /// key, KILN_JIT_DUMP). Empty for a compiled plan.
  const std::string& read_note() const { return read_note_; }
  void set_read_note(std::string note) { read_note_ = std::move(note); }
  /// The fusion groups and programs, one per line (KILN_JIT_DUMP).
  std::string describe(bool with_disassembly) const;
  /// Whether KILN_PLAN_PROFILE=1 was set when the process first ran a plan:
  /// then every run() records the time of binding, of each step and of the
  /// gap since the previous run() of the same plan ended (the caller's work
  /// between calls), and the process prints per plan (run at least 1000
  /// times) the minimum, median and mean of each to stderr at exit. A
  /// measuring aid only (benchmarks); off, it costs one test per call.
  static bool profiling();

 private:
  std::shared_ptr<const Graph> graph_;
  std::vector<PlanStep> steps_;
  std::vector<std::pair<std::string, TensorType>> weight_slots_;
  std::vector<int32_t> weight_values_;  // value id per weight slot
  std::vector<ValueList> release_after_;  // per step: values dropped after it
  std::vector<int64_t> arena_offset_;                // per value: byte offset in the arena, or -1
  size_t arena_bytes_ = 0;
  std::string code_key_;
  bool fuse_ = true;
  bool pairs_ = true;
  std::string read_note_;
  // One call at a time owns the plan (owner_busy_, taken with one atomic
  // exchange: the uncontended case): it uses owner_arena_ and the reused
  // outputs below without a lock. A call made while another owns the plan
  // (threads sharing a callable, a nested call) takes an arena from
  // free_arenas_ under arena_mu_ (each call its own) and allocates its
  // outputs.
  mutable std::atomic<bool> owner_busy_{false};
  mutable Buffer owner_arena_;
  mutable std::mutex arena_mu_;
  mutable std::vector<Buffer> free_arenas_;
  struct ArenaLease;
  // Graph constants: (value id, the node's data), so a call does not scan the nodes.
  std::vector<std::pair<int32_t, const Tensor*>> constants_;
  // Per graph output: how run() hands it out: 0 a copy of the handle, 1 the
  // handle moved (the value's last place among the outputs), 2 a clone (a
  // constant: never the plan's own storage).
  std::vector<uint8_t> output_take_;
  // Each non-op step's binding, made once (jit/plan_bind.cpp): its operand
  // pointers that do not change between calls (its program's constant
  // table; null elsewhere), and per operand slot that points at a value
  // (bind_patches_[bind_first_[k] .. bind_first_[k + 1]) for step k) the
  // value's arena offset, or the value whose memory a call looks up: the
  // arena slots first, the others from bind_values_first_[k] on.
  struct BindPatch {
    uint8_t slot = 0;
    bool out = false;       // written by the step
    int32_t value = -1;
    int64_t arena_offset = -1;
  };
  std::vector<std::array<char*, kMaxFusedOperands>> bind_base_;
  std::vector<uint32_t> bind_first_;
  std::vector<uint32_t> bind_values_first_;
  std::vector<BindPatch> bind_patches_;
  // This plan among all plans of the run (never reused: a thread's Bound
  // below names the plan its steps were bound for by it, not by address).
  uint64_t id_ = 0;
  // Per value id: its bytes when a call may reuse an earlier output's memory
  // for it (CPU, 1 .. kReusedOutputBytes), else 0.
  std::vector<size_t> reusable_bytes_;
  // Per step: step_is_view.
  std::vector<char> view_steps_;
  void init_run_tables();
  // Outputs of earlier calls, per value id (outputs up to
  // kReusedOutputBytes): a tensor only this holds (the caller dropped every
  // handle to it and every view of its memory) is the next call's output
  // for that value, so a call that feeds its results back (a training
  // step's weights) allocates nothing for them; a tensor or memory the
  // caller still holds is never reused. Used only by the call that owns the
  // plan (owner_busy_).
  // At most kReusedOutputTotal bytes are kept this way per plan (a plan with
  // many outputs keeps the first ones it made); the others are allocated
  // per call as before.
  static constexpr size_t kReusedOutputBytes = size_t{1} << 20;
  static constexpr size_t kReusedOutputTotal = size_t{16} << 20;
  mutable std::vector<std::array<Tensor, 2>> reused_outputs_;
  mutable size_t reused_output_bytes_ = 0;
  // empty_cache() drops what every idle plan keeps for reuse (the earlier
  // outputs above and the scratch arenas); a plan a call owns is skipped.
  void release_kept_memory() const;
  static void release_kept_memory_of_all_plans();
  Tensor output_tensor(int32_t v, const TensorType& t) const;

  // A call with every step bound up front (jit/plan_bind.cpp): no
  // allocation or dispatch between steps. false when a generated or BLAS
  // step's input is a strided view (run() then goes step by step: bind()
  // copies it contiguous, except that a gemm step makes eager's call for
  // the view: run_stepwise). A view step that copies (a reshape of a
  // permuted value, say) runs in its place like an op step (run_view).
  struct Bound {
    // Per step; op steps: out = the planned tensor. Kept between calls on
    // the thread with their step, constant and arena slots filled in for
    // plan `plan_id` and the arena at `arena_data` (a call of that plan
    // with that arena fills in only the slots of its inputs and outputs).
    std::vector<BoundStep> steps;
    uint64_t plan_id = 0;
    char* arena_data = nullptr;
    std::vector<Tensor> args;                              // op steps' arguments, flattened
    std::vector<std::pair<uint32_t, uint32_t>> arg_range;  // per op step: first and count in args
    std::vector<char> run_view;                            // per step: a view step run when reached
    std::vector<Tensor> vals;                              // per value id: the values the call makes
    std::vector<const Tensor*> src;                        // per value id: an input, weight or constant, else null
    bool outputs_given = false;                            // run() got memory for an output
    bool owner = false;                                    // the call owns the plan (reuses outputs)
    void clear() {  // drops the tensors, keeps the capacity (and the steps' bindings)
      outputs_given = false;
      owner = false;
      vals.clear();
      for (BoundStep& s : steps)
        if (s.out.defined()) s.out = Tensor();
      args.clear();
      arg_range.clear();
      run_view.clear();
    }
  };
  // Binds every step (b.src and the outputs given in b.vals set); false when
  // a generated or BLAS step reads a strided view.
  bool bind_all(Bound& b, const Buffer& arena) const;
  // Runs the bound steps; `stamps` (KILN_PLAN_PROFILE only, else null): the
  // time stamp counter after each step (a pair's second entry repeats it).
  void run_bound(const Bound& b, uint64_t* stamps = nullptr) const;
  void run_stepwise(std::vector<Tensor>& vals, const Buffer& arena, bool owner) const;
  // Where value v is written: its arena slot, or (outputs) a tensor: one an
  // earlier call returned and the caller dropped (owner only), else a new one.
  Tensor destination(int32_t v, const Buffer& arena, bool owner) const;
};

template <class In, class Out, class OutTensor>
BoundStep ExecutionPlan::bind_to(size_t k, In&& in, Out&& out, OutTensor&& out_tensor) const {
  const PlanStep& s = steps_[k];
  BoundStep b;
  b.step = &s;
  if (s.kind == PlanStep::Kind::fused_row) {
    // the group's operands (its output's slot holds y), the constant table,
    // then the row op's other inputs (weight, bias)
    b.base[0] = out(s.output);
    for (size_t j = 1; j < s.operands.size(); ++j) b.base[j] = in(s.operands[j]);
    size_t next = s.operands.size();
    if (!s.imm_table.empty()) b.base[next++] = reinterpret_cast<char*>(const_cast<uint64_t*>(s.imm_table.data()));
    for (size_t j = 1; j < s.inputs.size() && next < b.base.size(); ++j) b.base[next++] = in(s.inputs[j]);
    return b;
  }
  if (s.kind == PlanStep::Kind::gemm_fused) {
    // the group's operands (no memory for the product), the constant table, then A and B
    for (int j = 0; j < s.num_outputs; ++j) b.base[j] = out(s.operands[j]);
    for (size_t j = s.num_outputs; j < s.operands.size(); ++j)
      if (static_cast<int>(j) != s.product_operand) b.base[j] = in(s.operands[j]);
    size_t next = s.operands.size();
    if (!s.imm_table.empty()) b.base[next++] = reinterpret_cast<char*>(const_cast<uint64_t*>(s.imm_table.data()));
    b.base[next] = in(s.inputs[0]);
    b.base[next + 1] = in(s.inputs[1]);
    if (s.column_sum_output >= 0) b.base[next + 2] = out(s.column_sum_output);  // SmallGemmKey::column_sum_slot
    return b;
  }
  if (s.kind == PlanStep::Kind::row || s.kind == PlanStep::Kind::gemm || s.kind == PlanStep::Kind::column_sum) {
    for (size_t j = 0; j < s.inputs.size() && j + 1 < b.base.size(); ++j) b.base[j + 1] = in(s.inputs[j]);
    b.base[0] = out(s.output);
    if (s.output2 >= 0) b.base[kMaxFusedOperands - 1] = out(s.output2);
    return b;
  }
  for (int j = 0; j < s.num_outputs; ++j)
    if (j != s.reduce_operand) b.base[j] = out(s.operands[j]);
  for (size_t j = s.num_outputs; j < s.operands.size(); ++j) b.base[j] = in(s.operands[j]);
  if (!s.imm_table.empty()) b.base[s.operands.size()] = reinterpret_cast<char*>(const_cast<uint64_t*>(s.imm_table.data()));
  if (s.reduce_operand >= 0) b.out = out_tensor(s.reduce_output);
  return b;
}

template <class Dest>
BoundStep ExecutionPlan::bind(size_t k, std::vector<Tensor>& vals, Dest&& dest) const {
  auto in = [&](int32_t v) {
    Tensor& t = vals[v];
    if (!t.is_contiguous()) t = t.contiguous();  // eager views (e.g. transpose) feeding generated code
    return static_cast<char*>(t.data_ptr());
  };
  auto out_tensor = [&](int32_t v) -> const Tensor& { return vals[v] = dest(v); };
  auto out = [&](int32_t v) { return static_cast<char*>(out_tensor(v).data_ptr()); };
  return bind_to(k, in, out, out_tensor);
}

}  // namespace kiln::codegen
