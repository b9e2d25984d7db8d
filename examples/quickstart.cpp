// kiln quickstart: eager tensors on the CPU, on built-in data.
// Every op runs when called and returns a realized tensor; printing follows
// numpy's format. Exits non-zero when a result is not what it should be, so
// ctest can run it as a smoke test.
#include <kiln/kiln.h>

#include <cmath>
#include <iostream>

using namespace kiln;

namespace {
int failures = 0;
void expect(bool ok, const char* what) {
  if (!ok) {
    std::cerr << "quickstart: FAILED: " << what << "\n";
    ++failures;
  }
}
}  // namespace

int main() {
  // Tensors from C++ literals; the dtype follows the C++ type.
  Tensor a = tensor({{1.0f, 2.0f, 3.0f}, {4.0f, 5.0f, 6.0f}});
  std::cout << "a (" << a.dtype() << ", shape " << shape_str(a.shape()) << ") =\n" << a << "\n\n";

  // Broadcasting: [2, 3] with [3]. The C++ scalar 2.0 is weak, so the result
  // stays float32 (numpy would promote to float64 for a float64 array only).
  Tensor b = tensor({10.0f, 20.0f, 30.0f});
  Tensor c = a + b * 2.0;
  std::cout << "a + b * 2.0 =\n" << c << "  (" << c.dtype() << ")\n\n";
  expect(c.dtype() == DType::float32, "a weak double scalar keeps float32");
  expect(c.to_vector<float>() == std::vector<float>{21, 42, 63, 24, 45, 66}, "broadcast add");

  // Reductions and comparisons.
  std::cout << "sum over axis 0: " << sum(a, {0}) << "\n";
  std::cout << "mean of a:       " << mean(a).item() << "\n";
  std::cout << "a > 2.5:\n" << (a > 2.5) << "\n\n";
  expect(mean(a).item() == 3.5, "mean");

  // Random numbers from an explicitly seeded counter-based generator: the
  // same values on every run and for any number of threads.
  random::Generator gen(42);
  Tensor x = random::normal({4, 3}, 0.0, 1.0, DType::float32, &gen);
  Tensor w = random::uniform({3, 2}, -1.0, 1.0, DType::float32, &gen);
  std::cout << "x ~ normal(0, 1) =\n" << x << "\n\nw ~ uniform(-1, 1) =\n" << w << "\n\n";

  // matmul + softmax: each row of y is a probability distribution.
  Tensor y = softmax(matmul(x, w) + 1.0f, -1);
  Tensor rows = sum(y, {-1});
  std::cout << "y = softmax(x @ w + 1) =\n" << y << "\nrow sums: " << rows << "\n\n";
  for (float s : rows.to_vector<float>()) expect(std::fabs(s - 1.0f) < 1e-5f, "softmax rows sum to 1");

  // Views share storage: a transpose is not a copy.
  Tensor at = a.transpose();
  std::cout << "a.transpose() =\n" << at << "\ncontiguous: " << std::boolalpha << at.is_contiguous() << "\n\n";
  expect(at.buffer() == a.buffer(), "transpose is a view");

  // Bad input raises a kiln::Error that names the op and the shapes.
  try {
    Tensor bad = a + tensor({1.0f, 2.0f});
    expect(false, "mismatched shapes must throw");
  } catch (const ShapeError& e) {
    std::cout << "caught ShapeError: " << e.what() << "\n";
  }

  if (failures) return 1;
  std::cout << "\nquickstart: all checks passed\n";
  return 0;
}
