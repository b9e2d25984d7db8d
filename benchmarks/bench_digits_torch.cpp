// LibTorch peers for bench_digits (built only when libtorch-dev is installed):
// the digits training step written by hand with ATen ops, no autograd
// (InferenceMode): "functional" is op-for-op digits::sgd_step; "inplace" is
// what a LibTorch user would write (addmm, in-place momentum SGD as
// torch.optim.SGD does it); TorchScript compiles the functional version.
#include <benchmark/benchmark.h>
#include <torch/script.h>
#include <torch/torch.h>

#include "bench_digits.h"
#include "bench_torch_peers.h"

namespace {
using kb::digits_bench::start;

struct TorchState {
  at::Tensor x, y, w1, b1, w2, b2, v1, vb1, v2, vb2;
  double lr, mom, inv_b;
  TorchState() {
    const auto& s = start();
    auto t = [](const std::vector<float>& d, at::IntArrayRef shape) {
      return at::from_blob(const_cast<float*>(d.data()), shape, at::kFloat).clone();
    };
    x = t(s.x, {s.batch, s.inputs});
    y = t(s.y, {s.batch, s.classes});
    w1 = t(s.w1, {s.inputs, s.hidden});
    b1 = t(s.b1, {s.hidden});
    w2 = t(s.w2, {s.hidden, s.classes});
    b2 = t(s.b2, {s.classes});
    v1 = at::zeros_like(w1);
    vb1 = at::zeros_like(b1);
    v2 = at::zeros_like(w2);
    vb2 = at::zeros_like(b2);
    lr = s.lr;
    mom = s.momentum;
    inv_b = 1.0 / static_cast<double>(s.batch);
  }
  // Op for op as digits::sgd_step (new tensors for the results).
  at::Tensor step_functional() {
    at::Tensor h = at::tanh(at::mm(x, w1) + b1);
    at::Tensor z2 = at::mm(h, w2) + b2;
    at::Tensor loss = -(y * at::log_softmax(z2, -1)).sum() * inv_b;
    at::Tensor dz2 = (at::softmax(z2, -1) - y) * inv_b;
    at::Tensor dw2 = at::mm(h.t(), dz2), db2 = dz2.sum(0);
    at::Tensor dz1 = at::mm(dz2, w2.t()) * (1 - h * h);
    at::Tensor dw1 = at::mm(x.t(), dz1), db1 = dz1.sum(0);
    auto update = [&](at::Tensor& w, at::Tensor& m, const at::Tensor& g) {
      m = m * mom + g;
      w = w - m * lr;
    };
    update(w1, v1, dw1);
    update(b1, vb1, db1);
    update(w2, v2, dw2);
    update(b2, vb2, db2);
    return loss;
  }
  // Idiomatic LibTorch: fused addmm, softmax from log_softmax, in-place updates.
  at::Tensor step_inplace() {
    at::Tensor h = at::addmm(b1, x, w1).tanh_();
    at::Tensor logp = at::log_softmax(at::addmm(b2, h, w2), -1);
    at::Tensor loss = (y * logp).sum().mul_(-inv_b);
    at::Tensor dz2 = logp.exp_().sub_(y).mul_(inv_b);
    at::Tensor dw2 = at::mm(h.t(), dz2), db2 = dz2.sum(0);
    at::Tensor dz1 = at::mm(dz2, w2.t()).mul_(1 - h * h);
    at::Tensor dw1 = at::mm(x.t(), dz1), db1 = dz1.sum(0);
    auto update = [&](at::Tensor& w, at::Tensor& m, const at::Tensor& g) { w.add_(m.mul_(mom).add_(g), -lr); };
    update(w1, v1, dw1);
    update(b1, vb1, db1);
    update(w2, v2, dw2);
    update(b2, vb2, db2);
    return loss;
  }
  std::vector<float> weights() const {
    std::vector<float> out;
    for (const at::Tensor* t : {&w1, &b1, &w2, &b2}) {
      at::Tensor c = t->contiguous();
      out.insert(out.end(), c.data_ptr<float>(), c.data_ptr<float>() + c.numel());
    }
    return out;
  }
};

const char* kScript = R"(
def step(w1, b1, w2, b2, v1, vb1, v2, vb2, x, y, lr: float, mom: float, inv_b: float):
    h = torch.tanh(torch.mm(x, w1) + b1)
    z2 = torch.mm(h, w2) + b2
    loss = -(y * torch.log_softmax(z2, -1)).sum() * inv_b
    dz2 = (torch.softmax(z2, -1) - y) * inv_b
    dw2 = torch.mm(h.t(), dz2)
    db2 = dz2.sum(0)
    dz1 = torch.mm(dz2, w2.t()) * (1 - h * h)
    dw1 = torch.mm(x.t(), dz1)
    db1 = dz1.sum(0)
    v1 = v1 * mom + dw1
    vb1 = vb1 * mom + db1
    v2 = v2 * mom + dw2
    vb2 = vb2 * mom + db2
    return w1 - v1 * lr, b1 - vb1 * lr, w2 - v2 * lr, b2 - vb2 * lr, v1, vb1, v2, vb2, loss
)";

at::Tensor script_step(torch::jit::CompilationUnit& cu, TorchState& s) {
  auto r = cu.run_method("step", s.w1, s.b1, s.w2, s.b2, s.v1, s.vb1, s.v2, s.vb2, s.x, s.y, s.lr, s.mom, s.inv_b)
               .toTuple();
  at::Tensor* out[] = {&s.w1, &s.b1, &s.w2, &s.b2, &s.v1, &s.vb1, &s.v2, &s.vb2};
  for (size_t i = 0; i < 8; ++i) *out[i] = r->elements()[i].toTensor();
  return r->elements()[8].toTensor();
}

template <int Kind>  // 0 functional, 1 in-place, 2 TorchScript
void BM_torch_step(benchmark::State& st) {
  kb::set_threads(static_cast<int>(st.range(0)));
  c10::InferenceMode guard;
  TorchState s;
  std::shared_ptr<torch::jit::CompilationUnit> cu = Kind == 2 ? torch::jit::compile(kScript) : nullptr;
  auto step = [&] { return Kind == 0 ? s.step_functional() : Kind == 1 ? s.step_inplace() : script_step(*cu, s); };
  for (int i = 0; i < 3; ++i) step();  // warm-up (TorchScript profiles its first runs)
  for (auto _ : st) benchmark::DoNotOptimize(step().data_ptr());
}
#define STEP_ARGS ->Arg(1)->Arg(2)->UseRealTime()->Unit(benchmark::kMicrosecond)
BENCHMARK_TEMPLATE(BM_torch_step, 0)->Name("BM_torch_digits_step") STEP_ARGS;
BENCHMARK_TEMPLATE(BM_torch_step, 1)->Name("BM_torch_digits_step_inplace") STEP_ARGS;
BENCHMARK_TEMPLATE(BM_torch_step, 2)->Name("BM_torchscript_digits_step") STEP_ARGS;

// TorchScript's compile time of the step: compile from source and make the first call.
void BM_torchscript_compile_digits_step(benchmark::State& st) {
  kb::set_threads(1);
  c10::InferenceMode guard;
  for (auto _ : st) {
    TorchState s;
    auto cu = torch::jit::compile(kScript);
    benchmark::DoNotOptimize(script_step(*cu, s).data_ptr());
  }
}
BENCHMARK(BM_torchscript_compile_digits_step)->UseRealTime()->Unit(benchmark::kMillisecond);
}  // namespace

namespace kb::digits_bench {
std::vector<std::pair<std::string, std::vector<float>>> torch_runs(int steps) {
  at::set_num_threads(1);
  c10::InferenceMode guard;
  TorchState f, i, s;
  auto cu = torch::jit::compile(kScript);
  for (int k = 0; k < steps; ++k) {
    f.step_functional();
    i.step_inplace();
    script_step(*cu, s);
  }
  return {{"LibTorch", f.weights()}, {"LibTorch in-place", i.weights()}, {"TorchScript", s.weights()}};
}
}  // namespace kb::digits_bench
