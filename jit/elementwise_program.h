// kiln (internal): the contract between the fuser (jit/fusion.*) and the CPU
// code generator (backends/cpu/jit/*). A fused group of elementwise ops is a
// straight-line SSA program over virtual registers that computes, for each
// element index i of an inner run of n elements, every output from the
// inputs. The generated function has run_loop's inner-loop signature, so
// the loop engine (backends/cpu/strided_loop.h) drives the outer axes and
// the threading, and results never depend on the thread count.
// NOTE: the namespace is kiln::codegen (a namespace kiln::jit would clash with
// the public function kiln::jit).
#pragma once
#include <cstdint>
#include <memory>
#include <string>
#include <string_view>
#include <vector>

#include "../tensor/op_table.h"

namespace kiln::codegen {

/// One instruction. Registers are numbered by instruction index: the result
/// of code[i] is register i.
struct Instr {
  enum class Kind : uint8_t {
    load,   ///< register = operand `arg` at the current element (converted to `dtype`)
    imm,    ///< register = the constant `imm` (a 0-d constant folded into the program);
            ///< with arg >= 0 it is read at run time from slot `arg` of the
            ///< constant table instead (see ElementwiseProgram::table_slots)
    op,     ///< register = op(a[, b[, c]]): a Unary/Binary/Ternary op-table row (Cast uses attrs.dtype)
    store,  ///< operand `arg` at the current element = register `a` (converted to the operand dtype)
  };
  Kind kind = Kind::op;
  OpId op{};           ///< kind == op
  DType dtype{};       ///< dtype of the value this instruction produces (as eager would: result_dtype)
  int32_t a = -1, b = -1, c = -1;  ///< operand registers
  int32_t arg = -1;    ///< load/store operand index; imm: constant-table slot, or -1
  double imm = 0.0;    ///< kind == imm, already in `dtype`'s value set
  Attrs attrs;         ///< kind == op (Cast: attrs.dtype)
};

/// A fused elementwise group. Operands are numbered: outputs first, then inputs.
///
/// Numerics of the generated code against the eager kernels (the
/// tolerance contract; tests/test_jit_codegen.cpp checks every row):
/// - Every op computes in the dtype eager computes in (operands converted
///   as eager converts them, detail::convert), and a float16/bfloat16 result
///   is rounded to its format after every op, as eager stores it; so all
///   rows other than those below are bitwise equal to eager, NaN payloads
///   aside (neg is 0 - x, as eager's functor).
/// - Without `strict`, a float32/float64 multiply whose only use is an add
///   or subtract becomes one FMA (a*b + c rounded once).
/// - The vector math rows (exp exp2 expm1 log log2 log1p tanh sigmoid silu
///   gelu gelu_tanh erf sin cos tan atanh) in float32 (and 16-bit floats)
///   use kiln's
///   own polynomials (backends/cpu/jit/vmath_alg.h): against a correctly
///   rounded result at most 2 ulp for exp, exp2 and log and 4 ulp for the
///   others, with NaN, +-inf, -0 and subnormals exact; gelu_tanh, like
///   eager, rounds its inner polynomial z to float, which costs a relative
///   |z| 2^-23 where x < -1. Against eager they agree to the sum of both
///   sides' bounds (eager: tensor/ref_ops.h). In float64 they call the C
///   library per lane (eager's Eigen fast path for exp/log/sigmoid/silu may
///   differ by its documented error).
/// - With `strict`, the vector math rows are refused (can_generate false)
///   and nothing is contracted, so a generated program is bitwise eager.
struct ElementwiseProgram {
  std::vector<DType> operand_dtypes;  ///< dtype in memory of each operand
  /// Per operand: its byte stride along the inner run is 0 (a broadcast
  /// value, same for every element of the run) instead of its itemsize
  /// (contiguous). Fixed at compile time (shapes are static).
  std::vector<bool> operand_broadcast;
  int num_outputs = 0;
  std::vector<Instr> code;
  /// Strict mode: no FMA contraction across ops, and only ops whose result
  /// is bitwise what the eager kernel gives may be used.
  bool strict = false;
  /// Outputs may be written with non-temporal (streaming) stores, which
  /// bypass the caches: the generated loop uses them for runs of at least
  /// kStreamMinElements whose output pointers are 64-byte aligned. Set it when
  /// the outputs are too large to stay in the last-level cache.
  bool streaming_stores = false;
  /// Printed form for KILN_JIT_DUMP and cache keys.
  /// Slots of the constant table (imms with arg >= 0). When nonzero, the
  /// table's address is passed as pointer number operand_dtypes.size() (after
  /// the operands; its stride is ignored), each slot 8 bytes holding the
  /// value's bits in its dtype (table_bits). Programs that differ only in
  /// such constants are the same code.
  int table_slots = 0;
  std::string str() const;
};

/// The 8-byte table slot of constant `v` of dtype `d` (its bits in d,
/// little-endian, zero-extended).
uint64_t table_bits(double v, DType d);

/// Shortest run (elements) written with streaming stores.
inline constexpr int64_t kStreamMinElements = 4096;

/// run_loop's inner-loop signature: ptrs[k] = operand k's first element of the
/// run, strides[k] = its byte stride (itemsize or 0, as promised by the
/// program: the generated code does not read it), n = elements in the run.
using InnerLoopFn = void (*)(char** ptrs, const int64_t* strides, int64_t n);

/// Out-of-line kiln functions that generated code calls, by a stable id
/// (the number a CodeImage's relocations name them by; never renumber).
enum class Callee : uint32_t { scalar_lanes = 0, trig_lanes = 1 };
inline constexpr uint32_t kNumCallees = 2;

/// Generated machine code in relocatable form (MEF files' CODE section):
/// the bytes as asmjit laid them out (the function, its constant pool and
/// its call slots; all references inside are RIP-relative, so the bytes run
/// at any address) and the relocations: 8-byte slots that hold the address
/// of a Callee, zero in `bytes`, written when the image is placed.
struct CodeImage {
  struct Reloc {
    uint32_t offset = 0;  ///< byte offset of the slot in `bytes`
    uint32_t callee = 0;  ///< a Callee
    friend bool operator==(const Reloc&, const Reloc&) = default;
  };
  std::string bytes;
  std::vector<Reloc> relocs;
  /// FNV-1a (64-bit) of `key` (what the code was generated for: feature key
  /// and program), the bytes and the relocations: stored next to the image
  /// so a corrupted one is refused, never run.
  uint64_t hash(std::string_view key) const;
};

/// Generated machine code for one program. Frees its code when destroyed.
class ElementwiseKernel {
 public:
  virtual ~ElementwiseKernel() = default;
  virtual InnerLoopFn fn() const = 0;
  /// Bytes of machine code.
  virtual size_t code_size() const = 0;
  /// asmjit's disassembly (filled when requested at compile time).
  virtual const std::string& disassembly() const = 0;
  /// The code as a relocatable image; empty bytes when it has none (then a
  /// MEF file does not carry it and a reader generates it again).
  virtual const CodeImage& image() const = 0;
};

/// Process-wide counts of elementwise kernels made by the code generator
/// and placed from images (a MEF read that skips code generation adds only
/// to `loaded`).
struct CodegenCounts {
  int64_t generated = 0, loaded = 0;
};
CodegenCounts codegen_counts();

/// The instruction set the generator targets.
enum class CpuTarget : uint8_t { sse2, avx2, avx512 };
/// Best target of this CPU (CPUID: AVX-512F+DQ+BW+VL -> avx512, AVX2+FMA -> avx2, else sse2).
CpuTarget detect_cpu_target();
const char* cpu_target_name(CpuTarget t);

/// True when the generator supports every instruction of `p` on `t` and this
/// CPU runs `t`. Supported: dtypes bool, uint8, int8, int32, float16 (not
/// on sse2), bfloat16, float32, float64 (not on sse2) and int64 (avx512
/// only; int16, uint16, uint32 and uint64 have no generated form: a plan
/// runs their ops as eager-kernel steps, so compiled equals eager bitwise); every Unary/Binary/Ternary row except the integer forms of pow,
/// floor_divide, remainder and fmod (eager raises on bad input there). Float
/// pow/floor_divide/remainder/fmod/atan2 and the float64 vector math call
/// eager's scalar functor per lane (bitwise eager); the vector math rows are
/// refused in strict mode. Outputs must not be broadcast.
bool can_generate(const ElementwiseProgram& p, CpuTarget t);
/// Generates code for `p`. Throws kiln::Error when can_generate is false.
/// `want_disassembly` fills disassembly() (slower; for KILN_JIT_DUMP).
std::unique_ptr<ElementwiseKernel> generate_elementwise(const ElementwiseProgram& p, CpuTarget t,
                                                        bool want_disassembly = false);
/// A kernel from an image made by generate_elementwise under the same
/// codegen_feature_key (the caller checks key and hash). Throws kiln::Error
/// for a malformed image (place_image in backends/cpu/jit/assemble.h).
std::unique_ptr<ElementwiseKernel> load_elementwise(const CodeImage& image);

/// What generated code depends on besides the program text: the code
/// generator's build (a hash of its sources, backends/cpu/jit/ and this
/// header), the target instruction set and strict mode. Code made under one
/// key runs only where the key is the same; any other key regenerates it.
std::string codegen_feature_key(CpuTarget t, bool strict);

}  // namespace kiln::codegen
