// Built against an installed kiln (see CMakeLists.txt beside this file):
// adds two tensors, one of them copied from an Eigen matrix through the
// installed <kiln/eigen.h>, and checks the result; then tokenizes a text
// with the installed WordPiece tokenizer (its utf8proc stays inside libkiln).
#include <kiln/eigen.h>
#include <kiln/kiln.h>

#include <cstdio>
#include <filesystem>
#include <fstream>
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
  std::cout << "kiln_consumer: " << a << " + " << b << " = " << c << "\n";

  auto vocab = std::filesystem::temp_directory_path() / "kiln_consumer_vocab.txt";
  std::ofstream(vocab) << "[PAD]\n[UNK]\n[CLS]\n[SEP]\ncafe\n!\n";
  auto tok = kiln::text::WordPieceTokenizer::from_vocab_file(vocab.string());
  std::filesystem::remove(vocab);
  std::vector<int64_t> ids = tok.encode("Caf\xC3\xA9!");
  if (ids != std::vector<int64_t>{2, 4, 5, 3}) {
    std::cerr << "kiln_consumer: WordPiece ids of \"Caf\xC3\xA9!\" are not [2, 4, 5, 3]\n";
    return 1;
  }
  std::cout << "kiln_consumer: WordPiece ids [2, 4, 5, 3]\n";
  return 0;
}
