// Built against an installed kiln (see CMakeLists.txt beside this file):
// adds two tensors and checks the result.
#include <kiln/kiln.h>

#include <iostream>
#include <vector>

int main() {
  kiln::Tensor a = kiln::tensor({1.0f, 2.0f, 3.0f});
  kiln::Tensor b = kiln::tensor({10.0f, 20.0f, 30.0f});
  kiln::Tensor c = a + b;
  if (c.dtype() != kiln::DType::float32 || c.to_vector<float>() != std::vector<float>{11.0f, 22.0f, 33.0f}) {
    std::cerr << "kiln_consumer: expected [11., 22., 33.] (float32), got " << c << " (" << c.dtype() << ")\n";
    return 1;
  }
  std::cout << "kiln_consumer: " << a << " + " << b << " = " << c << "\n";
  return 0;
}
