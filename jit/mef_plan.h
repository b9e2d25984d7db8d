// kiln (internal): the PLAN section of a MEF file (jit/mef.h): a compiled
// plan's steps and memory plan, so engine::read rebuilds the executable plan
// without planning (no fusion grouping, lowering or memory planning; with a
// CODE section of the same key, no code generation either).
//
// Payload, all integers little-endian (str: u32 length and bytes; i32/i64
// two's complement; f64 the IEEE bits as u64):
//   u32 layout version (kPlanLayoutVersion), str key (plan_key: codegen
//   feature key and fusion flag), u32 node count, u32 value count (the
//   graph's: checked),
//   u32 P programs: u8 flags (1 strict, 2 streaming stores), u32 outputs,
//     u32 table slots, u32 operands, per operand u8 dtype and u8 broadcast,
//     u32 instructions, each u8 kind, u8 dtype, i32 a, b, c, arg, f64 imm,
//     and for kind op: str op name, u32 n + n i64 ints, i64 axis, f64 scalar,
//     u8 flag, u8 dtype (Attrs),
//   u32 S steps, each u8 kind (PlanStep::Kind) and then:
//     op, column_sum:  u32 node
//     row:             u32 node, i32 paired log_softmax node (-1: none)
//     gemm:            GEMM part, i32 bias value (-1: none), i32 output value
//     fused:           fused part, i32 reduce operand (-1: none) and when
//                      set u32 reduce node, i64 rows, i64 row length
//     fused_row:       u32 row node, fused part
//     gemm_fused:      GEMM part, i32 product operand, fused part, i32
//                      column-sum node (-1: none; layout 2 on)
//     GEMM part:  u32 matmul node, i32 base A, i32 base B, u8 transposed A,
//                 u8 transposed B, u8 small (eager's generated GEMM) and when
//                 set i64 m, n, k, lda, ldb, ldc, u8 ta, u8 tb
//     fused part: u32 program, u32 n + n i32 operand values (outputs
//                 first), u32 outputs, u32 t + t u64 constant table, u32 g +
//                 g i32 fused node ids (for dumps)
//   u64 arena bytes, u32 A arena slots: u32 value, u64 byte offset.
// Everything the step kinds derive from the graph (ops, attributes, row and
// GEMM parameters, loops, layouts, release points) is derived again on read;
// what is stored is checked against the graph: every id in range, each step
// of a kind its node allows, programs well formed and matching their
// operands' dtypes and broadcasting, operand counts within the kernel
// interface, values read only after they are written, arena slots inside
// the arena and sized for their value, and each fused step's program
// against its fused nodes: one op instruction per elementwise node, in
// order, with the node's op, attributes and dtype, each input read as a
// load of the node's input value, a table constant with the bits of the
// graph's one-element constant, or the register of the node that made it,
// each output stored from the register of the node that makes it (a
// program's constants come from its table only), and no two values live at
// the same step (the memory plan's liveness, pairs run at once included)
// overlapping in the arena. A violation is a ValueError naming 'PLAN', the
// byte offset and the field; no input makes the read crash.
#pragma once
#include <memory>
#include <string>
#include <string_view>

#include "kernel_source.h"
#include "plan.h"

namespace kiln::mef {

/// The PLAN payload layout this kiln writes and reads (a file of another
/// layout is planned again, never misread).
/// 2: gemm_fused steps carry the node of the column sums made in their
/// epilogue. 3: a reshape step the plan knows copies (codegen::step_is_view
/// false) has an arena slot (a reader of 2 would refuse it as a view's).
inline constexpr uint32_t kPlanLayoutVersion = 3;

/// The key of a plan made with `options` on this CPU: the codegen feature key
/// (target, strict mode, code generator build) and the fusion flag.
std::string plan_key(const KernelOptions& options);

/// The PLAN payload of `plan` (made with fusion `plan.fused()`); empty when a
/// step cannot be written (then the file has no PLAN section).
std::string encode_plan(const codegen::ExecutionPlan& plan);

/// Why the PLAN payload cannot be used by this kiln with `options` (another
/// layout version or key), or "" when it can. Throws ValueError naming
/// 'PLAN' when its header is malformed.
std::string plan_mismatch(std::string_view payload, const KernelOptions& options, const std::string& what);

/// The plan stored in `payload` (plan_mismatch gave ""), for `graph` (the
/// file's graph, parsed and verified). Kernels come from `images` (may be
/// null) when they hold the program, else from the code generator. Throws
/// ValueError "engine::read: '<what>': section 'PLAN' (the execution plan) is
/// malformed at byte N of M: <field and problem>".
std::shared_ptr<codegen::ExecutionPlan> decode_plan(std::string_view payload, std::shared_ptr<const Graph> graph,
                                                    const KernelOptions& options, const codegen::CodeImages* images,
                                                    const std::string& what);

}  // namespace kiln::mef
