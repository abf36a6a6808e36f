// The norm loops of cpu_norm_kernels_impl.h compiled for AVX2 + FMA: 8 f32 lanes per
// instruction instead of SSE2's 4, for CPUs without AVX-512 (dispatch in cpu_norm_kernels.cpp).
// Built with the flags set in engine/CMakeLists.txt.
#define VOXSEG_NORM_ISA avx2
#include "engine/cpu/norm_kernels_impl.h"
