// kiln benchmark (issue 5): replay overhead next to a plain call's, and
// engine::read of a 1,000-node graph next to the original compile.
//   BM_call_1elem         checked compiled call on 1-element inputs
//   BM_execute_raw_1elem  execute_raw (no checks) on the same
//   BM_replay_1elem       replay of a capture on the same   (budget <= 0.2 us)
//   BM_*_arena            the same on a plan with two 16x16 matmul intermediates
//                         in its scratch arena (issue 18: reused, not allocated)
//   BM_*_op_step          the same on a plan with a non-fused step (cumsum)
//                         between fused ones (replay writes it in place)
//   BM_compile_1000       optimise + plan + generate code for the staged graph
//   BM_read_1000          engine::read of its MEF file (from memory)  (budget <= 20 ms)
//   BM_read_1000_code     the same file with its CODE section (elementwise kernels
//                         and generated GEMMs placed, not generated)
//   BM_read_1000_plan     the file with its PLAN section: no planning (code generated)
//   BM_read_1000_code_plan  CODE and PLAN: no planning, no code generation
//                         (issue 18: budget <= 0.2 ms); BM_stage_* split it up
//   BM_read_1000_code_plan_kept        the same without freeing the previous read's model
//   BM_read_1000_code_plan_first_call  that read + binding + the first call
//   BM_read_1000_text_code_plan_kept   the read of a file without GRPB (the graph from its text)
//   BM_call_1000          a cached call of the compiled graph (execute_raw), for reference
// The graph of the last two has about 1,000 nodes after optimisation (see
// the `nodes` counter): 250 rounds of matmul -> add a constant -> tanh.
#include <benchmark/benchmark.h>

#include <kiln/kiln.h>

#include "bench_report.h"
#include "../jit/mef.h"
#include "../jit/mef_graph.h"
#include "../jit/mef_plan.h"
#include "../jit/plan.h"

namespace {

using namespace kiln;

TensorLayout f32(Shape s) { return TensorLayout(DType::float32, std::move(s)); }

CompiledCallable tiny() {
  return compile([](Tensor x, Tensor y) { return x * y + 1.0f; })(f32({1}), f32({1}));
}

void BM_call_1elem(benchmark::State& st) {
  CompiledCallable run = tiny();
  Tensor x = ones({1}), y = ones({1});
  for (auto _ : st) benchmark::DoNotOptimize(run(x, y).leaves.data());
}
BENCHMARK(BM_call_1elem);

void BM_execute_raw_1elem(benchmark::State& st) {
  CompiledCallable run = tiny();
  std::vector<Tensor> in{ones({1}), ones({1})};
  for (auto _ : st) benchmark::DoNotOptimize(run.execute_raw(std::span<const Tensor>(in)).data());
}
BENCHMARK(BM_execute_raw_1elem);

void BM_replay_1elem(benchmark::State& st) {
  CompiledCallable run = tiny();
  std::vector<Tensor> in{ones({1}), ones({1})};
  const engine::Model& m = run.engine_model();
  std::vector<Tensor> out = m.capture(1, in);
  std::span<const Tensor> span(in);
  for (auto _ : st) {
    m.replay(1, span);
    benchmark::ClobberMemory();
  }
  m.release(1);
}
BENCHMARK(BM_replay_1elem);

CompiledCallable with_arena() {
  return compile([](Tensor x, Tensor w) { return tanh(matmul(relu(matmul(x, w)), w)); })(f32({16, 16}),
                                                                                         f32({16, 16}));
}
CompiledCallable with_op_step() {
  return compile([](Tensor x) { return cumsum(exp(x), 0) * 2.0f; })(f32({64}));
}

void run_call(benchmark::State& st, const CompiledCallable& run, const std::vector<Tensor>& in) {
  for (auto _ : st) benchmark::DoNotOptimize(run.call_flat(in, run.in_tree()).leaves.data());
}
void run_execute_raw(benchmark::State& st, const CompiledCallable& run, const std::vector<Tensor>& in) {
  for (auto _ : st) benchmark::DoNotOptimize(run.execute_raw(std::span<const Tensor>(in)).data());
}
void run_replay(benchmark::State& st, const CompiledCallable& run, const std::vector<Tensor>& in) {
  const engine::Model& m = run.engine_model();
  std::vector<Tensor> out = m.capture(1, in);
  for (auto _ : st) {
    m.replay(1, in);
    benchmark::ClobberMemory();
  }
  m.release(1);
}
void BM_call_arena(benchmark::State& st) { run_call(st, with_arena(), {ones({16, 16}), ones({16, 16}) * 0.1f}); }
BENCHMARK(BM_call_arena);
void BM_execute_raw_arena(benchmark::State& st) {
  run_execute_raw(st, with_arena(), {ones({16, 16}), ones({16, 16}) * 0.1f});
}
BENCHMARK(BM_execute_raw_arena);
void BM_replay_arena(benchmark::State& st) { run_replay(st, with_arena(), {ones({16, 16}), ones({16, 16}) * 0.1f}); }
BENCHMARK(BM_replay_arena);
void BM_execute_raw_op_step(benchmark::State& st) { run_execute_raw(st, with_op_step(), {ones({64})}); }
BENCHMARK(BM_execute_raw_op_step);
void BM_replay_op_step(benchmark::State& st) { run_replay(st, with_op_step(), {ones({64})}); }
BENCHMARK(BM_replay_op_step);

StagedGraph big_staged() {
  auto f = [](Tensor x, Tensor w) {
    Tensor h = x;
    for (int i = 0; i < 250; ++i) h = tanh(matmul(h, w) + static_cast<float>(i) * 0.01f);
    return h;
  };
  return stage(f)(f32({4, 8}), f32({8, 8}));
}

void BM_compile_1000(benchmark::State& st) {
  StagedGraph s = big_staged();
  size_t nodes = 0;
  for (auto _ : st) {
    InferenceSession session;  // a new session: nothing cached
    auto art = engine::compile_graph(s.graph, session, nullptr);
    nodes = art->graph().num_nodes();
    benchmark::DoNotOptimize(art.get());
  }
  st.counters["nodes"] = static_cast<double>(nodes);
}
BENCHMARK(BM_compile_1000)->Unit(benchmark::kMillisecond);

mef::Contents contents_1000(bool with_code, bool with_plan, const CompiledCallable& run) {
  const engine::CompiledModel& art = run.engine_model().artifact();
  mef::Contents c;
  c.graph_text = art.graph().to_text();
  c.graph_binary = mef::encode_graph_binary(art.graph());
  c.signature = run.signature();
  c.weights = art.weight_slots();
  if (with_code) c.code = mef::code_of(art.plan());
  if (with_plan) c.plan = mef::encode_plan(art.plan());
  return c;
}

void read_1000(benchmark::State& st, bool with_code, bool with_plan) {
  CompiledCallable run(big_staged());
  const engine::CompiledModel& art = run.engine_model().artifact();
  const std::string bytes = mef::encode(contents_1000(with_code, with_plan, run));
  for (auto _ : st) benchmark::DoNotOptimize(engine::read_bytes(bytes, "bench").get());
  st.counters["nodes"] = static_cast<double>(art.graph().num_nodes());
  st.counters["steps"] = static_cast<double>(art.plan().steps().size());
  st.counters["file_bytes"] = static_cast<double>(bytes.size());
}
void BM_read_1000(benchmark::State& st) { read_1000(st, false, false); }
BENCHMARK(BM_read_1000)->Unit(benchmark::kMillisecond);
void BM_read_1000_code(benchmark::State& st) { read_1000(st, true, false); }
BENCHMARK(BM_read_1000_code)->Unit(benchmark::kMillisecond);
void BM_read_1000_plan(benchmark::State& st) { read_1000(st, false, true); }
BENCHMARK(BM_read_1000_plan)->Unit(benchmark::kMillisecond);
void BM_read_1000_code_plan(benchmark::State& st) { read_1000(st, true, true); }
BENCHMARK(BM_read_1000_code_plan)->Unit(benchmark::kMillisecond);

// The same file read without the time it takes to free what the previous
// read made (the models are kept and freed 64 at a time, timing paused), and
// read + the first call (engine::Model bound, one execute on 4x8 and 8x8
// inputs), with the cached call alone for reference.
void read_kept(benchmark::State& st, bool call, bool with_binary) {
  CompiledCallable run(big_staged());
  mef::Contents c = contents_1000(true, true, run);
  if (!with_binary) c.graph_binary.clear();
  const std::string bytes = mef::encode(c);
  const std::vector<Tensor> in{ones({4, 8}) * 0.1f, ones({8, 8}) * 0.1f};
  std::vector<std::shared_ptr<const engine::CompiledModel>> kept;
  std::vector<std::vector<Tensor>> results;
  kept.reserve(64);
  results.reserve(64);
  for (auto _ : st) {
    kept.push_back(engine::read_bytes(bytes, "bench"));
    if (call) {
      engine::Model m(kept.back(), {});
      results.push_back(m.execute(in));
    }
    if (kept.size() == 64) {
      st.PauseTiming();
      kept.clear();
      results.clear();
      st.ResumeTiming();
    }
  }
  st.counters["file_bytes"] = static_cast<double>(bytes.size());
}
void BM_read_1000_code_plan_kept(benchmark::State& st) { read_kept(st, false, true); }
BENCHMARK(BM_read_1000_code_plan_kept)->Unit(benchmark::kMicrosecond);
void BM_read_1000_code_plan_first_call(benchmark::State& st) { read_kept(st, true, true); }
BENCHMARK(BM_read_1000_code_plan_first_call)->Unit(benchmark::kMicrosecond);
void BM_read_1000_text_code_plan_kept(benchmark::State& st) { read_kept(st, false, false); }
BENCHMARK(BM_read_1000_text_code_plan_kept)->Unit(benchmark::kMicrosecond);
void BM_call_1000(benchmark::State& st) {
  CompiledCallable run(big_staged());
  const std::vector<Tensor> in{ones({4, 8}) * 0.1f, ones({8, 8}) * 0.1f};
  for (auto _ : st) benchmark::DoNotOptimize(run.execute_raw(std::span<const Tensor>(in)));
}
BENCHMARK(BM_call_1000)->Unit(benchmark::kMicrosecond);

// The stages of BM_read_1000_code_plan, each alone:
//   BM_stage_decode_1000      framing, checksum (CRC-32 of the whole file, jit/mef_crc.h), section decoding
//   BM_stage_crc_1000         the checksum alone
//   BM_stage_parse_1000       Graph::parse of the graph section (parse + verify)
//   BM_stage_binary_1000      the graph built from its GRPB section (decode + verify)
//   BM_stage_verify_1000      Graph::verify alone
//   BM_stage_images_1000      the CODE section's images checked (hashes) for this key
//   BM_stage_plan_1000        the plan restored from PLAN (steps, kernels placed, checks)
void BM_stage_decode_1000(benchmark::State& st) {
  CompiledCallable run(big_staged());
  const std::string bytes = mef::encode(contents_1000(true, true, run));
  for (auto _ : st) benchmark::DoNotOptimize(mef::decode(bytes, "bench").graph_text.size());
}
BENCHMARK(BM_stage_decode_1000)->Unit(benchmark::kMicrosecond);
void BM_stage_crc_1000(benchmark::State& st) {
  CompiledCallable run(big_staged());
  const std::string bytes = mef::encode(contents_1000(true, true, run));
  std::string copy = bytes;
  for (auto _ : st) {
    mef::reseal(copy);
    benchmark::DoNotOptimize(copy.data());
  }
  st.counters["file_bytes"] = static_cast<double>(bytes.size());
}
BENCHMARK(BM_stage_crc_1000)->Unit(benchmark::kMicrosecond);
void BM_stage_parse_1000(benchmark::State& st) {
  CompiledCallable run(big_staged());
  const std::string text = run.engine_model().artifact().graph().to_text();
  for (auto _ : st) benchmark::DoNotOptimize(Graph::parse(text).get());
  st.counters["text_bytes"] = static_cast<double>(text.size());
}
BENCHMARK(BM_stage_parse_1000)->Unit(benchmark::kMicrosecond);
void BM_stage_binary_1000(benchmark::State& st) {
  CompiledCallable run(big_staged());
  const std::string bin = mef::encode_graph_binary(run.engine_model().artifact().graph());
  for (auto _ : st) benchmark::DoNotOptimize(mef::decode_graph_binary(bin, "bench").get());
  st.counters["binary_bytes"] = static_cast<double>(bin.size());
}
BENCHMARK(BM_stage_binary_1000)->Unit(benchmark::kMicrosecond);
void BM_stage_verify_1000(benchmark::State& st) {
  CompiledCallable run(big_staged());
  const Graph& g = run.engine_model().artifact().graph();
  for (auto _ : st) g.verify();
}
BENCHMARK(BM_stage_verify_1000)->Unit(benchmark::kMicrosecond);
void BM_stage_images_1000(benchmark::State& st) {
  CompiledCallable run(big_staged());
  const mef::Contents c = contents_1000(true, true, run);
  const std::string key = run.engine_model().artifact().plan().code_feature_key();
  for (auto _ : st) benchmark::DoNotOptimize(mef::usable_images(c, key, nullptr).size());
}
BENCHMARK(BM_stage_images_1000)->Unit(benchmark::kMicrosecond);
void BM_stage_plan_1000(benchmark::State& st) {
  CompiledCallable run(big_staged());
  const mef::Contents c = contents_1000(true, true, run);
  const engine::CompiledModel& art = run.engine_model().artifact();
  const std::shared_ptr<const Graph> g(run.engine_model().artifact_ptr(), &art.graph());
  const codegen::CodeImages images = mef::usable_images(c, art.plan().code_feature_key(), nullptr);
  KernelOptions opt;
  for (auto _ : st) benchmark::DoNotOptimize(mef::decode_plan(c.plan, g, opt, &images, "bench").get());
  st.counters["plan_bytes"] = static_cast<double>(c.plan.size());
}
BENCHMARK(BM_stage_plan_1000)->Unit(benchmark::kMicrosecond);

}  // namespace

int main(int argc, char** argv) {
  using kb::compare;
  compare({"replay of a capture, 1-element inputs", "BM_replay_1elem", {"BM_call_1elem"}, "<= 0.2 us", {}, true});
  compare({"execute_raw, 1-element inputs (vs the checked call)", "BM_execute_raw_1elem", {"BM_call_1elem"},
           "reported", {}, true});
  compare({"engine::read, 1,000-node MEF without CODE/PLAN (vs compiling it)", "BM_read_1000", {"BM_compile_1000"},
           "<= 20 ms", {}, true});
  compare({"engine::read, 1,000-node MEF with CODE and PLAN (vs compiling it)", "BM_read_1000_code_plan",
           {"BM_compile_1000"}, "<= 0.2 ms (issue 18)", {}, true});
  return kb::run_main(argc, argv, "Export and read back (issue 5, issue 18 item 4)");
}
