// Built against an installed kiln (see CMakeLists.txt beside this file):
// adds two tensors, one of them copied from an Eigen matrix through the
// installed <kiln/eigen.h>, and checks the result (also with assert_close
// from the installed short-name header <kiln/testing.h>).
#include <kiln/eigen.h>
#include <kiln/kiln.h>
#include <kiln/testing.h>

#include <iostream>
#include <vector>

int main() {
  Eigen::Matrix<float, 1, 3> m(1.0f, 2.0f, 3.0f);
  kiln::Tensor a = kiln::from_eigen(m);  // [1, 3] float32
  kiln::Tensor b = kiln::tensor({10.0f, 20.0f, 30.0f});
  kiln::Tensor c = a + b;
  if (c.dtype() != kiln::DType::float32 || c.shape() != kiln::Shape{1, 3} ||
      c.to_vector<float>() != std::vector<float>{11.0f, 22.0f, 33.0f}) {
    std::cerr << "kiln_consumer: expected [[11., 22., 33.]] (float32), got " << c << " (" << c.dtype() << ")\n";
    return 1;
  }
  try {
    kiln::assert_close(c, kiln::tensor({{11.0f, 22.0f, 33.0f}}));
  } catch (const kiln::AssertionError& e) {
    std::cerr << "kiln_consumer: " << e.what() << "\n";
    return 1;
  }
  std::cout << "kiln_consumer: " << a << " + " << b << " = " << c << "\n";
  return 0;
}
