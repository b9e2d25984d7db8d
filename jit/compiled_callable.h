// kiln: CompiledCallable: a staged graph compiled to machine code, with
// weights bound, callable with the same arguments as the original function.
// Members follow MAX's max.experimental.compilation.CompiledCallable.
//
// Numerics contract (compiled vs eager, default mode): add, sub, mul, div,
// neg, abs, comparisons, logical ops, min/max, where, clamp, casts and every
// integer op are bit-exact; a*b+c may contract to one FMA, which skips the
// rounding of a*b: |diff| <= 0.5 ulp of a*b plus 1 ulp of the result (each side rounds once more; under
// cancellation many ulps of the result: a = 1/3, b = -3, c = 1 gives 0
// eagerly and 5.55e-17 compiled in float64; strict mode never contracts);
// exp, log: <= 2 ulp; tanh, sigmoid, erf, sin, cos and the ops
// built on them (gelu, silu, expm1, log1p, ...): <= 4 ulp, all against the
// correctly rounded float64 value, except gelu just below x = -1.3037 (where
// it switches to its erfc form): <= 5 ulp there (measured over every float
// of [-1.4, -1.25]: 4.65 ulp on AVX2/AVX-512, 5.02 on SSE2). Reductions and row kernels run the eager
// kernels' arithmetic (bit-exact); a 2-d matmul is the call eager makes for its operands' layouts at run time
// (a transposed or sliced argument is read as eager reads it), except that the transpose of a contiguous value
// with k < 32 may be copied first (the same dot products in another OpenBLAS kernel: bitwise eager's in practice,
// not promised). With KernelOptions::strict, compiled and eager results are
// bitwise equal for every op (any NaN matching any NaN: a NaN's sign and
// payload depend on operand order inside a kernel and are not promised).
#pragma once
#include <array>
#include <map>
#include <memory>
#include <span>
#include <string>
#include <tuple>
#include <type_traits>
#include <utility>
#include <vector>

#include "../tensor/indexing.h"
#include "../tensor/ops.h"
#include "../trace/pytree.h"
#include "../trace/pytree_fixed.h"
#include "../trace/stage.h"
#include "engine.h"
#include "inference_session.h"
#include "tensor_refs.h"

namespace kiln {

namespace detail {
struct CallPlan;
}

/// Results of a compiled call: the tensor leaves and the output tree.
/// Converts to the function's result type: `Tensor y = run(x);`,
/// `auto [a, b] = run(x).as<std::tuple<Tensor, Tensor>>();`.
struct CallResult {
  std::vector<Tensor> leaves;
  /// The output tree, shared with the callable (a compiled call copies no
  /// TreeDef); null reads as a single tensor leaf.
  std::shared_ptr<const TreeDef> tree;
  /// The result as R. For an R whose structure is its type's alone (a
  /// Tensor, tuples and KILN_PYTREE structs of tensors: pytree_fixed.h) the
  /// leaves are placed by position once the tree matches R's (the same tree
  /// object as last time: one pointer compare); otherwise (and for the error
  /// when it does not match) tree_unflatten. On a temporary
  /// (`run(x).as<R>()`) the leaves are moved into the result, not copied.
  template <class R> R as() const& {
    if constexpr (detail::FixedTree<R>::value) {
      if (leaves.size() == detail::FixedTree<R>::leaves && detail::is_fixed_treedef<R>(tree)) {
        const Tensor* p = leaves.data();
        return detail::FixedTree<R>::rebuild(p);
      }
    }
    return tree_unflatten<R>(tree ? *tree : TreeDef{}, leaves);
  }
  template <class R> R as() && {
    if constexpr (detail::FixedTree<R>::value) {
      if (leaves.size() == detail::FixedTree<R>::leaves && detail::is_fixed_treedef<R>(tree)) {
        Tensor* p = leaves.data();
        return detail::FixedTree<R>::rebuild(p);
      }
    }
    return tree_unflatten<R>(tree ? *tree : TreeDef{}, leaves);
  }
  template <class R> operator R() const& { return as<R>(); }  // NOLINT: implicit by design
  template <class R> operator R() && { return std::move(*this).template as<R>(); }  // NOLINT
  /// The single result tensor; throws ValueError when there are several.
  Tensor tensor() const;
  /// `run(x)[i]`: tensor()[i] (basic indexing of the single result, numpy's
  /// rules, tensor/indexing.h). ValueError when the call returned several tensors.
  IndexedTensor operator[](int64_t i) const { return tensor()[i]; }
};
/// Prints the result tensor, or the leaves in order, "(a, b, ...)".
std::ostream& operator<<(std::ostream& os, const CallResult& r);

// Arithmetic, comparison and logical operators on a call's result act on its
// single result tensor (CallResult::tensor(): ValueError when the call
// returned several), so `run(x) + 1`, `2.0 * run(x)`, `run(x) < y` and
// `run(x) - run(y)` read as they would on the Tensor the function returns.
namespace detail {
template <class T>
concept NotCallResult = !std::is_same_v<std::remove_cvref_t<T>, CallResult>;
}  // namespace detail
#define KILN_CALL_RESULT_OPERATOR(sym)                                                                       \
  template <detail::NotCallResult T>                                                                         \
  auto operator sym(const CallResult& r, const T& v)->decltype(std::declval<const Tensor&>() sym v) {        \
    return r.tensor() sym v;                                                                                 \
  }                                                                                                          \
  template <detail::NotCallResult T>                                                                         \
  auto operator sym(const T& v, const CallResult& r)->decltype(v sym std::declval<const Tensor&>()) {        \
    return v sym r.tensor();                                                                                 \
  }                                                                                                          \
  inline Tensor operator sym(const CallResult& a, const CallResult& b) { return a.tensor() sym b.tensor(); }
KILN_CALL_RESULT_OPERATOR(+)
KILN_CALL_RESULT_OPERATOR(-)
KILN_CALL_RESULT_OPERATOR(*)
KILN_CALL_RESULT_OPERATOR(/)
KILN_CALL_RESULT_OPERATOR(%)
KILN_CALL_RESULT_OPERATOR(==)
KILN_CALL_RESULT_OPERATOR(!=)
KILN_CALL_RESULT_OPERATOR(<)
KILN_CALL_RESULT_OPERATOR(<=)
KILN_CALL_RESULT_OPERATOR(>)
KILN_CALL_RESULT_OPERATOR(>=)
KILN_CALL_RESULT_OPERATOR(&)
KILN_CALL_RESULT_OPERATOR(|)
KILN_CALL_RESULT_OPERATOR(^)
#undef KILN_CALL_RESULT_OPERATOR
inline Tensor operator-(const CallResult& r) { return -r.tensor(); }
inline Tensor operator!(const CallResult& r) { return !r.tensor(); }
inline Tensor operator~(const CallResult& r) { return ~r.tensor(); }

class CompiledCallable {
 public:
  /// Compiles `staged` with `session` (null = the process default) and binds
  /// `weights` (name -> contiguous tensor). A missing or mis-typed weight
  /// throws ValueError naming it. Generated code is shared with other
  /// callables built from the same StagedGraph.
  CompiledCallable(StagedGraph staged, std::map<std::string, Tensor> weights = {},
                   std::shared_ptr<InferenceSession> session = nullptr);

  /// Checked call: tree structure (static values included), argument count,
  /// and each tensor's dtype, shape, device and stride class; errors name the
  /// argument path ("argument 0.1: expected float32[3, 4] cpu, got ...").
  /// Also checks that no captured constant changed since tracing, and (for a
  /// function that writes in place) that no tensor it writes shares memory
  /// with another argument, a captured tensor or a weight: the compiled code
  /// reads each as a separate tensor, so a read after the write would differ
  /// from eager; ValueError naming both positions (pass x.clone(), or use
  /// jit(fn), which handles such calls; jit/write_alias.h). Called
  /// while another function is traced (stage, compile, jit), the call is
  /// inlined: its graph's ops are recorded into that trace, its weights
  /// become weights of the outer graph bound to the same tensors (renamed
  /// "name_1", ... when the outer trace binds that name to another tensor),
  /// and its in-place writes become writes of the outer trace.
  /// Results alias what eager's alias: a result eager makes new is new
  /// memory (also where the optimiser reduced x * 1 to x), one returned as
  /// an argument or weight or a view of one aliases it, and one that is a
  /// tensor the function wrote in place (`x.exp_(); return x;`) is the
  /// caller's tensor itself (the handle passed), so writes into it reach
  /// the argument as eagerly; a view of such a tensor (`x.mul_(2); return
  /// x[1];`, `v = x[0]; x.add_(1); return v;`) is that view of the
  /// caller's tensor, taken after the write-back.
  template <class... Args>
  CallResult operator()(const Args&... args) const {
    using Sig = std::tuple<std::remove_cvref_t<Args>...>;
    if constexpr (detail::FixedTree<Sig>::value) {
      // Argument types whose tree is their type's alone (tensors, tuples and
      // KILN_PYTREE structs of tensors): the leaves' addresses gathered in
      // order (no handle copied: the call reads them where they are), no
      // TreeDef built; the type's tree is compared with the signature once.
      std::array<const Tensor*, detail::FixedTree<Sig>::leaves> leaves;
      const Tensor** p = leaves.data();
      (detail::FixedTree<std::remove_cvref_t<Args>>::gather(args, p), ...);
      return call_checked(std::span<const Tensor* const>(leaves), detail::fixed_treedef<Sig>(), true);
    } else {
      auto [leaves, tree] = tree_flatten(std::forward_as_tuple(args...));
      return call_flat(leaves, tree);
    }
  }
  /// The checked call on flattened arguments.
  CallResult call_flat(const std::vector<Tensor>& leaves, const TreeDef& tree) const;
  /// The checked call on the leaves of arguments whose tree is their types'
  /// alone, gathered in order (as operator() gathers them; jit's cached
  /// path): `fixed_tree` must be detail::fixed_treedef<T>() of their tuple
  /// type T (static storage: compared with the signature on the first call
  /// that passes it, then by address). Same checks and errors as call_flat.
  CallResult call_fixed(std::span<const Tensor> leaves, const TreeDef& fixed_tree) const {
    return call_checked(leaves, fixed_tree, true);
  }
  /// Runs on contiguous tensors in graph-input order without any check but
  /// the aliasing guard of a function that writes in place (ValueError, as
  /// for a checked call); returns the results in graph-output order. As for
  /// a checked call (and from_mef's callables), a result eager makes new
  /// (x * 1, even where the optimiser reduced it to x) is new memory, a
  /// result the function returns as an argument or a view of one aliases
  /// it, and a result that is an argument it wrote in place (`x.exp_();
  /// return x;`) is that input tensor itself (a view of it: that view of
  /// the input tensor).
  std::vector<Tensor> execute_raw(std::span<const Tensor> inputs) const;
  /// As above on raw buffers laid out as in_layouts (contiguous). A buffer
  /// smaller than its layout is a ValueError naming its position and the
  /// bytes expected and given; one on another device a DeviceError.
  std::vector<Buffer> execute_raw(const std::vector<Buffer>& buffers) const;

  const std::vector<TensorLayout>& in_layouts() const { return staged_.in_layouts; }
  const TreeDef& in_tree() const { return staged_.in_tree; }
  const std::vector<TensorLayout>& out_layouts() const { return staged_.out_layouts; }
  const TreeDef& out_tree() const { return staged_.out_tree; }
  /// The weights registry this callable was built with (read-only).
  const std::map<std::string, Tensor>& weights() const { return weights_; }
  /// How this callable's in-place writes (StagedGraph::writes) were done,
  /// summed over its calls: computed straight into the destination's memory,
  /// or computed elsewhere and copied in (bytes_copied counts those copies).
  struct WriteBackStats {
    int64_t in_place = 0, copied = 0;
    int64_t bytes_copied = 0;
  };
  WriteBackStats write_back_stats() const;
  /// Signal buffers for multi-device collectives: empty on one device.
  const std::vector<Buffer>& signal_buffers() const { return signal_buffers_; }
  /// The engine model (compiled artifact + bound weights).
  const engine::Model& engine_model() const { return *model_; }
  /// The staged graph this callable was compiled from. A callable rebuilt by
  /// from_compiled has the signature here and a null `graph`.
  const StagedGraph& staged() const { return staged_; }

  // ---- export and rebuilding --------------------------------------------------------------

  /// Writes the compiled callable to one MEF file (format in jit/mef.h): the
  /// optimised graph, the signature (argument layouts with stride classes,
  /// argument tree with static values, result layouts and tree), the names
  /// and types of the weights it expects (never their data), with
  /// `include_source_graph` the graph as staged, and a checksum. Load it with
  /// engine::read (or from_mef) to skip tracing and optimising. A symbolic
  /// link at `path` is followed (its target is replaced, the link stays).
  /// Throws ValueError naming the path when it cannot be written, or when it
  /// is a FIFO, a device or a socket (not replaced).
  void export_mef(const std::string& path, bool include_source_graph = false) const;

  /// The signature (in/out layouts and trees) as one value.
  engine::Signature signature() const;

  /// Wraps a graph compiled elsewhere (e.g. read from a MEF file), given its
  /// signature. `engine_model` is the model initialised from `artifact`, or
  /// null to bind `weights` to `artifact` here. Throws ValueError when the
  /// layouts do not match the artifact's graph inputs and outputs, a tree's
  /// leaf count differs from its layouts, `engine_model` runs another
  /// artifact, or (engine_model null) a weight is missing or mis-typed or
  /// `weights` names one the artifact does not list (strict, as from_mef).
  static CompiledCallable from_compiled(std::shared_ptr<const engine::CompiledModel> artifact,
                                        std::shared_ptr<engine::Model> engine_model,
                                        std::vector<TensorLayout> in_layouts, TreeDef in_tree,
                                        std::vector<TensorLayout> out_layouts, TreeDef out_tree,
                                        std::map<std::string, Tensor> weights = {});
  /// Wraps a graph that was compiled and initialised elsewhere from `staged`
  /// (engine::compile_graph(staged.graph, ...) then engine::Model). Throws
  /// ValueError when `engine_model` (required) runs another artifact or the
  /// artifact's graph does not match staged's signature.
  static CompiledCallable from_engine_model(StagedGraph staged, std::shared_ptr<const engine::CompiledModel> artifact,
                                            std::shared_ptr<engine::Model> engine_model,
                                            std::map<std::string, Tensor> weights = {});
  /// engine::read(path) then from_compiled with the file's signature and
  /// `weights`: a callable ready to run, with no tracing or optimisation.
  /// Strict, as PyTorch's load_state_dict(strict=True): `weights` must name
  /// exactly the weights the file lists (engine::read(path)->weight_slots());
  /// otherwise one ValueError lists every missing and every unexpected name.
  static CompiledCallable from_mef(const std::string& path, std::map<std::string, Tensor> weights = {},
                                   std::shared_ptr<InferenceSession> session = nullptr);

 private:
  struct FromParts {};
  CompiledCallable(FromParts, StagedGraph staged, std::map<std::string, Tensor> weights,
                   std::shared_ptr<InferenceSession> session, std::shared_ptr<engine::Model> model);
  void check_captured() const;
  // The checked call. `fixed_tree`: `tree` is a fixed_treedef (static
  // storage), so once found equal to the signature's its address is kept
  // and later calls with it compare one pointer.
  // The leaves are borrowed (detail::TensorRefs): handles or addresses.
  CallResult call_checked(detail::TensorRefs leaves, const TreeDef& tree, bool fixed_tree) const;
  // Nested tracing: records this callable's (optimised) graph into `outer`.
  CallResult inline_call(GraphRealizationContext& outer, detail::TensorRefs leaves) const;
  StagedGraph staged_;
  std::map<std::string, Tensor> weights_;
  // In-place writes: runs the model with each write computed straight into
  // its destination where that is safe (in_place_, and the call-time checks
  // of destinations()), then write_back copies the rest.
  // `checked`: the checked call matched every argument against the
  // signature (engine::Model's input checks are not repeated).
  std::vector<Tensor> run_model(detail::TensorRefs args, bool checked = false) const;
  // The destination tensor of each write (null: an unbound mutable weight).
  std::vector<const Tensor*> destinations(detail::TensorRefs args) const;
  // Copies the trailing results (staged_.writes) not already computed in
  // place into their arguments or mutable weights; drops them from `results`.
  void write_back(std::vector<Tensor>& results, detail::TensorRefs args) const;
  void plan_in_place();
  std::vector<char> in_place_;  // per write: the plan may compute it into the destination
  struct WriteCounters;
  std::shared_ptr<WriteCounters> counters_;
  std::shared_ptr<InferenceSession> session_;
  std::shared_ptr<engine::Model> model_;
  // What each call checks and copies, decided once (jit/call_plan.h).
  std::shared_ptr<const detail::CallPlan> call_plan_;
  std::vector<Buffer> signal_buffers_;
};

struct CompileOptions {
  /// Weights registry: name -> tensor data (contiguous).
  std::map<std::string, Tensor> weights;
  std::string name = "main";
  bool allow_subgraphs = true;
  /// null = the process-wide default session.
  std::shared_ptr<InferenceSession> session;
};

/// compile(fn, options)(specs...) -> CompiledCallable: stage fn on the specs
/// (see stage()) and compile the graph.
template <class F>
class Compiler {
 public:
  Compiler(F fn, CompileOptions opts) : fn_(std::move(fn)), opts_(std::move(opts)) {}
  template <class... Specs>
  CompiledCallable operator()(const Specs&... specs) const {
    StagedGraph s = stage(fn_, StageOptions{opts_.name, opts_.allow_subgraphs, {}})(specs...);
    return CompiledCallable(std::move(s), opts_.weights, opts_.session);
  }

 private:
  F fn_;
  CompileOptions opts_;
};

template <class F>
Compiler<F> compile(F fn, CompileOptions opts = {}) {
  return Compiler<F>(std::move(fn), std::move(opts));
}

}  // namespace kiln
