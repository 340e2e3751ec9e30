# Modelc.cmake: ONNX models as library targets in a CMake build.
#
#   include(path/to/Modelc.cmake)      # or, installed: find_package(modelc)
#   modelc_add_model(TARGET name MODEL model.onnx
#                    [TARGET_KIND c|cuda] [OPTIONS opt...] [MODELC path])
#   target_link_libraries(app PRIVATE name)
#
# Makes the static library `name` from the sources `modelc compile` writes
# into ${CMAKE_CURRENT_BINARY_DIR}/modelc/name (name.h and modelc_rt.h are
# on its public include path), built with this project's compiler and
# flags: a cross toolchain file works. TARGET_KIND cuda compiles name.cu
# as C++17 (the project must enable the CUDA language) for the project's
# CMAKE_CUDA_ARCHITECTURES, which it passes to modelc as --cuda-arch (the
# generated code depends on them: tensor cores from sm_80) unless OPTIONS
# has one, and links the CUDA runtime CMAKE_CUDA_RUNTIME_LIBRARY names
# (static by default; CMake adds that one to CUDA links too, so naming it
# links one runtime, not two).
# MODELC (or the cache variable MODELC_EXECUTABLE) names the modelc binary;
# without them, the installed one when this file came by
# find_package(modelc) (modelcConfig.cmake: modelc::modelc), else modelc
# on PATH.
#
# modelc runs again when the model, the modelc binary or the options
# change; it rewrites only the sources whose text changed, and a stamp
# records the run. The library's sources depend on the stamp, so a touched
# model regenerates, recompiles the model and relinks; a build with
# nothing changed does nothing.

set(MODELC_EXECUTABLE "" CACHE FILEPATH "the modelc binary (default: the installed package's, else modelc on PATH)")

function(modelc_add_model)
	cmake_parse_arguments(MC "" "TARGET;MODEL;TARGET_KIND;MODELC" "OPTIONS" ${ARGN})
	if(NOT MC_TARGET OR NOT MC_MODEL)
		message(FATAL_ERROR "modelc_add_model: TARGET and MODEL are required")
	endif()
	if(NOT MC_TARGET_KIND)
		set(MC_TARGET_KIND c)
	endif()
	if(NOT MC_TARGET_KIND STREQUAL "c" AND NOT MC_TARGET_KIND STREQUAL "cuda")
		message(FATAL_ERROR "modelc_add_model(${MC_TARGET}): TARGET_KIND is c or cuda, not '${MC_TARGET_KIND}'")
	endif()
	set(modelc "${MC_MODELC}")
	if(NOT modelc)
		set(modelc "${MODELC_EXECUTABLE}")
	endif()
	# the installed package's own modelc (modelcConfig.cmake), then PATH
	if(NOT modelc AND TARGET modelc::modelc)
		get_target_property(modelc modelc::modelc IMPORTED_LOCATION)
	endif()
	if(NOT modelc)
		find_program(modelc_found modelc REQUIRED)
		set(modelc "${modelc_found}")
	endif()
	get_filename_component(model "${MC_MODEL}" ABSOLUTE)
	set(dir "${CMAKE_CURRENT_BINARY_DIR}/modelc/${MC_TARGET}")
	set(stamp "${dir}/${MC_TARGET}.stamp")
	set(options ${MC_OPTIONS})
	if(MC_TARGET_KIND STREQUAL "cuda")
		list(APPEND options --target cuda)
		# 87;90-real -> sm_87,sm_90; all, native or none: modelc's default
		set(archs "")
		if(NOT "--cuda-arch" IN_LIST options)
			foreach(a IN LISTS CMAKE_CUDA_ARCHITECTURES)
				string(REGEX REPLACE "-(real|virtual)$" "" a "${a}")
				if(a MATCHES "^[0-9]+[af]?$")
					list(APPEND archs "sm_${a}")
				endif()
			endforeach()
		endif()
		if(archs)
			list(REMOVE_DUPLICATES archs)
			string(REPLACE ";" "," archs "${archs}")
			list(APPEND options --cuda-arch ${archs})
		endif()
		set(code "${dir}/${MC_TARGET}.cu")
	else()
		set(code "${dir}/${MC_TARGET}.c")
	endif()
	set(sources "${code}" "${dir}/${MC_TARGET}_weights.c")
	add_custom_command(
		OUTPUT "${stamp}"
		BYPRODUCTS ${sources} "${dir}/${MC_TARGET}.h" "${dir}/modelc_rt.h"
		COMMAND "${modelc}" compile "${model}" -o "${dir}" --name "${MC_TARGET}" ${options}
		COMMAND "${CMAKE_COMMAND}" -E touch "${stamp}"
		DEPENDS "${model}" "${modelc}"
		COMMENT "modelc: ${MC_TARGET} from ${MC_MODEL}"
		VERBATIM)
	add_library(${MC_TARGET} STATIC ${sources})
	# a new run recompiles the model's sources (and so relinks its users)
	set_source_files_properties(${sources} PROPERTIES GENERATED TRUE OBJECT_DEPENDS "${stamp}")
	target_include_directories(${MC_TARGET} PUBLIC "${dir}")
	if(MC_TARGET_KIND STREQUAL "cuda")
		find_package(CUDAToolkit REQUIRED)
		set_target_properties(${MC_TARGET} PROPERTIES CUDA_STANDARD 17 CUDA_STANDARD_REQUIRED ON)
		string(TOLOWER "${CMAKE_CUDA_RUNTIME_LIBRARY}" runtime)
		if(runtime STREQUAL "shared")
			target_link_libraries(${MC_TARGET} PUBLIC CUDA::cudart)
		elseif(NOT runtime STREQUAL "none")
			target_link_libraries(${MC_TARGET} PUBLIC CUDA::cudart_static)
		endif()
	else()
		target_link_libraries(${MC_TARGET} PUBLIC m)
	endif()
endfunction()
