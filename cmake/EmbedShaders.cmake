# Shaders are real files (.comp for a kernel's main body, .glsl for pieces the C++ composes), embedded at build
# time as string constants of one generated header, so that the library needs no file at run time and glslang can
# lint the files (tests/cpu/test_matmul_glsl_lint.cpp). Placeholders @NAME@ are filled by the C++ that composes.
#
# meganeura_embed_shaders(target folder header namespace): every *.comp and *.glsl of `folder` (relative to the
# source root) becomes `inline constexpr char <stem>_<ext>[]` in namespace `namespace` of
# <build>/generated/<header>, which the sources of `folder` (only they: other objects keep their compile lines,
# so ccache still hits) include as "<header>".
function(meganeura_embed_shaders target folder header namespace)
  file(GLOB files CONFIGURE_DEPENDS ${CMAKE_SOURCE_DIR}/${folder}/*.comp ${CMAKE_SOURCE_DIR}/${folder}/*.glsl)
  list(SORT files)
  set(out ${CMAKE_BINARY_DIR}/generated/${header})
  add_custom_command(
    OUTPUT ${out}
    COMMAND ${CMAKE_COMMAND} -DOUT=${out} -DNAMESPACE=${namespace} -DSOURCE_DIR=${CMAKE_SOURCE_DIR} -DFOLDER=${folder} -P
            ${CMAKE_SOURCE_DIR}/cmake/EmbedShadersRun.cmake
    DEPENDS ${files} ${CMAKE_SOURCE_DIR}/cmake/EmbedShadersRun.cmake
    COMMENT "Embedding the shaders of ${folder}"
    VERBATIM)
  target_sources(${target} PRIVATE ${out})
  file(GLOB users CONFIGURE_DEPENDS ${CMAKE_SOURCE_DIR}/${folder}/*.cpp)
  set_source_files_properties(${users} TARGET_DIRECTORY ${target} PROPERTIES INCLUDE_DIRECTORIES
                                                                             ${CMAKE_BINARY_DIR}/generated)
endfunction()
