# modelcConfig.cmake: the installed modelc as a CMake package
# (scripts/install puts it in PREFIX/lib/cmake/modelc/).
#
#   find_package(modelc 0.1 REQUIRED)    # CMAKE_PREFIX_PATH=PREFIX if not a system prefix
#   modelc_add_model(TARGET name MODEL model.onnx [OPTIONS ...])   # Modelc.cmake
#   target_link_libraries(app PRIVATE name)
#
# It defines the imported executable modelc::modelc, PREFIX/bin/modelc,
# which modelc_add_model runs unless MODELC or MODELC_EXECUTABLE names
# another; MODELC_INCLUDE_DIR, PREFIX/include/modelc (modelc_rt.h and
# modelc_threads_pthread.h, for code that includes them without a model's
# output directory); and MODELC_THREADS_PTHREAD_SOURCE, runtime-min's
# parallel_for on POSIX threads for NAME_run_threads (--threads N).
# PREFIX is found from this file's own place, never written into it, so
# the tree works from DESTDIR and wherever it is moved.
# A cross toolchain file that sets CMAKE_FIND_ROOT_PATH_MODE_PACKAGE ONLY
# hides host packages: give modelc_DIR=PREFIX/lib/cmake/modelc then (modelc
# runs on the build machine).

get_filename_component(_modelc_prefix "${CMAKE_CURRENT_LIST_DIR}/../../.." ABSOLUTE)
if(NOT EXISTS "${_modelc_prefix}/bin/modelc")
	set(modelc_FOUND FALSE)
	set(modelc_NOT_FOUND_MESSAGE "no modelc at ${_modelc_prefix}/bin/modelc, beside ${CMAKE_CURRENT_LIST_FILE}")
	return()
endif()
if(NOT TARGET modelc::modelc)
	add_executable(modelc::modelc IMPORTED)
	set_target_properties(modelc::modelc PROPERTIES IMPORTED_LOCATION "${_modelc_prefix}/bin/modelc")
endif()
set(MODELC_INCLUDE_DIR "${_modelc_prefix}/include/modelc")
set(MODELC_THREADS_PTHREAD_SOURCE "${_modelc_prefix}/share/modelc/modelc_threads_pthread.c")
include("${CMAKE_CURRENT_LIST_DIR}/Modelc.cmake")
unset(_modelc_prefix)
