#include "engine.h"

#include <cctype>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <iterator>
#include <iostream>
#include <map>
#include <mutex>
#include <set>
#include <utility>

#include "../tensor/allocation_error.h"
#include "../tensor/mutation.h"
#include "../trace/passes/passes.h"
#include "../trace/treedef_io.h"
#include "capture.h"
#include "cuda_executable.h"
#include "fresh_results.h"
#include "mef.h"
#include "mef_graph.h"
#include "mef_plan.h"
#include "plan.h"
#include "write_alias.h"
#include "write_in_place.h"

namespace kiln::engine {

CompiledModel::CompiledModel(std::shared_ptr<const Graph> source, std::shared_ptr<const Graph> optimized,
                             std::shared_ptr<const codegen::ExecutionPlan> plan)
    : source_(std::move(source)), optimized_(std::move(optimized)), plan_(std::move(plan)) {}

CompiledModel::CompiledModel(std::shared_ptr<const Graph> source, std::shared_ptr<const Graph> optimized,
                             std::shared_ptr<const codegen::ExecutionPlan> plan,
                             std::shared_ptr<const Signature> signature, MefOrigin origin)
    : source_(std::move(source)),
      optimized_(std::move(optimized)),
      plan_(std::move(plan)),
      signature_(std::move(signature)),
      origin_(std::move(origin)),
      loaded_from_mef_(true) {}

const std::vector<std::pair<std::string, TensorType>>& CompiledModel::weight_slots() const {
  return plan_->weight_slots();
}

namespace {
std::mutex g_artifacts_mu;
// Artifacts by staged graph: binding other weights to the same staged graph
// reuses the generated code. The artifact holds its source graph, so a live
// entry's key cannot be a reused address.
std::map<std::pair<const Graph*, const InferenceSession*>, std::weak_ptr<const CompiledModel>> g_artifacts;
}  // namespace

// ---- the session's MEF folders ---------------------------------------------------------

namespace {
std::mutex g_mef_stats_mu;
MefCacheStats g_mef_stats;

void note_rejection(const std::string& why) {
  std::lock_guard<std::mutex> lock(g_mef_stats_mu);
  ++g_mef_stats.rejected;
  g_mef_stats.last_rejection = why;
}

// The signature a graph implies when its callable gave none: contiguous
// arguments and results, as a flat tuple.
Signature implied_signature(const Graph& g) {
  Signature s;
  s.in_tree.kind = s.out_tree.kind = TreeDef::Kind::tuple;
  for (int32_t v : g.input_ids()) {
    s.in_layouts.push_back(g.type(v).layout());
    s.in_tree.children.emplace_back();
  }
  for (int32_t v : g.output_ids()) {
    s.out_layouts.push_back(g.type(v).layout());
    s.out_tree.children.emplace_back();
  }
  return s;
}

// FNV-1a, 64-bit: the file key needs to be stable across runs and builds.
uint64_t fnv1a(std::string_view a, uint64_t h = 1469598103934665603ull) {
  for (unsigned char c : a) h = (h ^ c) * 1099511628211ull;
  return h;
}

// "<graph name>-<16 hex digits>.mef", the name kept to file-name-safe characters.
std::string mef_file_name(const std::string& graph_name, const std::string& source_text, const std::string& sig) {
  std::string n;
  for (char c : graph_name) n += (std::isalnum(static_cast<unsigned char>(c)) || c == '_' || c == '-' || c == '.') ? c : '_';
  if (n.empty() || n[0] == '.') n = "graph" + n;
  char hex[17];
  std::snprintf(hex, sizeof hex, "%016llx", static_cast<unsigned long long>(fnv1a(sig, fnv1a(source_text))));
  return n + "-" + hex + ".mef";
}

// A precompiled file for exactly this staged graph and signature, or null.
std::shared_ptr<const CompiledModel> load_precompiled(const std::string& path, const std::shared_ptr<const Graph>& staged,
                                                      const std::string& source_text, const Signature& sig,
                                                      const KernelOptions& options) {
  std::error_code ec;
  if (!std::filesystem::exists(path, ec)) return nullptr;
  try {
    std::ifstream f(path, std::ios::binary);
    std::string bytes((std::istreambuf_iterator<char>(f)), std::istreambuf_iterator<char>());
    mef::Contents c = mef::decode(bytes, path);
    // The name is a hash: check the file really is for this graph and signature.
    if (c.source_text != source_text) {
      note_rejection("'" + path + "' holds another graph (its source graph differs)");
      return nullptr;
    }
    if (!(c.signature == sig)) {
      note_rejection("'" + path + "' has another signature");
      return nullptr;
    }
    c.source_text.clear();  // the staged graph is the source: no need to parse it again
    auto read = mef::build(c, options, path);
    std::lock_guard<std::mutex> lock(g_mef_stats_mu);
    ++g_mef_stats.loaded;
    return std::make_shared<const CompiledModel>(staged, std::shared_ptr<const Graph>(read, &read->graph()),
                                                 std::shared_ptr<const codegen::ExecutionPlan>(read, &read->plan()),
                                                 std::make_shared<const Signature>(sig), read->mef_origin());
  } catch (const Error& e) {
    note_rejection(e.what());
    return nullptr;
  }
}
}  // namespace

MefCacheStats mef_cache_stats() {
  std::lock_guard<std::mutex> lock(g_mef_stats_mu);
  return g_mef_stats;
}


namespace {
// Writes one file of a session's export folder. The folder is a cache: a
// failure (no permission, a full disk, a file where the folder should be)
// never fails the compile; it is reported once per folder on stderr, naming
// the folder and the OS error. Returns whether the file was written.
bool export_mef_file(const std::string& folder, const std::string& file_name, const std::string& bytes) {
  std::string why;
  std::error_code ec;
  std::filesystem::create_directories(folder, ec);
  if (ec) {
    why = "cannot create the folder: " + ec.message();
  } else {
    try {
      mef::write_file_atomically((std::filesystem::path(folder) / file_name).string(), bytes,
                                 "InferenceSession export_mefs");
      return true;
    } catch (const Error& e) {
      why = e.what();
    }
  }
  static std::mutex mu;
  static std::set<std::string> warned;
  std::lock_guard<std::mutex> lock(mu);
  if (warned.insert(folder).second)
    std::cerr << "kiln: warning: InferenceSession export_mefs folder '" << folder
              << "' is not writable, so compiled graphs are not exported there (compiling goes on; this is reported "
                 "once per folder): "
              << why << "\n";
  return false;
}

// Whether a session's precompiled folder can be read; when it is missing or
// not a folder, stderr gets one warning per folder (as the export folder's),
// unless it is also the export folder (the first run creates it).
bool precompiled_folder_usable(const InferenceSession& session) {
  const std::string& folder = session.precompiled_mefs;
  std::error_code ec;
  if (std::filesystem::is_directory(folder, ec)) return true;
  if (folder == session.export_mefs) return false;
  const bool exists = std::filesystem::exists(folder, ec);
  static std::mutex mu;
  static std::set<std::string> warned;
  std::lock_guard<std::mutex> lock(mu);
  if (warned.insert(folder).second)
    std::cerr << "kiln: warning: InferenceSession precompiled_mefs folder '" << folder << "' "
              << (exists ? "is not a folder" : "does not exist")
              << ", so no precompiled graphs are read from it (compiling goes on; this is reported once per folder)\n";
  return false;
}
}  // namespace

std::shared_ptr<const CompiledModel> compile_graph(const std::shared_ptr<const Graph>& staged, InferenceSession& session) {
  return compile_graph(staged, session, nullptr);
}

std::shared_ptr<const CompiledModel> compile_graph(const std::shared_ptr<const Graph>& staged, InferenceSession& session,
                                                   const Signature* signature) {
  const auto key = std::make_pair(staged.get(), &session);
  {
    std::lock_guard<std::mutex> lock(g_artifacts_mu);
    auto it = g_artifacts.find(key);
    if (it != g_artifacts.end())
      if (auto a = it->second.lock()) return a;
  }
  staged->verify();
  const bool use_folders = !session.precompiled_mefs.empty() || !session.export_mefs.empty();
  std::string source_text, file_name;
  Signature sig;
  if (use_folders) {
    source_text = staged->to_text();
    sig = signature ? *signature : implied_signature(*staged);
    file_name = mef_file_name(staged->name(), source_text, mef::encode_signature(sig));
  }
  std::shared_ptr<const CompiledModel> art;
  if (!session.precompiled_mefs.empty() && precompiled_folder_usable(session))
    art = load_precompiled((std::filesystem::path(session.precompiled_mefs) / file_name).string(), staged, source_text,
                           sig, session.options());
  if (!art) {
    std::shared_ptr<Graph> flat = inline_calls(*staged);
    // Results eager makes new stay new where the optimiser reduced them to
    // an input (x * 1): decided here, recorded in the graph (fresh_results.h).
    const size_t nwrites = signature ? signature->writes.size() : 0;
    const kiln::detail::ResultKinds kinds = kiln::detail::classify_results(*flat, nwrites);
    optimize(*flat);
    kiln::detail::separate_results(*flat, nwrites, kinds);
    flat->verify();
    auto plan = std::make_shared<codegen::ExecutionPlan>(flat, session.options());
    if (session.options().dump)
      std::cerr << "[kiln jit] optimised graph:\n" << flat->to_text() << "[kiln jit] plan:\n" << plan->describe(true);
    auto model = std::make_shared<CompiledModel>(staged, flat, plan);
    if (const int dev = codegen::cuda_device_of(*flat); dev >= 0)
      model->set_cuda_plan(std::make_shared<const codegen::CudaExecutable>(flat, session.options(), dev));
    art = model;
    if (!session.export_mefs.empty()) {
      mef::Contents c;
      c.graph_text = flat->to_text();
      c.graph_binary = mef::encode_graph_binary(*flat);
      c.signature = sig;
      c.weights = plan->weight_slots();
      c.source_text = source_text;
      c.code = mef::code_of(*plan);
      c.plan = mef::encode_plan(*plan);
      if (const codegen::CudaExecutable* cx = model->cuda_plan()) c.cubin = cx->stored_module();
      if (export_mef_file(session.export_mefs, file_name, mef::encode(c))) {
        std::lock_guard<std::mutex> lock(g_mef_stats_mu);
        ++g_mef_stats.exported;
      }
    }
  }
  std::lock_guard<std::mutex> lock(g_artifacts_mu);
  for (auto it = g_artifacts.begin(); it != g_artifacts.end();)  // drop expired entries
    it = it->second.expired() ? g_artifacts.erase(it) : std::next(it);
  g_artifacts[key] = art;
  return art;
}

Model::~Model() = default;

Model::Model(std::shared_ptr<const CompiledModel> artifact, const std::map<std::string, Tensor>& weights,
             std::string_view who, std::string_view source)
    : artifact_(std::move(artifact)), captures_(std::make_unique<detail::CaptureTable>()) {
  const std::string w0 = std::string(who) + ": weight '";
  for (const auto& [name, type] : artifact_->weight_slots()) {
    auto it = weights.find(name);
    if (it == weights.end())
      throw ValueError(w0 + name + "' (" + type.str() + ") is missing from " + std::string(source) +
                       "; bind a tensor of that type under that name");
    const Tensor& w = it->second;
    if (!w.defined())
      throw ValueError(w0 + name + "' is an undefined tensor in " + std::string(source) + "; expected " + type.str());
    TensorType got(w.dtype(), w.shape(), w.device());
    if (!(got == type))
      throw ValueError(w0 + name + "' expects " + type.str() + ", got " + got.str() + " in " + std::string(source));
    if (!w.is_contiguous())
      throw ValueError(w0 + name + "' must be contiguous (pass .contiguous())");
    bound_.push_back(w);
  }
  const Graph& g = artifact_->plan().graph();
  for (int32_t v : g.input_ids()) {
    const TensorType& t = g.type(v);
    input_checks_.push_back({t.dtype, t.device, t.shape});
  }
}

namespace {
[[noreturn]] void bad_input(size_t i, const std::string& what, const std::string& want, const std::string& got,
                            int kind) {
  const std::string m = "execute: input " + std::to_string(i) + ": expected " + what + " " + want + ", got " + got;
  if (kind == 0) throw DTypeError(m);
  if (kind == 1) throw DeviceError(m);
  if (kind == 2) throw ShapeError(m);
  throw ValueError(m);
}
}  // namespace

namespace detail {
void check_input_write_alias(const CompiledModel& art, std::span<const Tensor> inputs, const char* who) {
  const Signature* sig = art.signature();
  if (!sig || sig->writes.empty()) return;
  static const std::map<std::string, Tensor> no_weights;
  static const std::vector<CapturedConstant> no_captured;
  if (inputs.size() != art.graph().input_ids().size()) return;  // the count error comes next
  if (auto a = kiln::detail::find_write_alias(inputs, sig->writes, {}, {}, no_weights, no_captured))
    throw ValueError(kiln::detail::write_alias_message(std::string(who) + " of '" + art.graph().name() + "'", *a,
                                                       sig->in_tree, no_captured, art.loaded_from_mef()));
}
}  // namespace detail

std::vector<Tensor> Model::execute(std::span<const Tensor> inputs) const {
  detail::check_input_write_alias(*artifact_, inputs, "engine::Model::execute");
  std::vector<Tensor> out;
  execute_into(inputs, out);
  return out;
}

namespace {
std::string layout_str(const Tensor& t) {
  std::string s = std::string(name(t.dtype())) + shape_str(t.shape()) + " " + t.device().str();
  if (!t.is_realized()) return s + " (unrealized)";
  if (t.is_contiguous()) return s + " contiguous";
  std::string st;
  for (int64_t x : t.strides()) st += (st.empty() ? "" : ", ") + std::to_string(x);
  return s + " with strides [" + st + "] (not contiguous)";
}

// F1 (tester t17): the plan computes output k into a defined outputs[k]
// through its data pointer as a contiguous tensor of output k's type (and
// the CUDA path replaces it), so a wrong dtype was reinterpreted, a smaller
// shape written past its buffer, a strided view filled in memory order.
// Each defined output is checked as the inputs are; the message names
// `who`, the output index, the layout expected and what came.
void check_given_outputs(const Graph& g, std::span<const Tensor> outputs, const char* who) {
  const auto& ids = g.output_ids();
  if (outputs.size() > ids.size())
    throw ValueError(std::string(who) + ": " + std::to_string(outputs.size()) + " output tensors given, the graph has " +
                     std::to_string(ids.size()) + " outputs");
  for (size_t k = 0; k < outputs.size(); ++k) {
    const Tensor& t = outputs[k];
    if (!t.defined()) continue;  // computed into memory of its own
    const TensorType& want = g.type(ids[k]);
    const std::string head = std::string(who) + ": output " + std::to_string(k) + ": expected " + want.str() +
                             " contiguous (or an undefined tensor), got " + layout_str(t);
    if (t.dtype() != want.dtype) throw DTypeError(head);
    if (!(t.device() == want.device)) throw DeviceError(head);
    if (t.shape() != want.shape) throw ShapeError(head);
    if (!t.is_realized()) throw ValueError(head + "; realize it first (.realize())");
    if (!t.is_contiguous())
      throw ValueError(head + "; the result is written in memory order, so pass a contiguous tensor (a strided view "
                              "would get its elements in the wrong places)");
  }
  // Two outputs in one memory: each is computed into it, so one would hold
  // the other's value (the same graph value given twice is harmless).
  for (size_t k = 0; k < outputs.size(); ++k)
    for (size_t j = 0; j < k; ++j)
      if (outputs[k].defined() && outputs[j].defined() && may_share_memory(outputs[k], outputs[j]) &&
          !(ids[k] == ids[j] && kiln::detail::identical_tensors(outputs[k], outputs[j])))
        throw ValueError(std::string(who) + ": outputs " + std::to_string(j) + " and " + std::to_string(k) +
                         " share memory (" + layout_str(outputs[j]) + ", " + layout_str(outputs[k]) +
                         "); each output is computed into the memory given for it, so one would hold the other's "
                         "value. Pass separate tensors, or an undefined tensor for one of them");
}
}  // namespace

namespace {
// Outputs given memory that overlaps an input or a bound weight (numpy's
// out= with overlap): the plan reads its operands while it writes its
// outputs, so such an output is computed where it was given only when the
// plan provably reads every element of that operand before writing over it
// (codegen::in_place_writes: the output is the operand's own memory, made
// by a generated elementwise step reading element i only to write element
// i, and nothing reads the operand later); any other overlap (a transpose,
// a matmul, a reduction, a broadcast read, a later step reading the input,
// a partial or shifted overlap, two operands in that memory) is computed
// into memory of its own and copied into the given tensor once the plan has
// run. Returns the indices of the outputs to compute elsewhere.
std::vector<size_t> outputs_to_buffer(const codegen::ExecutionPlan& plan, std::span<const Tensor> inputs,
                                      std::span<const Tensor> weights, std::span<const Tensor> outputs) {
  std::vector<size_t> r;
  const Graph& g = plan.graph();
  if (inputs.size() != g.input_ids().size()) return r;  // the count error comes next
  for (size_t k = 0; k < outputs.size(); ++k) {
    const Tensor& o = outputs[k];
    if (!o.defined()) continue;
    int overlaps = 0;
    WriteBack operand;
    const Tensor* same = nullptr;
    for (size_t i = 0; i < inputs.size(); ++i)
      if (inputs[i].defined() && inputs[i].is_realized() && may_share_memory(inputs[i], o)) {
        ++overlaps;
        operand = WriteBack{static_cast<int32_t>(i), ""};
        same = &inputs[i];
      }
    for (size_t j = 0; j < weights.size(); ++j)
      if (may_share_memory(weights[j], o)) {
        ++overlaps;
        operand = WriteBack{-1, plan.weight_slots()[j].first};
        same = &weights[j];
      }
    if (overlaps == 0) continue;
    const bool in_place = overlaps == 1 && kiln::detail::identical_tensors(*same, o) &&
                          codegen::in_place_writes(plan, k, std::vector<WriteBack>{operand})[0];
    if (!in_place) r.push_back(k);
  }
  return r;
}
}  // namespace

void Model::execute_into(std::span<const Tensor> inputs, std::vector<Tensor>& out) const {
  check_given_outputs(artifact_->plan().graph(), out, "engine::Model::execute_into");
  // (The CUDA plan computes into memory of its own: nothing given is written.)
  std::vector<size_t> buffered;
  if (!artifact_->cuda_plan()) buffered = outputs_to_buffer(artifact_->plan(), inputs, bound_, out);
  if (buffered.empty()) {
    run_into(inputs, out, false);
    return;
  }
  std::vector<Tensor> dest(out.size());
  for (size_t k : buffered) dest[k] = std::exchange(out[k], Tensor());
  run_into(inputs, out, false);
  // A result that is still an input's memory (a view passed through) is
  // read before any copy below overwrites it.
  for (size_t k : buffered)
    for (size_t j : buffered)
      if (may_share_memory(out[k], dest[j]) && !(j == k && kiln::detail::identical_tensors(out[k], dest[j]))) {
        out[k] = out[k].clone();
        break;
      }
  for (size_t k : buffered) {
    if (!kiln::detail::identical_tensors(out[k], dest[k])) dest[k].copy_(out[k]);
    out[k] = std::move(dest[k]);
  }
}

void Model::run_into(kiln::detail::TensorRefs inputs, std::vector<Tensor>& out, bool checked) const {
  const size_t want = artifact_->plan().graph().input_ids().size();
  if (!checked || inputs.size() != want) {
    // No layout checks here (the fast path), but a wrong count would read
    // past the span: one comparison keeps that an error.
    if (inputs.size() != want)
      throw ValueError("execute: expected " + std::to_string(want) + " input tensors (graph order), got " +
                       std::to_string(inputs.size()));
    // A few compares per input (issue 11: a too-small or wrong-dtype input
    // must not be read out of bounds or reinterpreted). A realized tensor is a
    // view checked against its buffer, so the right shape means enough bytes.
    for (size_t i = 0; i < want; ++i) {
      const Tensor& t = inputs[i];
      const InputCheck& c = input_checks_[i];
      if (!t.defined()) bad_input(i, "a", "tensor", "an undefined one", 3);
      if (t.dtype() != c.dtype) bad_input(i, "dtype", std::string(name(c.dtype)), std::string(name(t.dtype())), 0);
      if (!(t.device() == c.device)) bad_input(i, "device", c.device.str(), t.device().str(), 1);
      if (t.shape() != c.shape) bad_input(i, "shape", shape_str(c.shape), shape_str(t.shape()), 2);
    }
  }
  try {
    if (const codegen::CudaExecutable* c = artifact_->cuda_plan()) {
      out = c->run(inputs.to_vector(), bound_);
      return;
    }
    artifact_->plan().run(inputs, bound_, out);
  } catch (...) {
    kiln::detail::rethrow_allocation_error_as("compiled call (its results and scratch)");
  }
}

}  // namespace kiln::engine
