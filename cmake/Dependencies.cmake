# Finds every dependency of gpu-100-days. Nothing is vendored or downloaded: a missing required
# dependency stops the configure step with the apt package that provides it.

find_package(CUDAToolkit REQUIRED)  # cudart, cuBLAS, and CUB from the toolkit's CCCL

find_package(fmt CONFIG QUIET)
if(NOT fmt_FOUND)
  message(FATAL_ERROR "fmt not found: install it with `apt-get install libfmt-dev` "
                      "(or run scripts/setup.sh, which does that for you)")
endif()

# Catch2: 3.x (Ubuntu 24.04) or 2.13 (Debian 12, Ubuntu 22.04). common/include/common/catch.hpp
# hides the difference, so every test file is written once.
find_package(Catch2 3 CONFIG QUIET)
if(Catch2_FOUND)
  set(GPU100_CATCH2_MAJOR 3)
else()
  find_package(Catch2 2.13 CONFIG QUIET)
  if(NOT Catch2_FOUND)
    message(FATAL_ERROR "Catch2 not found: install it with `apt-get install catch2` "
                        "(or run scripts/setup.sh, which does that for you)")
  endif()
  set(GPU100_CATCH2_MAJOR 2)
endif()
list(APPEND CMAKE_MODULE_PATH "${Catch2_DIR}")
include(Catch)
message(STATUS "gpu100: Catch2 ${Catch2_VERSION}, fmt ${fmt_VERSION}, CUDA ${CUDAToolkit_VERSION}, "
               "architectures ${CMAKE_CUDA_ARCHITECTURES}")

# cuDNN is optional: its baseline rows say "skipped: cuDNN not found" without it.
# A non-standard install is found through -DCUDNN_ROOT=/path or the CUDNN_ROOT environment variable.
find_path(CUDNN_INCLUDE_DIR cudnn.h
          HINTS ${CUDNN_ROOT} $ENV{CUDNN_ROOT} ${CUDAToolkit_INCLUDE_DIRS}
          PATH_SUFFIXES include)
find_library(CUDNN_LIBRARY cudnn
             HINTS ${CUDNN_ROOT} $ENV{CUDNN_ROOT} ${CUDAToolkit_LIBRARY_DIR}
             PATH_SUFFIXES lib lib64 lib/x86_64-linux-gnu)
if(CUDNN_INCLUDE_DIR AND CUDNN_LIBRARY)
  set(GPU100_HAVE_CUDNN ON)
  add_library(gpu100_cudnn INTERFACE)
  add_library(gpu100::cudnn ALIAS gpu100_cudnn)
  target_include_directories(gpu100_cudnn INTERFACE ${CUDNN_INCLUDE_DIR})
  target_link_libraries(gpu100_cudnn INTERFACE ${CUDNN_LIBRARY})
  target_compile_definitions(gpu100_cudnn INTERFACE GPU100_HAVE_CUDNN=1)
  message(STATUS "gpu100: cuDNN found: ${CUDNN_LIBRARY}")
else()
  set(GPU100_HAVE_CUDNN OFF)
  message(STATUS "gpu100: cuDNN not found (optional; set CUDNN_ROOT to point at it): its rows will be skipped")
endif()

# The cuDNN frontend (header-only C++ over cuDNN's graph API) is optional too: day05's cuDNN
# fused-attention row uses it. scripts/setup.sh unpacks the headers of pip's nvidia-cudnn-frontend
# into .whl/cudnn_frontend/include where the network allows; -DCUDNN_FRONTEND_ROOT=/path finds
# another. -DGPU100_CUDNN_FRONTEND=OFF builds without it even where it is found, as a machine
# without network would (scripts/setup.sh --no-cudnn-frontend passes it).
option(GPU100_CUDNN_FRONTEND "Use the cuDNN frontend's headers where they are found" ON)
find_path(CUDNN_FRONTEND_INCLUDE_DIR cudnn_frontend.h
          HINTS ${CUDNN_FRONTEND_ROOT} $ENV{CUDNN_FRONTEND_ROOT}
                ${PROJECT_SOURCE_DIR}/.whl/cudnn_frontend
          PATH_SUFFIXES include NO_DEFAULT_PATH)
if(GPU100_CUDNN_FRONTEND AND GPU100_HAVE_CUDNN AND CUDNN_FRONTEND_INCLUDE_DIR)
  set(GPU100_HAVE_CUDNN_FRONTEND ON)
  add_library(gpu100_cudnn_frontend INTERFACE)
  add_library(gpu100::cudnn_frontend ALIAS gpu100_cudnn_frontend)
  target_include_directories(gpu100_cudnn_frontend SYSTEM INTERFACE ${CUDNN_FRONTEND_INCLUDE_DIR})
  target_link_libraries(gpu100_cudnn_frontend INTERFACE gpu100::cudnn CUDA::nvrtc)
  target_compile_definitions(gpu100_cudnn_frontend INTERFACE GPU100_HAVE_CUDNN_FRONTEND=1)
  message(STATUS "gpu100: cuDNN frontend found: ${CUDNN_FRONTEND_INCLUDE_DIR}")
elseif(NOT GPU100_CUDNN_FRONTEND)
  set(GPU100_HAVE_CUDNN_FRONTEND OFF)
  message(STATUS "gpu100: cuDNN frontend left out (GPU100_CUDNN_FRONTEND=OFF): "
                 "day05's cudnn_sdpa row will be skipped")
else()
  set(GPU100_HAVE_CUDNN_FRONTEND OFF)
  message(STATUS "gpu100: cuDNN frontend not found (optional; scripts/setup.sh fetches it): "
                 "day05's cudnn_sdpa row will be skipped")
endif()

find_package(Python3 COMPONENTS Interpreter QUIET)

# NCCL is optional: the capstone's multi-GPU paths (capstone_dual_conv/multi_gpu: the batch and
# the trunks of MC-ResNet18 over several GPUs, and the all-reduce lesson) need it. It is looked for
# in -DNCCL_ROOT=/path or the NCCL_ROOT environment variable, in the CUDA install, and in pip's
# nvidia-nccl-cu13 wheel (site-packages/nvidia/nccl) of the Python interpreter. Without it those
# paths are not built, and the configure step says so in one line.
set(gpu100_nccl_hints ${NCCL_ROOT} $ENV{NCCL_ROOT} ${CUDAToolkit_LIBRARY_ROOT})
if(Python3_Interpreter_FOUND)
  execute_process(COMMAND ${Python3_EXECUTABLE} -c
                          "import nvidia.nccl as m; print(list(m.__path__)[0])"
                  RESULT_VARIABLE gpu100_nccl_rc OUTPUT_VARIABLE gpu100_nccl_pip
                  ERROR_QUIET OUTPUT_STRIP_TRAILING_WHITESPACE)
  if(gpu100_nccl_rc EQUAL 0)
    list(APPEND gpu100_nccl_hints ${gpu100_nccl_pip})
  endif()
endif()
find_path(NCCL_INCLUDE_DIR nccl.h HINTS ${gpu100_nccl_hints} ${CUDAToolkit_INCLUDE_DIRS}
          PATH_SUFFIXES include)
# The wheel ships libnccl.so.2 without the libnccl.so link.
find_library(NCCL_LIBRARY NAMES nccl libnccl.so.2 HINTS ${gpu100_nccl_hints}
             ${CUDAToolkit_LIBRARY_DIR} PATH_SUFFIXES lib lib64 lib/x86_64-linux-gnu)
set(GPU100_HAVE_NCCL OFF)
if(NCCL_INCLUDE_DIR AND NCCL_LIBRARY)
  file(STRINGS ${NCCL_INCLUDE_DIR}/nccl.h gpu100_nccl_version
       REGEX "^#define NCCL_(MAJOR|MINOR|PATCH) +[0-9]+")
  string(REGEX REPLACE ".*MAJOR +([0-9]+).*MINOR +([0-9]+).*PATCH +([0-9]+).*" "\\1.\\2.\\3"
         gpu100_nccl_version "${gpu100_nccl_version}")
  # ncclBfloat16, ncclSend/ncclRecv, ncclCommAbort, ncclCommGetAsyncError and ncclGetLastError:
  # 2.18 or newer (2023).
  if(gpu100_nccl_version VERSION_LESS 2.18)
    message(STATUS "gpu100: NCCL ${gpu100_nccl_version} is older than 2.18: the multi-GPU paths "
                   "are not built")
  else()
    set(GPU100_HAVE_NCCL ON)
    add_library(gpu100_nccl INTERFACE)
    add_library(gpu100::nccl ALIAS gpu100_nccl)
    target_include_directories(gpu100_nccl SYSTEM INTERFACE ${NCCL_INCLUDE_DIR})
    target_link_libraries(gpu100_nccl INTERFACE ${NCCL_LIBRARY})
    target_compile_definitions(gpu100_nccl INTERFACE GPU100_HAVE_NCCL=1)
    message(STATUS "gpu100: NCCL ${gpu100_nccl_version} found: ${NCCL_LIBRARY}")
  endif()
else()
  message(STATUS "gpu100: NCCL not found (optional; pip install nvidia-nccl-cu13 or set "
                 "NCCL_ROOT): the multi-GPU paths are not built")
endif()
