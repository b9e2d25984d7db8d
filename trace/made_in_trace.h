// kiln (internal): which captured tensors of a trace the traced function
// made itself (`Tensor z = zeros({3});`) rather than captured from outside.
//
// Eagerly such a tensor is new memory on every call, so a compiled call
// returns a copy of it where it is a result (jit/call_plan.h), while a
// tensor held outside the trace is returned as itself. The decision is made
// when the trace ends (trace/stage.cpp: nothing outside the trace holds the
// tensor then) and recorded here, so later copies of the StagedGraph, which
// hold the tensor too, do not make it look held outside. (A result object
// that holds more than its leaves, an IndexedTensor's base, hides it at the
// trace's end; jit/call_plan.cpp then counts holders at compile time, as
// before, which a kept copy of the StagedGraph still inflates.)
#pragma once

#include "../tensor/tensor.h"

namespace kiln::detail {

/// Records that `t` (a captured source of a trace that just ended) was made
/// by the traced function: nothing outside the trace held it when it ended.
void note_made_in_trace(const Tensor& t);
/// True for a tensor note_made_in_trace recorded (this handle's tensor, while it lives).
bool made_in_trace(const Tensor& t);

}  // namespace kiln::detail
