// The softmax rows of cpu_softmax_rows_impl.h compiled for AVX-512 (16 f32 lanes per
// instruction instead of SSE2's 4); used only where the CPU has it (dispatch in
// cpu_softmax_rows.cpp). Built with the flags set in engine/CMakeLists.txt.
#define VOXSEG_SOFTMAX_ISA avx512
#include "engine/cpu_softmax_rows_impl.h"
