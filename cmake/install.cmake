# Install rules: headers, the library, a CMake package exporting floodgate::floodgate (and, as
# its component asio, floodgate::asio: floodgate/asio.hpp with its Boost requirement), and
# pkg-config files (floodgate, floodgate-asio). All in the component dev: the floodgate-dev
# Debian package (cmake/package.cmake).
include(CMakePackageConfigHelpers)

install(TARGETS floodgate EXPORT floodgate-targets
        ARCHIVE DESTINATION ${CMAKE_INSTALL_LIBDIR} COMPONENT dev
        LIBRARY DESTINATION ${CMAKE_INSTALL_LIBDIR} COMPONENT dev)
# With --strip (CPack's too), the archive loses its debug info as dh_strip would strip it:
# RelWithDebInfo's is ~60 MB, nearly all of it.
install(CODE "if(CMAKE_INSTALL_DO_STRIP)
  execute_process(COMMAND \"${CMAKE_STRIP}\" --strip-debug --remove-section=.comment
    --enable-deterministic-archives
    \"\$ENV{DESTDIR}\${CMAKE_INSTALL_PREFIX}/${CMAKE_INSTALL_LIBDIR}/$<TARGET_FILE_NAME:floodgate>\"
    COMMAND_ERROR_IS_FATAL ANY)
endif()" COMPONENT dev)
install(DIRECTORY ${PROJECT_SOURCE_DIR}/include/floodgate DESTINATION ${CMAKE_INSTALL_INCLUDEDIR}
        COMPONENT dev)
install(EXPORT floodgate-targets NAMESPACE floodgate::
        DESTINATION ${CMAKE_INSTALL_LIBDIR}/cmake/floodgate COMPONENT dev)
install(TARGETS floodgate_asio EXPORT floodgate-asio-targets COMPONENT dev)
install(EXPORT floodgate-asio-targets NAMESPACE floodgate::
        DESTINATION ${CMAKE_INSTALL_LIBDIR}/cmake/floodgate COMPONENT dev)

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
# floodgate::asio only when asked for (find_package(floodgate COMPONENTS asio)): it needs the
# Boost headers, which floodgate::floodgate users never do.
if("asio" IN_LIST floodgate_FIND_COMPONENTS AND NOT TARGET floodgate::asio)
  find_package(Boost @FLOODGATE_BOOST_MIN@ CONFIG QUIET)
  if(Boost_FOUND)
    include(${CMAKE_CURRENT_LIST_DIR}/floodgate-asio-targets.cmake)
  else()
    set(floodgate_NOT_FOUND_MESSAGE "floodgate::asio needs Boost >= @FLOODGATE_BOOST_MIN@ (headers)")
  endif()
endif()
set(floodgate_asio_FOUND FALSE)
if(TARGET floodgate::asio)
  set(floodgate_asio_FOUND TRUE)
endif()
check_required_components(floodgate)
]=])
set(FLOODGATE_BOOST_MIN 1.81)
configure_package_config_file(${CMAKE_CURRENT_BINARY_DIR}/floodgate-config.cmake.in
  ${CMAKE_CURRENT_BINARY_DIR}/floodgate-config.cmake
  INSTALL_DESTINATION ${CMAKE_INSTALL_LIBDIR}/cmake/floodgate)
write_basic_package_version_file(${CMAKE_CURRENT_BINARY_DIR}/floodgate-config-version.cmake
  COMPATIBILITY SameMinorVersion)
install(FILES ${CMAKE_CURRENT_BINARY_DIR}/floodgate-config.cmake
              ${CMAKE_CURRENT_BINARY_DIR}/floodgate-config-version.cmake
        DESTINATION ${CMAKE_INSTALL_LIBDIR}/cmake/floodgate COMPONENT dev)

# Relocatable: the prefix is found from the .pc file's own place, so --prefix at install works.
file(RELATIVE_PATH FLOODGATE_PC_TO_PREFIX "/p/${CMAKE_INSTALL_LIBDIR}/pkgconfig" "/p")
configure_file(${PROJECT_SOURCE_DIR}/cmake/floodgate.pc.in
               ${CMAKE_CURRENT_BINARY_DIR}/floodgate.pc @ONLY)
install(FILES ${CMAKE_CURRENT_BINARY_DIR}/floodgate.pc
        DESTINATION ${CMAKE_INSTALL_LIBDIR}/pkgconfig COMPONENT dev)

# floodgate-asio.pc: floodgate plus the Boost headers floodgate/asio.hpp needs (Boost ships no
# .pc file; a non-system include directory is named here).
set(FLOODGATE_BOOST_CFLAGS "")
foreach(dir IN LISTS Boost_INCLUDE_DIRS)
  if(NOT dir IN_LIST CMAKE_CXX_IMPLICIT_INCLUDE_DIRECTORIES)
    string(APPEND FLOODGATE_BOOST_CFLAGS " -I${dir}")
  endif()
endforeach()
configure_file(${PROJECT_SOURCE_DIR}/cmake/floodgate-asio.pc.in
               ${CMAKE_CURRENT_BINARY_DIR}/floodgate-asio.pc @ONLY)
install(FILES ${CMAKE_CURRENT_BINARY_DIR}/floodgate-asio.pc
        DESTINATION ${CMAKE_INSTALL_LIBDIR}/pkgconfig COMPONENT dev)
