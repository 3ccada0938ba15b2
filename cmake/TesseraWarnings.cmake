# Warnings for Tessera's own code only: linked PRIVATE, never leaked to consumers.
add_library(tessera_warnings INTERFACE)
add_library(tessera::warnings ALIAS tessera_warnings)
target_compile_options(tessera_warnings INTERFACE
  $<$<COMPILE_LANGUAGE:CXX>:-Wall -Wextra -Wno-unused-parameter>)

# Sanitizers (TESSERA_SANITIZE, preset debug-sanitize; TESSERA_FUZZ, preset fuzz).
# They apply to every target of this project (libraries, tools, tests), set here at
# directory scope before any add_subdirectory: precompiled headers shared between targets
# (REUSE_FROM) need identical flags, and a test compiled without ASan would not see its
# own overflows. Third-party libraries (LibTorch, GDAL, ITK, MPI, Qt) stay uninstrumented.
# UBSan findings abort (-fno-sanitize-recover), so a test with undefined behaviour fails.
# tessera::sanitizers stays for the targets that name it; it adds nothing of its own.
add_library(tessera_sanitizers INTERFACE)
add_library(tessera::sanitizers ALIAS tessera_sanitizers)
if(TESSERA_SANITIZE OR TESSERA_FUZZ)
  set(_tessera_sanitize address,undefined)
  if(TESSERA_FUZZ)
    if(NOT CMAKE_CXX_COMPILER_ID MATCHES "Clang")
      message(FATAL_ERROR "TESSERA_FUZZ needs clang (libFuzzer): use the `fuzz` preset, "
                          "or configure with -DCMAKE_CXX_COMPILER=clang++-14 -DCMAKE_C_COMPILER=clang-14")
    endif()
    # Coverage instrumentation for libFuzzer; the fuzz targets add -fsanitize=fuzzer (main).
    set(_tessera_sanitize fuzzer-no-link,${_tessera_sanitize})
  endif()
  # pointer-overflow stays recoverable so tests/sanitizers/ubsan.supp can silence ITK's
  # header templates (instantiated in our code), which step pointers by negative offsets.
  add_compile_options(-fsanitize=${_tessera_sanitize} -fno-sanitize-recover=undefined
                      -fsanitize-recover=pointer-overflow -fno-omit-frame-pointer)
  add_link_options(-fsanitize=address,undefined)
endif()
