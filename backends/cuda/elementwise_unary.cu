// The CUDA kernels of the Unary rows of the op table (Cast: cast.cu).
#define KILN_CUDA_ROWS_UNARY 1
#include "elementwise_register.cuh"
