// Force-included in clang builds (the `fuzz` preset; see TesseraDependencies.cmake).
// Debian's ITK 5.2 was configured with GCC, and its generated itk_compiler_detection.h
// stops with "#error Unsupported compiler" under clang. Read it once as GCC 12 would: its
// feature table then says "C++11/14 features present", which holds for clang 14 as well.
#if defined(__clang__) && defined(__cplusplus) && __has_include(<itk_compiler_detection.h>)
#pragma clang diagnostic push
#pragma clang diagnostic ignored "-Wbuiltin-macro-redefined"
#pragma push_macro("__clang__")
#pragma push_macro("__GNUC__")
#pragma push_macro("__GNUC_MINOR__")
#undef __clang__
#undef __GNUC__
#undef __GNUC_MINOR__
#define __GNUC__ 12
#define __GNUC_MINOR__ 0
#include <itk_compiler_detection.h>
#pragma pop_macro("__GNUC_MINOR__")
#pragma pop_macro("__GNUC__")
#pragma pop_macro("__clang__")
#pragma clang diagnostic pop
#endif
