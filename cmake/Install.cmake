# cmake --install: headers, libmeganeura.a (+ libmeganeura.so with MEGANEURA_SHARED), the `meganeura` command,
# a CMake package (find_package(meganeura) -> meganeura::meganeura, static; meganeura::meganeura_shared) and
# meganeura.pc for pkg-config. tests/install/ builds an outside project against the installed tree.
include(CMakePackageConfigHelpers)

install(DIRECTORY ${CMAKE_SOURCE_DIR}/src/meganeura DESTINATION ${CMAKE_INSTALL_INCLUDEDIR}
        FILES_MATCHING PATTERN "*.hpp")
install(TARGETS ${MEGANEURA_LIBRARY_TARGETS} meganeura_shaderc_static EXPORT meganeuraTargets
        ARCHIVE DESTINATION ${CMAKE_INSTALL_LIBDIR}
        LIBRARY DESTINATION ${CMAKE_INSTALL_LIBDIR}
        INCLUDES DESTINATION ${CMAKE_INSTALL_INCLUDEDIR})
install(TARGETS meganeura_cli RUNTIME DESTINATION ${CMAKE_INSTALL_BINDIR})
set(MEGANEURA_CMAKE_DIR ${CMAKE_INSTALL_LIBDIR}/cmake/meganeura)
install(EXPORT meganeuraTargets NAMESPACE meganeura:: DESTINATION ${MEGANEURA_CMAKE_DIR})
configure_package_config_file(${CMAKE_SOURCE_DIR}/cmake/meganeuraConfig.cmake.in
                              ${CMAKE_BINARY_DIR}/meganeuraConfig.cmake INSTALL_DESTINATION ${MEGANEURA_CMAKE_DIR})
write_basic_package_version_file(${CMAKE_BINARY_DIR}/meganeuraConfigVersion.cmake COMPATIBILITY SameMinorVersion)
install(FILES ${CMAKE_BINARY_DIR}/meganeuraConfig.cmake ${CMAKE_BINARY_DIR}/meganeuraConfigVersion.cmake
        DESTINATION ${MEGANEURA_CMAKE_DIR})

# pkg-config: `pkg-config --cflags --libs meganeura` links the shared library; `--static` the archive with the
# shader toolchain and zlib archives it needs (absolute paths, as found at build time).
set(MEGANEURA_PC_STATIC "")
foreach(lib ${_mn_static_paths} ${MN_LIB_z_static})
  string(APPEND MEGANEURA_PC_STATIC " ${lib}")
endforeach()
file(RELATIVE_PATH MEGANEURA_PC_LIB_TO_INCLUDE /p/${CMAKE_INSTALL_LIBDIR} /p/${CMAKE_INSTALL_INCLUDEDIR})
configure_file(${CMAKE_SOURCE_DIR}/cmake/meganeura.pc.in ${CMAKE_BINARY_DIR}/meganeura.pc @ONLY)
install(FILES ${CMAKE_BINARY_DIR}/meganeura.pc DESTINATION ${CMAKE_INSTALL_LIBDIR}/pkgconfig)
install(FILES ${CMAKE_SOURCE_DIR}/LICENSE ${CMAKE_SOURCE_DIR}/LICENSE-APACHE ${CMAKE_SOURCE_DIR}/LICENSE-MIT
              ${CMAKE_SOURCE_DIR}/README.md ${CMAKE_SOURCE_DIR}/CHANGELOG.md ${CMAKE_SOURCE_DIR}/CITATION.cff
        DESTINATION ${CMAKE_INSTALL_DOCDIR})
