// The CUDA kernels of the Binary and Ternary rows of the op table.
#define KILN_CUDA_ROWS_BINARY 1
#define KILN_CUDA_ROWS_TERNARY 1
#include "elementwise_register.cuh"
