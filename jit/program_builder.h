// kiln (internal): builds an ElementwiseProgram instruction by instruction
// (tests and benchmarks of the code generator; the fuser builds its own).
#pragma once
#include <utility>
#include <vector>

#include "elementwise_program.h"

namespace kiln::codegen {

/// Builds programs instruction by instruction.
struct ProgramBuilder {
  ElementwiseProgram p;
  ProgramBuilder(std::vector<DType> operands, int num_outputs, std::vector<bool> bcast = {}) {
    p.operand_dtypes = std::move(operands);
    p.num_outputs = num_outputs;
    p.operand_broadcast = bcast.empty() ? std::vector<bool>(p.operand_dtypes.size(), false) : bcast;
  }
  int push(Instr in) {
    p.code.push_back(in);
    return int(p.code.size()) - 1;
  }
  int load(int arg, DType d) {
    Instr in;
    in.kind = Instr::Kind::load;
    in.arg = arg;
    in.dtype = d;
    return push(in);
  }
  int imm(double v, DType d) {
    Instr in;
    in.kind = Instr::Kind::imm;
    in.imm = v;
    in.dtype = d;
    return push(in);
  }
  int op(OpId o, DType d, int a, int b = -1, int c = -1, Attrs at = {}) {
    Instr in;
    in.kind = Instr::Kind::op;
    in.op = o;
    in.dtype = d;
    in.a = a;
    in.b = b;
    in.c = c;
    in.attrs = at;
    return push(in);
  }
  void store(int arg, int r) {
    Instr in;
    in.kind = Instr::Kind::store;
    in.arg = arg;
    in.a = r;
    push(in);
  }
};

}  // namespace kiln::codegen
