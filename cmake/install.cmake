# Install rules: headers, the library, a CMake package exporting floodgate::floodgate, and a
# pkg-config file.
include(CMakePackageConfigHelpers)

install(TARGETS floodgate EXPORT floodgate-targets
        ARCHIVE DESTINATION ${CMAKE_INSTALL_LIBDIR}
        LIBRARY DESTINATION ${CMAKE_INSTALL_LIBDIR})
install(DIRECTORY ${PROJECT_SOURCE_DIR}/include/floodgate DESTINATION ${CMAKE_INSTALL_INCLUDEDIR})
install(EXPORT floodgate-targets NAMESPACE floodgate::
        DESTINATION ${CMAKE_INSTALL_LIBDIR}/cmake/floodgate)

file(WRITE ${CMAKE_CURRENT_BINARY_DIR}/floodgate-config.cmake.in [=[
@PACKAGE_INIT@
include(CMakeFindDependencyMacro)
find_dependency(Threads)
if(NOT TARGET floodgate::floodgate)
  find_dependency(PkgConfig)
  pkg_check_modules(HIREDIS REQUIRED IMPORTED_TARGET hiredis)
  find_dependency(OpenSSL)
  include(${CMAKE_CURRENT_LIST_DIR}/floodgate-targets.cmake)
endif()
]=])
configure_package_config_file(${CMAKE_CURRENT_BINARY_DIR}/floodgate-config.cmake.in
  ${CMAKE_CURRENT_BINARY_DIR}/floodgate-config.cmake
  INSTALL_DESTINATION ${CMAKE_INSTALL_LIBDIR}/cmake/floodgate)
write_basic_package_version_file(${CMAKE_CURRENT_BINARY_DIR}/floodgate-config-version.cmake
  COMPATIBILITY SameMinorVersion)
install(FILES ${CMAKE_CURRENT_BINARY_DIR}/floodgate-config.cmake
              ${CMAKE_CURRENT_BINARY_DIR}/floodgate-config-version.cmake
        DESTINATION ${CMAKE_INSTALL_LIBDIR}/cmake/floodgate)

# Relocatable: the prefix is found from the .pc file's own place, so --prefix at install works.
file(RELATIVE_PATH FLOODGATE_PC_TO_PREFIX "/p/${CMAKE_INSTALL_LIBDIR}/pkgconfig" "/p")
configure_file(${PROJECT_SOURCE_DIR}/cmake/floodgate.pc.in
               ${CMAKE_CURRENT_BINARY_DIR}/floodgate.pc @ONLY)
install(FILES ${CMAKE_CURRENT_BINARY_DIR}/floodgate.pc
        DESTINATION ${CMAKE_INSTALL_LIBDIR}/pkgconfig)
