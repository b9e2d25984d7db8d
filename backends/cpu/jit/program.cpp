// kiln (internal): the printed form of an ElementwiseProgram (KILN_JIT_DUMP
// and cache keys: every field that changes the generated code is printed;
// constants in hexadecimal floating point, so the text is exact).
#include <cstring>
#include <sstream>

#include "../../../tensor/dispatch.h"

#include "../../../jit/elementwise_program.h"

namespace kiln::codegen {

std::string ElementwiseProgram::str() const {
  std::ostringstream os;
  os << "elementwise(" << num_outputs << " out";
  if (strict) os << ", strict";
  if (streaming_stores) os << ", streaming";
  if (table_slots) os << ", " << table_slots << " table constants";
  os << ") [";
  for (size_t k = 0; k < operand_dtypes.size(); ++k) {
    os << (k ? ", " : "") << (int(k) < num_outputs ? "out" : "in") << k << ":" << operand_dtypes[k];
    if (k < operand_broadcast.size() && operand_broadcast[k]) os << " bcast";
  }
  os << "]\n";
  for (size_t i = 0; i < code.size(); ++i) {
    const Instr& in = code[i];
    os << "  ";
    switch (in.kind) {
      case Instr::Kind::load: os << "%" << i << " = load " << in.arg; break;
      case Instr::Kind::imm:
        if (in.arg >= 0) os << "%" << i << " = const #" << in.arg;
        else os << "%" << i << " = imm " << std::hexfloat << in.imm << std::defaultfloat;
        break;
      case Instr::Kind::store: os << "store " << in.arg << ", %" << in.a << "\n"; continue;
      case Instr::Kind::op: {
        os << "%" << i << " = " << op_name(in.op);
        for (int32_t r : {in.a, in.b, in.c})
          if (r >= 0) os << " %" << r;
        break;
      }
    }
    os << " : " << in.dtype << "\n";
  }
  return os.str();
}

uint64_t table_bits(double v, DType d) {
  uint64_t bits = 0;
  detail::visit_dtype(d, [&](auto tag) {
    using T = typename decltype(tag)::type;
    const T x = detail::convert<T>(v);
    std::memcpy(&bits, &x, sizeof(T));
  });
  return bits;
}

}  // namespace kiln::codegen
