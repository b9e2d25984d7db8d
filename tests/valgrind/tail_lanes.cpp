// Compiled pow/fmod/atan2/remainder on 13 elements (a tail shorter than a
// vector): run under valgrind memcheck by scripts/valgrind_tail_lanes.sh;
// the generated tail used to hand stack garbage to the per-lane libm calls.
#include <kiln/kiln.h>
#include <iostream>
using namespace kiln;
int main() {
  Tensor a = random::normal({13}) + 3.0f, b = random::normal({13}) + 2.0f;
  auto f = [](Tensor x, Tensor y) {
    return std::make_tuple(pow(x * 1.0f, y), fmod(x * 1.0f, y), atan2(x * 1.0f, y), remainder(x * 1.0f, y));
  };
  TensorLayout l(DType::float32, {13});
  CompiledCallable run = compile(f)(l, l);
  auto [p, m, t, r] = run(a, b).as<std::tuple<Tensor, Tensor, Tensor, Tensor>>();
  double s = 0;
  for (const Tensor& z : {p, m, t, r}) s += sum(abs(z)).item<double>();
  std::cout << "sum " << (s > 0) << "\n";
}
