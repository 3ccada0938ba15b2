# All third-party packages, found (never downloaded). Each module links only what it owns.
find_package(Threads REQUIRED)
find_package(Torch REQUIRED)          # Debian libtorch-dev, or any LibTorch via Torch_DIR
find_package(MPI REQUIRED COMPONENTS CXX)
find_package(GDAL CONFIG QUIET)
if(NOT GDAL_FOUND)
  find_package(GDAL REQUIRED)
endif()
find_package(ITK REQUIRED COMPONENTS
  ITKCommon ITKIOImageBase ITKIOGDCM ITKIONIFTI ITKIONRRD ITKIOMeta ITKImageIntensity ITKDistanceMap)
if(CMAKE_CXX_COMPILER_ID STREQUAL "Clang")
  # A GCC-configured ITK (Debian's) refuses clang in its compiler detection header; the
  # shim reads that header as GCC would. No effect on sources that do not see ITK.
  add_compile_options("$<$<COMPILE_LANGUAGE:CXX>:SHELL:-include ${CMAKE_CURRENT_LIST_DIR}/itk_clang_compat.h>")
endif()
find_package(OpenCV REQUIRED COMPONENTS core imgproc imgcodecs)
find_package(CLI11 CONFIG REQUIRED)
find_package(yaml-cpp REQUIRED)
find_package(spdlog REQUIRED)
find_package(fmt REQUIRED)
find_package(nlohmann_json REQUIRED)
find_package(ZLIB REQUIRED)
find_package(CURL REQUIRED)           # DICOMweb (io/src/dicomweb_http.cpp): Debian libcurl4-openssl-dev
find_package(DCMTK CONFIG REQUIRED)   # DICOM SEG output (io/src/dicom_seg.cpp): Debian libdcmtk-dev

# Debian's Torch config adds its flags through TORCH_CXX_FLAGS; keep them on the targets that use torch.
add_library(tessera_torch INTERFACE)
target_link_libraries(tessera_torch INTERFACE ${TORCH_LIBRARIES})
target_include_directories(tessera_torch SYSTEM INTERFACE ${TORCH_INCLUDE_DIRS})

set(TESSERA_HAVE_CUDA OFF)
set(TESSERA_HAVE_NCCL OFF)
if(TESSERA_WITH_CUDA)
  find_package(CUDAToolkit QUIET)
  if(CUDAToolkit_FOUND)
    set(TESSERA_HAVE_CUDA ON)
    find_path(NCCL_INCLUDE_DIR nccl.h HINTS ${CUDAToolkit_INCLUDE_DIRS} ${CUDAToolkit_LIBRARY_ROOT}/include)
    find_library(NCCL_LIBRARY nccl HINTS ${CUDAToolkit_LIBRARY_DIR} ${CUDAToolkit_LIBRARY_ROOT}/lib64)
    if(NCCL_INCLUDE_DIR AND NCCL_LIBRARY)
      set(TESSERA_HAVE_NCCL ON)
    endif()
  endif()
endif()
message(STATUS "Tessera: CUDA ${TESSERA_HAVE_CUDA}, NCCL ${TESSERA_HAVE_NCCL}")
