# Debian's libshaderc_combined.a lacks glslang and SPIRV-Tools; link their static archives in one group so
# the binaries carry the whole shader toolchain and need only the Vulkan loader at run time. zlib (the IDX
# reader's gzip) is linked statically into programs too (MN_LIB_z_static); Debian's libz.a is not
# position-independent, so shared objects (libmeganeura.so, the Python module) take libz.so.1 instead.
set(_mn_static_paths)
foreach(lib shaderc_combined glslang SPIRV MachineIndependent GenericCodeGen OGLCompiler OSDependent
            SPIRV-Tools-opt SPIRV-Tools)
  find_library(MN_LIB_${lib} NAMES lib${lib}.a REQUIRED)
  list(APPEND _mn_static_paths ${MN_LIB_${lib}})
endforeach()
add_library(meganeura_shaderc_static INTERFACE)
target_link_libraries(meganeura_shaderc_static INTERFACE -Wl,--start-group ${_mn_static_paths} -Wl,--end-group)
find_library(MN_LIB_z_static NAMES libz.a REQUIRED)
