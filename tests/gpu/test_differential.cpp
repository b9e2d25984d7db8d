// Differential run: random sequences of eager ops on the CPU and on CUDA,
// compared after every step (docs/cuda_numerics.md tolerances).
// KILN_DIFF_SEQUENCES sets the count (default 1000). Label `gpu`.
#include <cstdlib>

#include "gpu_util.h"

namespace {
using namespace kiln;

/// Ops whose results stay bounded for bounded inputs, so that the two
/// devices' rounding differences do not grow along a sequence.
/// No discontinuous rows (floor, sign, round): one rounding difference at a
/// jump would change a result by 1.
const std::vector<OpId> kUnary = {OpId::Neg, OpId::Abs,  OpId::Tanh, OpId::Sigmoid, OpId::Relu,
                                  OpId::Sin, OpId::Cos,  OpId::Silu, OpId::Gelu,    OpId::Erf,
                                  OpId::GeluTanh, OpId::Square};
const std::vector<OpId> kBinary = {OpId::Add, OpId::Sub, OpId::Mul, OpId::Maximum, OpId::Minimum};

struct Pair {
  Tensor cpu, gpu;
};
}  // namespace

TEST_SUITE("gpu") {
  TEST_CASE("differential: random eager op sequences agree between the CPU and CUDA") {
    if (!kt::gpu_or_skip()) return;
    int sequences = 1000;
    if (const char* e = std::getenv("KILN_DIFF_SEQUENCES")) sequences = std::atoi(e);
    std::mt19937_64 rng(12345);
    const std::vector<Shape> shapes = {{1}, {7}, {64, 33}, {3, 1, 5}, {1000}, {2, 3, 4, 5}};
    const std::vector<DType> dtypes = {DType::float32, DType::float16, DType::bfloat16, DType::float64};
    int steps = 0;
    for (int s = 0; s < sequences; ++s) {
      const Shape shape = shapes[rng() % shapes.size()];
      const DType d = dtypes[rng() % dtypes.size()];
      Tensor x = tanh(kt::random_tensor(shape, d, rng()));  // in [-1, 1]
      Pair v{x, x.cuda()};
      const int len = 2 + int(rng() % 6);
      std::string trail = std::string(name(d)) + " " + shape_str(shape);
      for (int i = 0; i < len; ++i, ++steps) {
        const int kind = int(rng() % 4);
        if (kind == 0) {
          const OpId op = kUnary[rng() % kUnary.size()];
          v = {apply(op, v.cpu), apply(op, v.gpu)};
          trail += std::string(" ") + std::string(op_name(op));
        } else if (kind == 1) {  // a tensor operand broadcast from the right
          const OpId op = kBinary[rng() % kBinary.size()];
          Shape bs(shape.end() - int64_t(1 + rng() % shape.size()), shape.end());
          Tensor b = tanh(kt::random_tensor(bs, d, rng()));
          v = {apply(op, v.cpu, b), apply(op, v.gpu, b.cuda())};
          trail += std::string(" ") + std::string(op_name(op)) + shape_str(bs);
        } else if (kind == 2) {  // a scalar operand
          const double c = double(int64_t(rng() % 7) - 3) / 2;
          v = {v.cpu * c + 0.5, v.gpu * c + 0.5};
          trail += " *" + std::to_string(c) + "+0.5";
        } else {  // a layout change: the next op reads a strided view
          if (v.cpu.ndim() >= 2) {
            v = {v.cpu.transpose(), v.gpu.transpose()};
            trail += " transpose";
          } else {
            v = {flip(v.cpu), flip(v.gpu)};
            trail += " flip";
          }
        }
        // Clamp back into [-4, 4]: keeps later steps well conditioned.
        v = {clamp(v.cpu, -4.0, 4.0), clamp(v.gpu, -4.0, 4.0)};
        INFO(trail);
        // Each step may add one rounding difference per device; the ops'
        // derivatives are at most ~4 on [-4, 4], hence the allowance growing
        // with the step.
        const double tol = (2 + i) * 2 * kt::rtol_for(d);
        kt::check_all_close(v.gpu, kt::values(v.cpu), tol, tol, trail);
      }
    }
    MESSAGE(sequences << " sequences, " << steps << " steps compared");
  }
}
