// kiln: the engine layer under CompiledCallable. A CompiledModel is a
// compiled artifact (the optimised graph and its generated code, no weights);
// a Model is a CompiledModel with weights bound, ready to run.
#pragma once
#include <cstdint>
#include <iosfwd>
#include <memory>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "../trace/graph.h"
#include "../trace/pytree.h"
#include "inference_session.h"
#include "tensor_refs.h"

namespace kiln {
class CompiledCallable;
}

namespace kiln::codegen {
class ExecutionPlan;
class CudaExecutable;
}

namespace kiln::engine {

/// How a compiled callable is called: the layout of each tensor argument (in
/// graph-input order, stride class included), the argument tree (static
/// argument values are inside it), the layout of each tensor result and the
/// result tree. Stored in MEF files next to the graph.
struct Signature {
  std::vector<TensorLayout> in_layouts;
  TreeDef in_tree;
  std::vector<TensorLayout> out_layouts;
  TreeDef out_tree;
  /// Graph outputs past the out_tree's leaves, in order: values written back
  /// into arguments or mutable weights when a call ends (out_layouts lists
  /// them after the results).
  std::vector<WriteBack> writes;
  friend bool operator==(const Signature&, const Signature&) = default;
};

/// Where an artifact read from a MEF file came from.
struct MefOrigin {
  std::string path;            ///< the file ("<stream>" when read from a stream)
  uint32_t format_version = 0; ///< the file's format version
  std::string writer;          ///< the writing kiln ("kiln 0.1.0"), empty if the file does not say
};

/// A compiled artifact: the optimised, flat graph and its execution plan.
class CompiledModel {
 public:
  CompiledModel(std::shared_ptr<const Graph> source, std::shared_ptr<const Graph> optimized,
                std::shared_ptr<const codegen::ExecutionPlan> plan);
  /// An artifact read from a MEF file, with the signature the file stores.
  CompiledModel(std::shared_ptr<const Graph> source, std::shared_ptr<const Graph> optimized,
                std::shared_ptr<const codegen::ExecutionPlan> plan, std::shared_ptr<const Signature> signature,
                MefOrigin origin);
  const std::string& name() const { return optimized_->name(); }
  /// The graph as staged (kept so its address identifies this artifact).
  const Graph& source_graph() const { return *source_; }
  /// The optimised graph the plan runs.
  const Graph& graph() const { return *optimized_; }
  const codegen::ExecutionPlan& plan() const { return *plan_; }
  /// The CUDA plan (NVRTC-compiled kernels) when the graph's inputs and
  /// weights live on a CUDA device, else null; calls then run it (and the
  /// CPU plan above serves only its weight slots and in-place analysis).
  const codegen::CudaExecutable* cuda_plan() const { return cuda_.get(); }
  void set_cuda_plan(std::shared_ptr<const codegen::CudaExecutable> c) { cuda_ = std::move(c); }
  /// Weights the graph expects: (name, type), in binding order.
  const std::vector<std::pair<std::string, TensorType>>& weight_slots() const;
  /// The signature stored with the artifact: set when it was read from a MEF
  /// file (engine::read, or a session's precompiled MEF folder); null for an
  /// artifact compiled in this process (its callable holds the signature).
  const Signature* signature() const { return signature_.get(); }
  /// True when the artifact was read from a MEF file instead of compiled.
  bool loaded_from_mef() const { return loaded_from_mef_; }
  /// The file it was read from (meaningful when loaded_from_mef()).
  const MefOrigin& mef_origin() const { return origin_; }

 private:
  std::shared_ptr<const Graph> source_, optimized_;
  std::shared_ptr<const codegen::ExecutionPlan> plan_;
  std::shared_ptr<const codegen::CudaExecutable> cuda_;
  std::shared_ptr<const Signature> signature_;
  MefOrigin origin_;
  bool loaded_from_mef_ = false;
};

/// Reads a MEF file written by CompiledCallable::export_mef (or by a session's
/// export folder) without tracing anything: parses and verifies the graph,
/// checks the signature and the weight list against it, and builds the
/// execution plan for this machine's CPU: restored from the PLAN section
/// without planning when its key (PLAN layout version, codegen feature key,
/// fusion and inter-op flags) is this reader's, else planned again
/// (ExecutionPlan::read_note() says why); machine code from the CODE section
/// where its key matches, else generated. A graph on a CUDA device also gets
/// its CUDA plan, with the CUBN section's module where its key matches.
/// A PLAN section of this reader's key that fails its checks is a ValueError
/// naming 'PLAN', the byte offset and the field.
/// `session` (null = the process default) gives the kernel options.
/// Every problem is a ValueError starting "engine::read: '<path>': " that says
/// which: not a MEF file (bad magic), a newer format version, a truncated file
/// (naming the section it ends in), a checksum mismatch, a malformed section,
/// a graph that fails parsing (with the parser's line) or verification, or a
/// signature/weight list that does not match the graph. Never crashes on any
/// input: lengths are checked before use and no allocation exceeds the file.
/// Files of every older format version keep loading.
std::shared_ptr<const CompiledModel> read(const std::string& path, std::shared_ptr<InferenceSession> session = nullptr);
/// As above, from a stream (read to its end); messages name "<stream>".
std::shared_ptr<const CompiledModel> read(std::istream& in, std::shared_ptr<InferenceSession> session = nullptr);
/// As above, from the file's bytes in memory; `what` names them in messages.
std::shared_ptr<const CompiledModel> read_bytes(std::string_view bytes, const std::string& what = "<memory>",
                                                std::shared_ptr<InferenceSession> session = nullptr);

/// Counters of the MEF folders of InferenceSession (process-wide): files
/// written to `export_mefs`, artifacts loaded from `precompiled_mefs` instead
/// of compiled, and files found there but not used (unreadable, or for
/// another graph), each with its reason in `last_rejection`.
struct MefCacheStats {
  int64_t exported = 0, loaded = 0, rejected = 0;
  std::string last_rejection;
};
MefCacheStats mef_cache_stats();

/// Parses a capture key written in decimal (or 0x-hex): keys are uint64, so
/// a negative value or one above 2^64-1 is a ValueError saying so.
uint64_t parse_capture_key(std::string_view text);

/// Compiles `staged_graph` (inline calls, optimise, fuse, generate code),
/// reusing an artifact the session already built for the same graph object.
std::shared_ptr<const CompiledModel> compile_graph(const std::shared_ptr<const Graph>& staged_graph,
                                                   InferenceSession& session);
/// As above; `signature` (may be null) is what a session's export folder
/// stores with the graph, and part of the file's key. With
/// session.precompiled_mefs set, a file there for the same graph and
/// signature (`<graph name>-<hash>.mef`) is read instead of optimising and
/// its artifact reports loaded_from_mef(); with session.export_mefs set, the
/// artifact is written there under that name.
std::shared_ptr<const CompiledModel> compile_graph(const std::shared_ptr<const Graph>& staged_graph,
                                                   InferenceSession& session, const Signature* signature);

namespace detail {
struct CaptureTable;
}

/// A CompiledModel with weights bound.
class Model {
 public:
  /// Binds `weights` (name -> contiguous tensor). Throws ValueError naming a
  /// weight that is missing, mis-typed or not contiguous; the message starts
  /// with `who` (the entry point binding them: "compile", "from_mef
  /// 'f.mef'", "kiln run") and calls the weights given `source` ("the weights
  /// registry", "--weights 'w.safetensors'").
  Model(std::shared_ptr<const CompiledModel> artifact, const std::map<std::string, Tensor>& weights,
        std::string_view who = "engine::Model", std::string_view source = "the weights registry");
  ~Model();
  Model(const Model&) = delete;
  Model& operator=(const Model&) = delete;
  /// Runs on contiguous tensors in graph-input order. The fast path: no
  /// shape, stride or tree checks, only what keeps a wrong input from being
  /// read out of bounds or reinterpreted: the count (ValueError), each
  /// input's dtype (DTypeError), device (DeviceError) and shape
  /// (ShapeError: a tensor's view always lies inside its buffer, so a
  /// matching shape is never read out of bounds); the message names the
  /// input index. Strides are the caller's promise (contiguous, or the
  /// stride class the callable was compiled for).
  std::vector<Tensor> execute(std::span<const Tensor> inputs) const;
  /// As execute, with `outputs` given: a defined outputs[k] (contiguous, of
  /// output k's type) is computed into where the plan allows it
  /// (ExecutionPlan::run); `outputs` then holds the results. Each defined
  /// outputs[k] is checked first (the message names the output index, the
  /// layout expected and the one given): DTypeError for another dtype,
  /// DeviceError for another device, ShapeError for another shape,
  /// ValueError for a non-contiguous (strided, transposed, flipped) or
  /// unrealized tensor and for more tensors than outputs. Undefined entries
  /// get memory of their own.
  ///
  /// An output given memory that overlaps an input or a bound weight gets
  /// the answer separate memory would give, as numpy's `out=` does: it is
  /// computed straight into that memory only when the plan reads each
  /// element of the operand before writing over it (the output is the
  /// operand's own memory, made by a generated elementwise step that reads
  /// element i only to write element i, and no later step reads the
  /// operand: `x * 2 + 1` into x); any other overlap (a transpose, matmul,
  /// reduction or broadcast read of the operand, a later step reading it, a
  /// shifted or partial overlap) is computed into memory of its own and then
  /// copied into the output given, which then holds the result. The inputs
  /// overlapped are overwritten by the result, as the caller asked.
  void execute_into(std::span<const Tensor> inputs, std::vector<Tensor>& outputs) const;
  const CompiledModel& artifact() const { return *artifact_; }
  const std::shared_ptr<const CompiledModel>& artifact_ptr() const { return artifact_; }
  /// The weights bound, in weight_slots() order.
  const std::vector<Tensor>& bound_weights() const { return bound_; }

  // ---- capture and replay -------------------------------------------------------
  // A capture records one run for these exact input buffers into a flat list
  // of steps with every decision made: fused steps keep their generated
  // function, prebuilt loop and bound data pointers; other steps keep their op
  // and pre-bound input tensors; every intermediate and output buffer is
  // allocated once, at capture time, and reused by each replay.
  //
  // A replay allocates nothing: fused steps, views and copies run in the captured buffers; an op step
  // running an eager kernel (matmul, reductions, row kernels, data ops, elementwise ops codegen left) has
  // it write into its captured buffer (a result made elsewhere is copied there), so later steps and the
  // outputs stay put. Captured tensors of the traced function are not checked (CompiledCallable's call
  // checks them): a replay computes with the values baked in at trace time.
  //
  // On a CUDA callable (cuda_plan() set) a capture is one CUDA Graph of the
  // whole call: the constants are put on the device and one ordinary run
  // loads the module and the cuBLASLt handle, then the next run is recorded
  // from kiln's stream (cudaStreamBeginCapture) while the caching allocator
  // holds every block it allocates (no later allocation reuses memory the
  // graph writes, until release), and the graph is launched once. A replay
  // is one cudaGraphLaunch on kiln's stream and returns without waiting:
  // reading an output (to_vector, item, cpu) waits for it. The errors are
  // the CPU's; without a device capture raises DeviceError. Captures on one
  // device record one at a time (a capture started while another thread's
  // is recording raises ValueError), and memory other threads allocate on
  // that device meanwhile is held with the graph's until release.
  //
  // Capture tables are per Model (shared by every callable on it) and
  // thread-safe: different keys may be captured, replayed and released from
  // different threads at once. One key must not be replayed by two threads at
  // the same time (its buffers are shared), nor its inputs written meanwhile.

  /// Runs once on `inputs` (contiguous tensors in graph-input order, checked
  /// like a compiled call) and records the run under `key`, replacing any
  /// capture under that key. Returns the output tensors: replay(key, ...)
  /// overwrites them in place, so copy what you need before the next replay.
  /// Throws ValueError for no inputs, a wrong count, or an input whose dtype,
  /// shape, device or contiguity differs from the graph's. An unrealized
  /// input (a kiln::lazy() result) is realized first, as any read of it
  /// (inside its own open scope the scope's recorded ops up to it run, as for
  /// a compiled call's arguments); that handle is then the captured buffer.
  /// A traced value (inside jit/compile/stage) is a RealizationError.
  std::vector<Tensor> capture(uint64_t key, std::span<const Tensor> inputs) const;
  /// Reruns the capture under `key` and rewrites its output tensors (as
  /// returned by capture, also captured_outputs(key)). The only check is that
  /// `inputs` are the captured buffers (same data address, dtype, shape,
  /// strides and device, in order); otherwise ValueError names the argument.
  /// An unknown (or released) key and an empty `inputs` are ValueErrors.
  void replay(uint64_t key, std::span<const Tensor> inputs) const;
  /// The output tensors of the capture under `key` (ValueError if none).
  std::vector<Tensor> captured_outputs(uint64_t key) const;
  /// Drops the capture under `key` and frees its buffers once no replay is
  /// running on it; an unknown key is a no-op.
  void release(uint64_t key) const;
  /// Number of captures held.
  size_t num_captures() const;

 private:
  friend class kiln::CompiledCallable;
  // execute_into on borrowed inputs (handles or addresses: read where they
  // are, no handle copied). `checked`: the caller (CompiledCallable's
  // checked call) has matched every argument against a signature whose
  // layouts are the graph's input types (detail::CallPlan::
  // inputs_are_graph_inputs), so the count, dtype, device and shape checks
  // are made and none is repeated.
  void run_into(kiln::detail::TensorRefs inputs, std::vector<Tensor>& outputs, bool checked) const;
  std::shared_ptr<const CompiledModel> artifact_;
  std::vector<Tensor> bound_;
  /// Per graph input, what execute() checks (filled once by the constructor).
  struct InputCheck {
    DType dtype;
    Device device;
    Shape shape;
  };
  std::vector<InputCheck> input_checks_;
  std::unique_ptr<detail::CaptureTable> captures_;
};

}  // namespace kiln::engine
