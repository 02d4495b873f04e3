# PyTorch, for the capstone's extension (capstone_dual_conv/torch): optional. It is found through
# the Python interpreter (-DPython3_EXECUTABLE=... picks another one): when that interpreter
# imports a CUDA build of torch, GPU100_TORCH_FOUND is ON and GPU100_TORCH_INCLUDE_DIRS and
# GPU100_TORCH_LIBRARIES describe it. The extension links only libtorch's C++ libraries (no
# pybind11: its operators are reached through torch.ops), so TorchConfig.cmake is not needed.
# -DGPU100_TORCH=OFF leaves the extension out.
option(GPU100_TORCH "Build the PyTorch extension where PyTorch is importable" ON)
set(GPU100_TORCH_FOUND OFF)
if(NOT GPU100_TORCH)
  message(STATUS "gpu100: PyTorch extension off (-DGPU100_TORCH=OFF)")
  return()
endif()
if(NOT Python3_Interpreter_FOUND)
  message(STATUS "gpu100: PyTorch extension not built: no Python 3 interpreter")
  return()
endif()
set(gpu100_torch_probe [=[
import os, torch
from torch.utils import cpp_extension as ce
if torch.version.cuda is None:
    raise SystemExit("this torch " + torch.__version__ + " has no CUDA")
lib = os.path.join(os.path.dirname(torch.__file__), "lib")
with open("/proc/self/maps") as maps:  # the C++ runtime this process loaded for torch
    cxx = next((l.split()[-1] for l in maps if "/libstdc++.so" in l), "-")
print(";".join([torch.__version__, torch.version.cuda, str(int(torch._C._GLIBCXX_USE_CXX11_ABI)),
                lib, cxx] + ce.include_paths()))
]=])
execute_process(COMMAND ${Python3_EXECUTABLE} -c "${gpu100_torch_probe}"
                RESULT_VARIABLE gpu100_torch_rc OUTPUT_VARIABLE gpu100_torch_out
                ERROR_VARIABLE gpu100_torch_err OUTPUT_STRIP_TRAILING_WHITESPACE
                ERROR_STRIP_TRAILING_WHITESPACE)
if(NOT gpu100_torch_rc EQUAL 0)
  string(REGEX REPLACE ".*\n" "" gpu100_torch_err "${gpu100_torch_err}")  # the last line
  message(STATUS "gpu100: PyTorch extension not built: ${Python3_EXECUTABLE} cannot use torch "
                 "(${gpu100_torch_err})")
  return()
endif()
list(POP_FRONT gpu100_torch_out GPU100_TORCH_VERSION GPU100_TORCH_CUDA gpu100_torch_abi
     gpu100_torch_lib gpu100_torch_stdcxx)
if(NOT gpu100_torch_abi EQUAL 1)
  message(STATUS "gpu100: PyTorch extension not built: torch ${GPU100_TORCH_VERSION} uses the "
                 "pre-C++11 string ABI, which the project's libraries do not")
  return()
endif()
set(GPU100_TORCH_INCLUDE_DIRS ${gpu100_torch_out})
set(GPU100_TORCH_LIBRARY_DIR ${gpu100_torch_lib})
set(GPU100_TORCH_LIBRARIES)
foreach(lib c10 c10_cuda torch torch_cpu torch_cuda)
  find_library(GPU100_TORCH_LIB_${lib} ${lib} PATHS ${gpu100_torch_lib} NO_DEFAULT_PATH)
  if(NOT GPU100_TORCH_LIB_${lib})
    message(STATUS "gpu100: PyTorch extension not built: lib${lib}.so is not in ${gpu100_torch_lib}")
    return()
  endif()
  list(APPEND GPU100_TORCH_LIBRARIES ${GPU100_TORCH_LIB_${lib}})
endforeach()
# The extension shares one C++ runtime with PyTorch: the shared libstdc++ the interpreter loaded
# with torch, named on the link line. A toolchain that carries only a static libstdc++.a (some
# do) would otherwise copy a second runtime into the extension, whose iostreams are never set up:
# the first error message with a number in it would crash the interpreter.
if(EXISTS "${gpu100_torch_stdcxx}")
  list(APPEND GPU100_TORCH_LIBRARIES ${gpu100_torch_stdcxx})
endif()
# The C++ standard PyTorch's headers were written for: C++20 where ATen.h demands it, else C++17
# (the standard its libraries were built with; a header compiled under another one may not match).
set(GPU100_TORCH_CXX_STANDARD 17)
foreach(dir ${GPU100_TORCH_INCLUDE_DIRS})
  if(EXISTS ${dir}/ATen/ATen.h)
    file(STRINGS ${dir}/ATen/ATen.h gpu100_torch_cxx20 REGEX "C\\+\\+20")
    if(gpu100_torch_cxx20)
      set(GPU100_TORCH_CXX_STANDARD 20)
    endif()
  endif()
endforeach()
set(GPU100_TORCH_FOUND ON)
# The extension is a shared library holding the project's static libraries: they are built as
# position-independent code.
set(CMAKE_POSITION_INDEPENDENT_CODE ON)
message(STATUS "gpu100: PyTorch ${GPU100_TORCH_VERSION} (CUDA ${GPU100_TORCH_CUDA}, C++"
               "${GPU100_TORCH_CXX_STANDARD}) found: the extension capstone_dual_conv/torch is built")
