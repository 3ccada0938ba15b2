# All third-party packages, found (never downloaded). Each module links only what it owns.
# GDAL, ITK, DCMTK, MPI and Qt are optional at configure time (TESSERA_WITH_*, top-level
# CMakeLists.txt): the io-based application (io, parallel modes and plan, engine, the `tessera`
# command, sample data, tessera-view) needs GDAL, ITK, DCMTK and MPI; without any of them the
# build is LibTorch-only (TESSERA_APP OFF): core, the plugins, the communicators (self, NCCL with
# CUDA), tessera-gpu-check and their tests (cmake --preset gpu-core, docs/gpu.md).
find_package(Threads REQUIRED)
find_package(Torch REQUIRED)          # Debian libtorch-dev, or any LibTorch via Torch_DIR
# A LibTorch built with the pre-C++11 string ABI (pip wheels before 2.7) sets
# -D_GLIBCXX_USE_CXX11_ABI=0 in TORCH_CXX_FLAGS: every target must agree, torch-free ones too.
if(TORCH_CXX_FLAGS MATCHES "_GLIBCXX_USE_CXX11_ABI=0")
  add_compile_definitions(_GLIBCXX_USE_CXX11_ABI=0)
endif()

# tessera_optional_package(NAME FIND_ARGS...): find_package(FIND_ARGS) when TESSERA_WITH_<NAME>,
# a one-line error saying how to leave it out when it is missing; adds NAME to
# TESSERA_LEFT_OUT when the option is OFF.
macro(tessera_optional_package name)
  if(TESSERA_WITH_${name})
    if(NOT ${ARGV1}_FOUND)
      find_package(${ARGN})
    endif()
    if(NOT ${ARGV1}_FOUND)
      message(FATAL_ERROR "Tessera: ${name} not found: install it, or configure with -DTESSERA_WITH_${name}=OFF "
                          "(cmake --preset gpu-core leaves out every optional package)")
    endif()
  else()
    list(APPEND TESSERA_LEFT_OUT ${name})
  endif()
endmacro()

set(TESSERA_LEFT_OUT "")
tessera_optional_package(MPI MPI COMPONENTS CXX)
if(TESSERA_WITH_GDAL)
  find_package(GDAL CONFIG QUIET)
endif()
tessera_optional_package(GDAL GDAL)
tessera_optional_package(ITK ITK COMPONENTS
  ITKCommon ITKIOImageBase ITKIOGDCM ITKIONIFTI ITKIONRRD ITKIOMeta ITKImageIntensity ITKDistanceMap ITKConnectedComponents)
tessera_optional_package(DCMTK DCMTK CONFIG)   # DICOM SEG output (io/src/dicom_seg.cpp): Debian libdcmtk-dev
if(TESSERA_BUILD_GUI OR NOT TESSERA_WITH_QT)  # named as left out when OFF
  tessera_optional_package(QT Qt6 COMPONENTS Core Gui Widgets)
endif()
set(TESSERA_APP ON)
foreach(needed MPI GDAL ITK DCMTK)
  if(NOT TESSERA_WITH_${needed})
    set(TESSERA_APP OFF)
  endif()
endforeach()
if(NOT TESSERA_APP OR NOT TESSERA_WITH_QT)
  set(TESSERA_BUILD_GUI OFF)
endif()
if(TESSERA_LEFT_OUT)
  list(JOIN TESSERA_LEFT_OUT ", " left_out)
  if(TESSERA_APP)
    message(STATUS "Tessera: without ${left_out}: tessera-view and its tests left out")
  else()
    message(STATUS "Tessera: without ${left_out}: LibTorch-only build (core, plugins, communicators, "
                   "tessera-gpu-check); io, parallel modes and plan, engine, tessera, sample data, tessera-view "
                   "and their tests left out")
  endif()
endif()

if(TESSERA_APP AND CMAKE_CXX_COMPILER_ID STREQUAL "Clang")
  # A GCC-configured ITK (Debian's) refuses clang in its compiler detection header; the
  # shim reads that header as GCC would. No effect on sources that do not see ITK.
  add_compile_options("$<$<COMPILE_LANGUAGE:CXX>:SHELL:-include ${CMAKE_CURRENT_LIST_DIR}/itk_clang_compat.h>")
endif()
find_package(CLI11 CONFIG REQUIRED)
if(TESSERA_APP)
  find_package(OpenCV REQUIRED COMPONENTS core imgproc imgcodecs)
  find_package(yaml-cpp REQUIRED)
  find_package(spdlog REQUIRED)
  find_package(CURL REQUIRED)         # DICOMweb (io/src/dicomweb_http.cpp): Debian libcurl4-openssl-dev
endif()
find_package(fmt REQUIRED)
find_package(nlohmann_json REQUIRED)
find_package(ZLIB REQUIRED)

# Debian's Torch config adds its flags through TORCH_CXX_FLAGS; keep them on the targets that use torch.
add_library(tessera_torch INTERFACE)
target_link_libraries(tessera_torch INTERFACE ${TORCH_LIBRARIES})
target_include_directories(tessera_torch SYSTEM INTERFACE ${TORCH_INCLUDE_DIRS})

# CUDA as the LibTorch found it: a CUDA LibTorch's own config (Caffe2's public/cuda.cmake) has
# already found the toolkit (CUDA::cudart) and defines torch_cuda; Tessera uses that toolkit.
# With a CPU LibTorch (Debian's) a toolkit found here still compiles the CUDA/NCCL sources
# (nothing runs them). NCCL: the toolkit's, or NCCL_ROOT (e.g. the nvidia-nccl wheel's folder,
# whose library is only libnccl.so.2).
set(TESSERA_HAVE_CUDA OFF)
set(TESSERA_HAVE_NCCL OFF)
set(TESSERA_TORCH_CUDA OFF)
if(TARGET torch_cuda OR TORCH_CUDA_LIBRARIES)
  set(TESSERA_TORCH_CUDA ON)
endif()
if(TESSERA_WITH_CUDA)
  find_package(CUDAToolkit QUIET)
  if(CUDAToolkit_FOUND)
    set(TESSERA_HAVE_CUDA ON)
    find_path(NCCL_INCLUDE_DIR nccl.h HINTS ${NCCL_ROOT} $ENV{NCCL_ROOT} ${CUDAToolkit_INCLUDE_DIRS}
              ${CUDAToolkit_LIBRARY_ROOT}/include PATH_SUFFIXES include)
    find_library(NCCL_LIBRARY NAMES nccl libnccl.so.2 HINTS ${NCCL_ROOT} $ENV{NCCL_ROOT} ${CUDAToolkit_LIBRARY_DIR}
                 ${CUDAToolkit_LIBRARY_ROOT}/lib64 PATH_SUFFIXES lib lib64)
    if(NCCL_INCLUDE_DIR AND NCCL_LIBRARY)
      set(TESSERA_HAVE_NCCL ON)
    endif()
  endif()
endif()
message(STATUS "Tessera: LibTorch ${Torch_VERSION} (${TORCH_INSTALL_PREFIX}; CUDA ${TESSERA_TORCH_CUDA}), "
               "CUDA ${TESSERA_HAVE_CUDA}, NCCL ${TESSERA_HAVE_NCCL}")
