// Force-included into every C++ file of a clang build (CMakeLists.txt). Debian's ITK 5.2 ships an
// itk_compiler_detection.h generated for GCC only: it stops with "Unsupported compiler" under
// clang. Included once here with clang's own __clang__ hidden and GCC 12's version numbers shown,
// the header picks its GCC branch (every C++11 feature macro on, which clang 14 has) and its
// include guard keeps ITK from including it again. Does nothing where ITK's headers are absent.
#pragma once
#if defined(__clang__) && defined(__cplusplus) && __has_include(<itk_compiler_detection.h>)
#pragma push_macro("__clang__")
#pragma push_macro("__GNUC__")
#pragma push_macro("__GNUC_MINOR__")
#undef __clang__
#undef __GNUC__
#undef __GNUC_MINOR__
#define __GNUC__ 12
#define __GNUC_MINOR__ 2
#include <itk_compiler_detection.h>
#pragma pop_macro("__GNUC_MINOR__")
#pragma pop_macro("__GNUC__")
#pragma pop_macro("__clang__")
#endif
