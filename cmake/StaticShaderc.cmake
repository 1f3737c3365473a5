# Debian's libshaderc_combined.a lacks glslang and SPIRV-Tools; link their static archives in one group so
# the binaries carry the whole shader toolchain and need only the Vulkan loader at run time. zlib (the IDX
# reader's gzip) joins them for the same reason.
set(_mn_static_paths)
foreach(lib shaderc_combined glslang SPIRV MachineIndependent GenericCodeGen OGLCompiler OSDependent
            SPIRV-Tools-opt SPIRV-Tools z)
  find_library(MN_LIB_${lib} NAMES lib${lib}.a REQUIRED)
  list(APPEND _mn_static_paths ${MN_LIB_${lib}})
endforeach()
add_library(meganeura_shaderc_static INTERFACE)
target_link_libraries(meganeura_shaderc_static INTERFACE -Wl,--start-group ${_mn_static_paths} -Wl,--end-group)
