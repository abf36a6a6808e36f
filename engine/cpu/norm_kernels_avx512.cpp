// The norm loops of cpu_norm_kernels_impl.h compiled for AVX-512 (F, BW, VL, DQ): 16 f32
// lanes per instruction instead of SSE2's 4; used only where the CPU has them (dispatch in
// cpu_norm_kernels.cpp). Built with the flags set in engine/CMakeLists.txt.
#define VOXSEG_NORM_ISA avx512
#include "engine/cpu/norm_kernels_impl.h"
