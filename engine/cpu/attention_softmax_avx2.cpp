// The attention's portable softmax loops (cpu_attention_softmax_impl.h) compiled for AVX2 + FMA:
// 8 f32 lanes per instruction instead of SSE2's 4, for CPUs without AVX-512 (dispatch in
// cpu_attention_softmax.cpp). Built with the flags set in engine/CMakeLists.txt.
#define VOXSEG_SOFTMAX_ISA avx2
#include "engine/cpu/attention_softmax_impl.h"
