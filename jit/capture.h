// kiln (internal): the capture table behind engine::Model::capture/replay.
// A capture is a flat list of steps with every decision made at capture time
// (see engine.h for what a replay allocates).
#pragma once
#include <array>
#include <cstdint>
#include <memory>
#include <mutex>
#include <unordered_map>
#include <vector>

#include "engine.h"
#include "plan.h"

namespace kiln::cuda {
class RecordedGraph;
}

namespace kiln::engine::detail {

struct CapturedStep {
  enum class Kind : uint8_t {
    bound,  ///< a generated-code step (fused, row, fused reduction) bound to its buffers
    op,     ///< an eager kernel on pre-bound inputs; its result is copied into `dst`
    copy,   ///< dst = src (a strided view made contiguous for generated code, or a constant output)
  };
  Kind kind = Kind::op;
  // bound
  codegen::BoundStep bound;
  // op
  OpId op{};
  const Attrs* attrs = nullptr;
  std::vector<Tensor> args;
  // op and copy
  Tensor src, dst;
};

struct Capture {
  std::vector<Tensor> inputs;   ///< the captured input buffers (kept alive, so their addresses stay theirs)
  std::vector<Tensor> outputs;  ///< rewritten by each replay
  std::vector<CapturedStep> steps;
  std::vector<Tensor> keep;     ///< every intermediate buffer (CUDA: the device constants)
  /// A CUDA callable's capture: the recorded CUDA Graph (steps is empty;
  /// replay launches it).
  std::shared_ptr<cuda::RecordedGraph> graph;
};

/// The aliasing guard (jit/write_alias.h) of engine::Model::execute and
/// capture: ValueError naming `who`, when the artifact's signature writes an
/// input that shares memory with another input. Nothing for a graph that
/// writes nothing (or has no signature).
void check_input_write_alias(const CompiledModel& art, std::span<const Tensor> inputs, const char* who);

struct CaptureTable {
  std::mutex mu;
  std::unordered_map<uint64_t, std::shared_ptr<const Capture>> map;
};

}  // namespace kiln::engine::detail
