# Warnings for Tessera's own code only: linked PRIVATE, never leaked to consumers.
add_library(tessera_warnings INTERFACE)
add_library(tessera::warnings ALIAS tessera_warnings)
target_compile_options(tessera_warnings INTERFACE
  $<$<COMPILE_LANGUAGE:CXX>:-Wall -Wextra -Wno-unused-parameter>)

add_library(tessera_sanitizers INTERFACE)
add_library(tessera::sanitizers ALIAS tessera_sanitizers)
if(TESSERA_SANITIZE)
  target_compile_options(tessera_sanitizers INTERFACE -fsanitize=address,undefined -fno-omit-frame-pointer)
  target_link_options(tessera_sanitizers INTERFACE -fsanitize=address,undefined)
endif()
