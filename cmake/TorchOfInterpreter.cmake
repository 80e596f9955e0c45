# find_package(Torch) for the torch that the Python interpreter imports, where the build has one:
# pip's build (setup.py) and scripts/test-cuda.sh name it with Python3_EXECUTABLE; the bindings
# default to /usr/bin/python3, Debian's torch. That torch may be a wheel, its CMake files inside the
# package, rather than Debian's libtorch-dev (found without help). The same for pybind11's; and
# where the torch is a CUDA build, the CUDA toolkit of the nvcc on PATH, which find_package(Torch)
# then looks for. A build directory configured earlier for another torch is refused, not mixed.
if(METRICS_BUILD_PYTHON AND NOT Python3_EXECUTABLE AND EXISTS /usr/bin/python3)
  set(Python3_EXECUTABLE /usr/bin/python3 CACHE FILEPATH "Python interpreter that imports torch")
endif()

set(metrics_torch_prefix "")
if(Python3_EXECUTABLE)
  execute_process(
    COMMAND "${Python3_EXECUTABLE}" -c
            "import torch, torch.utils; print('metrics-torch', torch.utils.cmake_prefix_path, torch.version.cuda or '', sep='|')"
    OUTPUT_VARIABLE metrics_torch RESULT_VARIABLE metrics_torch_result ERROR_QUIET)
  if(metrics_torch_result EQUAL 0 AND metrics_torch MATCHES "metrics-torch\\|([^|\n]*)\\|([^|\n]*)")
    set(metrics_torch_cuda "${CMAKE_MATCH_2}")
    if(IS_DIRECTORY "${CMAKE_MATCH_1}")
      set(metrics_torch_prefix "${CMAKE_MATCH_1}")
      list(APPEND CMAKE_PREFIX_PATH "${metrics_torch_prefix}")
    endif()
  else()
    message(STATUS "${Python3_EXECUTABLE} imports no torch: LibTorch is looked for in the usual places")
  endif()

  execute_process(COMMAND "${Python3_EXECUTABLE}" -m pybind11 --cmakedir
                  OUTPUT_VARIABLE metrics_pybind11_dir OUTPUT_STRIP_TRAILING_WHITESPACE ERROR_QUIET)
  if(NOT pybind11_DIR AND metrics_pybind11_dir AND IS_DIRECTORY "${metrics_pybind11_dir}")
    set(pybind11_DIR "${metrics_pybind11_dir}" CACHE PATH "pybind11's CMake files, from ${Python3_EXECUTABLE}")
  endif()
endif()

if(metrics_torch_cuda AND NOT CMAKE_CUDA_COMPILER)
  find_program(METRICS_NVCC nvcc)
  if(METRICS_NVCC)
    get_filename_component(metrics_nvcc "${METRICS_NVCC}" REALPATH)
    execute_process(COMMAND "${metrics_nvcc}" --version OUTPUT_VARIABLE metrics_nvcc_version ERROR_QUIET)
    string(REGEX MATCH "release ([0-9]+)" metrics_nvcc_release "${metrics_nvcc_version}")
    set(metrics_nvcc_major "${CMAKE_MATCH_1}")
    string(REGEX MATCH "^[0-9]+" metrics_torch_cuda_major "${metrics_torch_cuda}")
    if(NOT metrics_nvcc_major STREQUAL metrics_torch_cuda_major)
      message(WARNING "nvcc (${metrics_nvcc}) is CUDA ${metrics_nvcc_major}; torch was built with CUDA ${metrics_torch_cuda}")
    endif()
    get_filename_component(metrics_cuda_bin "${metrics_nvcc}" DIRECTORY)
    get_filename_component(metrics_cuda_root "${metrics_cuda_bin}" DIRECTORY)
    set(CMAKE_CUDA_COMPILER "${metrics_nvcc}" CACHE FILEPATH "nvcc, for a CUDA build of torch")
    set(CUDAToolkit_ROOT "${metrics_cuda_root}" CACHE PATH "the CUDA toolkit of nvcc")
  endif()
endif()

find_package(Torch REQUIRED)

if(metrics_torch_prefix)
  get_filename_component(metrics_wanted "${metrics_torch_prefix}" REALPATH)
  get_filename_component(metrics_found "${Torch_DIR}" REALPATH)
  string(FIND "${metrics_found}/" "${metrics_wanted}/" metrics_at)
  if(NOT metrics_at EQUAL 0)
    message(FATAL_ERROR "This build directory uses the LibTorch in ${Torch_DIR}, not the torch that "
                        "${Python3_EXECUTABLE} imports (${metrics_torch_prefix}): configure a fresh build "
                        "directory, or remove this one's CMakeCache.txt")
  endif()
endif()
