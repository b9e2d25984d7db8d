// kiln (internal): the printed form of an ElementwiseProgram (KILN_JIT_DUMP
// and cache keys: every field that changes the generated code is printed;
// constants in hexadecimal floating point, so the text is exact).
#include <charconv>
#include <cstdio>
#include <cstring>
#include <string>

#include "../../../tensor/dispatch.h"

#include "../../../jit/elementwise_program.h"

namespace kiln::codegen {

std::string ElementwiseProgram::str() const {
  // Plain appends (no stream): a plan prints every fused group's program to
  // key its kernel, so this is on the path of compile and engine::read.
  std::string os;
  os.reserve(64 + 32 * code.size());
  auto num = [&](long long v) {
    char b[24];
    const auto r = std::to_chars(b, b + sizeof b, v);
    os.append(b, r.ptr);
  };
  auto reg = [&](long long i) {
    os += '%';
    num(i);
  };
  os += "elementwise(";
  num(num_outputs);
  os += " out";
  if (strict) os += ", strict";
  if (streaming_stores) os += ", streaming";
  if (table_slots) {
    os += ", ";
    num(table_slots);
    os += " table constants";
  }
  os += ") [";
  for (size_t k = 0; k < operand_dtypes.size(); ++k) {
    os += k ? ", " : "";
    os += int(k) < num_outputs ? "out" : "in";
    num(static_cast<long long>(k));
    os += ':';
    os += name(operand_dtypes[k]);
    if (k < operand_broadcast.size() && operand_broadcast[k]) os += " bcast";
  }
  os += "]\n";
  for (size_t i = 0; i < code.size(); ++i) {
    const Instr& in = code[i];
    os += "  ";
    switch (in.kind) {
      case Instr::Kind::load:
        reg(static_cast<long long>(i));
        os += " = load ";
        num(in.arg);
        break;
      case Instr::Kind::imm:
        reg(static_cast<long long>(i));
        if (in.arg >= 0) {
          os += " = const #";
          num(in.arg);
        } else {
          char b[64];
          std::snprintf(b, sizeof b, "%a", in.imm);  // what std::hexfloat prints
          os += " = imm ";
          os += b;
        }
        break;
      case Instr::Kind::store:
        os += "store ";
        num(in.arg);
        os += ", ";
        reg(in.a);
        os += '\n';
        continue;
      case Instr::Kind::op: {
        reg(static_cast<long long>(i));
        os += " = ";
        os += op_name(in.op);
        for (int32_t r : {in.a, in.b, in.c})
          if (r >= 0) {
            os += ' ';
            reg(r);
          }
        break;
      }
    }
    os += " : ";
    os += name(in.dtype);
    os += '\n';
  }
  return os;
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
