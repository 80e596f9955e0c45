# Where the torch of the interpreter named by Python3_EXECUTABLE keeps its CMake files, so that
# find_package(Torch) takes that torch: pip's build (setup.py) and scripts/test-cuda.sh name the
# interpreter, whose torch may be a wheel (its CMake files inside the package) rather than
# Debian's libtorch-dev (found without help). The same for pybind11's; and where that torch is a
# CUDA build, the CUDA toolkit of the nvcc on PATH, which find_package(Torch) then looks for.
if(NOT Python3_EXECUTABLE)
  return()
endif()
execute_process(
  COMMAND "${Python3_EXECUTABLE}" -c "import torch, torch.utils; print(torch.utils.cmake_prefix_path); print(torch.version.cuda or '')"
  OUTPUT_VARIABLE metrics_torch OUTPUT_STRIP_TRAILING_WHITESPACE ERROR_QUIET)
string(REPLACE "\n" ";" metrics_torch "${metrics_torch}")
list(LENGTH metrics_torch metrics_torch_lines)
if(metrics_torch_lines GREATER 0)
  list(GET metrics_torch 0 metrics_torch_prefix)
  if(IS_DIRECTORY "${metrics_torch_prefix}")
    list(APPEND CMAKE_PREFIX_PATH "${metrics_torch_prefix}")
  endif()
endif()

execute_process(COMMAND "${Python3_EXECUTABLE}" -m pybind11 --cmakedir
                OUTPUT_VARIABLE metrics_pybind11_dir OUTPUT_STRIP_TRAILING_WHITESPACE ERROR_QUIET)
if(NOT pybind11_DIR AND metrics_pybind11_dir AND IS_DIRECTORY "${metrics_pybind11_dir}")
  set(pybind11_DIR "${metrics_pybind11_dir}" CACHE PATH "pybind11's CMake files, from ${Python3_EXECUTABLE}")
endif()

find_program(METRICS_NVCC nvcc)
if(metrics_torch_lines GREATER 1 AND METRICS_NVCC AND NOT CMAKE_CUDA_COMPILER)
  get_filename_component(metrics_nvcc "${METRICS_NVCC}" REALPATH)
  get_filename_component(metrics_cuda_bin "${metrics_nvcc}" DIRECTORY)
  get_filename_component(metrics_cuda_root "${metrics_cuda_bin}" DIRECTORY)
  set(CMAKE_CUDA_COMPILER "${metrics_nvcc}" CACHE FILEPATH "nvcc, for a CUDA build of torch")
  set(CUDAToolkit_ROOT "${metrics_cuda_root}" CACHE PATH "the CUDA toolkit of nvcc")
endif()
