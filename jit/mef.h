// kiln: the MEF file format (a compiled callable, without its weights).
//
// Layout, all integers little-endian:
//   offset 0   8 bytes   magic "KILNMEF\0"
//   offset 8   u32       format version (this kiln writes kFormatVersion)
//   offset 12  u64       total file length in bytes, checksum included
//   offset 20  u32       number of sections
//   offset 24  sections, each: 4-byte ASCII tag, u64 payload length, payload
//   last 4     u32       CRC-32 (zlib's) of every byte before it
// Sections of format version 1:
//   META  the writer ("kiln 0.1.0")                                optional
//   GRPH  the optimised, flat graph in kiln's text form (Graph::to_text)
//   GRPB  the same graph in a compact binary form                    optional
//         (added within version 2; layout in jit/mef_graph.h): the op
//         names, a table of the distinct types, then per node its kind, op,
//         operand values, attributes that differ from their defaults and
//         result type (constants: their raw bytes). A reader that knows its
//         layout version builds the graph from it (no text parsing) and
//         ignores GRPH; one that does not (an older kiln, another layout)
//         parses GRPH. The writer writes both from the same graph. Unlike
//         CODE, a GRPB section of this reader's layout that fails its checks
//         is an error naming 'GRPB', the byte and the field.
//   SIGN  the signature: u32 n, n layouts; str in_tree; u32 m, m layouts;
//         str out_tree. A layout is u8 dtype, u8 device type, i32 device
//         index, u8 stride class, u32 ndim, ndim x i64 extents; a str is a
//         u32 length and its bytes; trees are in treedef_io.h's form.
//   WGTS  the weights the graph expects, in binding order: u32 n, then per
//         weight a str name, u8 dtype, u8 device type, i32 device index,
//         u32 ndim, ndim x i64 extents (names and types only, never data).
//   SRCG  the graph as staged (subgraphs and calls kept)              optional
//   CODE  generated machine code of the plan's fused groups            optional
//         (added within version 2: readers of version 2 that predate it
//         skip it as an unknown section and generate the code, as they
//         always did): str feature key (codegen_feature_key: ISA target,
//         strict mode, the code generator's build); u32 n; n kernels, each
//         str program (ElementwiseProgram::str() it was generated for),
//         u64 hash (CodeImage::hash of feature key + '\n' + program),
//         str code bytes, u32 r, r relocations of u32 byte offset, u32
//         callee id (an 8-byte slot that receives a kiln function's address).
//         A reader whose feature key differs, or that finds the section
//         malformed, ignores it and generates the code from the graph; a
//         kernel whose hash does not match is generated again, never run.
//         Loading code runs it: a MEF file with a CODE section is trusted
//         like a shared library.
//         The CODE section also holds the generated small GEMMs of the
//         plan's matmuls (eager's plain ones and those with an epilogue,
//         backends/cpu/jit/small_gemm.h) as kernels whose program is the
//         GEMM's SmallGemmKey::str() (it starts "sgemm "; no elementwise
//         program does): readers that predate them never look them up.
//   PLAN  the execution plan: steps, programs, GEMM calls, memory plan     optional
//         (added within version 2; layout in jit/mef_plan.h), under a key
//         (PLAN layout version, codegen feature key, fusion flag). A reader
//         with the same key rebuilds the plan from it without planning
//         (ExecutionPlan::read_note() is then empty); another key, or
//         KILN_JIT_DUMP, plans the graph as before and says why in
//         read_note(). Unlike CODE, a PLAN section of this reader's key that
//         fails its checks is an error naming 'PLAN', the byte and the field.
//   CUBN  the CUDA plan's compiled module (graphs on a CUDA device)    optional
//         (added within version 2, like CODE): str feature key
//         (cuda::module_feature_key: architecture, NVRTC version, hash of
//         the kernel templates' text, NVRTC options incl. strict's
//         -fmad=false); u64 source hash (codegen::module_source_hash of
//         the module's CUDA source); str image architecture ("sm_90", or
//         "compute_XY" for PTX); u8 kind (1 cubin, 0 PTX); u32 n; n kernels,
//         each str name, u32 registers, u32 spill-store bytes, u32
//         spill-load bytes; str image; u64 check (FNV-1a of every byte of
//         the section before it). A reader whose feature key or plan source
//         differs recompiles from the graph with NVRTC; a malformed section
//         or a check mismatch is ignored the same way (cubin_note says why).
// A reader skips sections whose tag it does not know, so a later kiln may
// add optional sections without a new format version; anything a reader of
// an older version could misread gets a new version.
//
// Compatibility promise: files of older format versions keep loading; a file
// of a newer version is refused with a message naming both versions.
#pragma once
#include <cstdint>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "cuda_executable.h"
#include "engine.h"
#include "kernel_source.h"

namespace kiln::mef {

inline constexpr char kMagic[8] = {'K', 'I', 'L', 'N', 'M', 'E', 'F', '\0'};
/// The format version this kiln writes, and the newest it reads.
/// Version 2 adds the optional section MUTW (the signature's write-backs of
/// in-place updates); version 1 files (no MUTW) still load.
inline constexpr uint32_t kFormatVersion = 2;

/// A MEF file decoded, before its graph is parsed.
struct Contents {
  uint32_t format_version = kFormatVersion;
  std::string writer;       ///< META; empty when absent
  std::string graph_text;   ///< GRPH
  /// GRPB: the same graph in binary (jit/mef_graph.h); empty when absent.
  /// A reader that knows its layout builds the graph from it, not from GRPH.
  std::string graph_binary;
  engine::Signature signature;  ///< SIGN
  std::vector<std::pair<std::string, TensorType>> weights;  ///< WGTS
  std::string source_text;  ///< SRCG; empty when absent
  /// CODE: the plan's generated kernels (empty feature_key when absent).
  struct Code {
    std::string feature_key;
    struct Kernel {
      std::string program;  ///< the printed program (its key in the plan)
      uint64_t hash = 0;
      codegen::CodeImage image;
    };
    std::vector<Kernel> kernels;
  };
  Code code;
  /// Why decode() ignored a CODE section (malformed); empty otherwise.
  std::string code_note;
  /// PLAN: the execution plan's payload (jit/mef_plan.h), decoded by build()
  /// against the graph; empty when absent.
  std::string plan;
  /// CUBN: the CUDA plan's compiled module (empty image when absent).
  codegen::StoredModule cubin;
  /// Why decode() ignored a CUBN section (malformed, check mismatch).
  std::string cubin_note;
};

/// The CODE section for `plan`: its kernels and generated GEMMs that have an
/// image (each program or GEMM key once), under the plan's feature key.
Contents::Code code_of(const codegen::ExecutionPlan& plan);

/// The kernels of `c.code` a reader with feature key `key` may place:
/// none when the keys differ; a kernel whose hash does not match is left
/// out. `note` (may be null) receives why kernels were left out, or "" when
/// none was.
codegen::CodeImages usable_images(const Contents& c, const std::string& key, std::string* note);

/// "kiln <version>", the writer this build puts in META.
std::string writer_string();

/// The file's bytes for `c` (version kFormatVersion, checksum appended).
std::string encode(const Contents& c);

/// A file made of raw sections (tag, payload) with a correct length and
/// checksum, for tests that need a well-formed file with bad contents.
std::string encode_sections(uint32_t format_version, const std::vector<std::pair<std::string, std::string>>& sections);

/// Makes the header's total length and the trailing checksum agree with
/// `bytes` (at least 28 bytes, else unchanged): for tests and the fuzzer, so
/// edited or mutated files reach the section decoders and the graph parser.
void reseal(std::string& bytes);

/// Section payload encoders (see the layout above).
std::string encode_signature(const engine::Signature& s);
std::string encode_weights(const std::vector<std::pair<std::string, TensorType>>& w);

/// Checks the framing (magic, version, length, checksum, section table) and
/// decodes every section except the graph text. Throws ValueError
/// "engine::read: '<what>': ..." naming the problem. With `for_build`
/// (engine::read's), the graph text is left out (graph_text empty) when
/// the GRPB section has the layout build() reads instead: build() never
/// reads the text then, and a 1,000-node graph's text is 44 KB to copy.
Contents decode(std::string_view bytes, const std::string& what, bool for_build = false);

/// Builds the artifact from decoded contents: parses and verifies the graph
/// (and the source graph, if present), checks signature and weights against
/// it, and restores its plan from the PLAN section when its key is this
/// kiln's under `options`, else plans it with `options`.
std::shared_ptr<const engine::CompiledModel> build(const Contents& c, const KernelOptions& options,
                                                   const std::string& what);

/// Writes `bytes` to `path` through a temporary file in the same folder and a
/// rename, so a reader never sees half a file. A symbolic link at `path` is
/// followed (the file it points to is replaced, through a temporary file in
/// that file's folder; the link stays); a file replaced keeps its
/// permissions. Throws ValueError naming the path on failure, and when
/// `path` (or the file a link points to) exists but is not a regular file
/// (a FIFO, a device, a socket: it is not replaced).
void write_file_atomically(const std::string& path, const std::string& bytes, const std::string& op);

}  // namespace kiln::mef
