# The Debian packages, built by CPack from this build tree (scripts/package; docs/operations.md,
# "The Debian package"):
#   floodgate      floodgated, floodgate, floodgate-bench, their man pages, the systemd unit (run
#                  as the system user floodgate, made in postinst), /etc/floodgate/rules.yaml and
#                  /etc/default/floodgated as conffiles
#   floodgate-dev  the static library, its headers, CMake package and pkg-config files
# Components: runtime and dev. The rules here that only the package needs (absolute paths such as
# /etc) are EXCLUDE_FROM_ALL, so `cmake --install build --prefix DIR` is as before.
if(NOT TARGET floodgated OR NOT TARGET floodgate_cli OR NOT TARGET floodgate-bench)
  return()
endif()

set(FLOODGATE_PACKAGING ${PROJECT_SOURCE_DIR}/packaging)
set(floodgate_package_out ${PROJECT_BINARY_DIR}/packaging)

# The unit is examples/floodgated.service (hardening and all, tested by tests/deploy) with the
# package's paths and its static user instead of DynamicUser: its own header comment, /usr/bin,
# the man page. Each replacement must match, so a changed example cannot slip through unchanged.
set(floodgate_unit_example ${PROJECT_SOURCE_DIR}/examples/floodgated.service)
set_property(DIRECTORY APPEND PROPERTY CMAKE_CONFIGURE_DEPENDS ${floodgate_unit_example})
file(READ ${floodgate_unit_example} unit)
function(floodgate_unit_replace from to)
  string(FIND "${unit}" "${from}" at)
  if(at EQUAL -1)
    message(FATAL_ERROR "package: '${from}' is no longer in ${floodgate_unit_example}: "
                        "update cmake/package.cmake")
  endif()
  string(REPLACE "${from}" "${to}" replaced "${unit}")
  set(unit "${replaced}" PARENT_SCOPE)
endfunction()
string(FIND "${unit}" "\n[Unit]\n" unit_start)
if(unit_start EQUAL -1)
  message(FATAL_ERROR "package: no [Unit] section in ${floodgate_unit_example}")
endif()
math(EXPR unit_start "${unit_start} + 1")
string(SUBSTRING "${unit}" ${unit_start} -1 unit)
string(PREPEND unit
"# floodgated, from the floodgate package: examples/floodgated.service of its source with
# /usr/bin and the system user floodgate (made by the package) instead of DynamicUser.
# Flags go in /etc/default/floodgated, the rules in /etc/floodgate/rules.yaml (man floodgated).
# It reads those files and writes nothing; logs go to the journal.

")
floodgate_unit_replace(
  "Documentation=file:///usr/local/share/doc/floodgate/operations.md"
  "Documentation=man:floodgated(8) file:///usr/share/doc/floodgate/operations.md")
floodgate_unit_replace("ExecStart=/usr/local/bin/floodgated" "ExecStart=/usr/bin/floodgated")
floodgate_unit_replace("ExecReload=/usr/local/bin/floodgate" "ExecReload=/usr/bin/floodgate")
# Of what DynamicUser=yes implies, the example sets all explicitly but RemoveIPC: kept here.
floodgate_unit_replace("\nDynamicUser=yes\n" "\nUser=floodgate\nGroup=floodgate\nRemoveIPC=yes\n")
string(FIND "${unit}" "/usr/local" left)
if(NOT left EQUAL -1)
  message(FATAL_ERROR "package: ${floodgate_unit_example} names /usr/local in a line "
                      "cmake/package.cmake does not replace")
endif()
# Written only when changed, so that a configure leaves the file (and the package) alone.
set(written "")
if(EXISTS ${floodgate_package_out}/floodgated.service)
  file(READ ${floodgate_package_out}/floodgated.service written)
endif()
if(NOT written STREQUAL unit)
  file(WRITE ${floodgate_package_out}/floodgated.service "${unit}")
endif()

# Man pages from each program's --help (help2man, through help_text.sh, which makes the usage
# lines a SYNOPSIS; the programs have no --version, so the project's version is given), with
# FILES and SEE ALSO from packaging/man/PROGRAM.h2m. Built by the target floodgate_man_pages,
# which scripts/package builds: not part of `all`, so a build without help2man still works.
find_program(HELP2MAN help2man)
set(floodgate_man_pages)
function(floodgate_man_page target program section name)
  set(page ${floodgate_package_out}/man/${program}.${section})
  add_custom_command(OUTPUT ${page}.gz
    COMMAND ${CMAKE_COMMAND} -E make_directory ${floodgate_package_out}/man
    COMMAND ${HELP2MAN} --no-info --no-discard-stderr --section ${section}
            --version-string ${PROJECT_VERSION} --name ${name}
            --include ${FLOODGATE_PACKAGING}/man/${program}.h2m
            --output ${page} "${FLOODGATE_PACKAGING}/man/help_text.sh $<TARGET_FILE:${target}>"
    COMMAND gzip -9nf ${page}
    DEPENDS ${target} ${FLOODGATE_PACKAGING}/man/${program}.h2m
            ${FLOODGATE_PACKAGING}/man/help_text.sh
    COMMENT "man page ${program}(${section})" VERBATIM)
  set(floodgate_man_pages ${floodgate_man_pages} ${page}.gz PARENT_SCOPE)
  install(FILES ${page}.gz DESTINATION ${CMAKE_INSTALL_MANDIR}/man${section}
          COMPONENT runtime EXCLUDE_FROM_ALL)
endfunction()
if(HELP2MAN)
  floodgate_man_page(floodgated floodgated 8
    "distributed rate-limit service (HTTP, nginx auth_request, Envoy gRPC)")
  floodgate_man_page(floodgate_cli floodgate 1
    "check floodgated's rules files, inspect and reset keys")
  floodgate_man_page(floodgate-bench floodgate-bench 1 "load and accuracy tool for floodgate")
  add_custom_target(floodgate_man_pages DEPENDS ${floodgate_man_pages})
else()
  add_custom_target(floodgate_man_pages
    COMMAND ${CMAKE_COMMAND} -E echo "help2man is not installed (scripts/lib.sh installs it)"
    COMMAND ${CMAKE_COMMAND} -E false)
endif()

# The changelog of a native package, compressed as Debian's tools would.
set(floodgate_changelog ${floodgate_package_out}/changelog.gz)
add_custom_command(OUTPUT ${floodgate_changelog}
  COMMAND gzip -9nc ${FLOODGATE_PACKAGING}/changelog > ${floodgate_changelog}
  DEPENDS ${FLOODGATE_PACKAGING}/changelog VERBATIM)
add_custom_target(floodgate_package_files DEPENDS ${floodgate_changelog})
add_dependencies(floodgate_man_pages floodgate_package_files)

install(FILES ${floodgate_package_out}/floodgated.service DESTINATION /lib/systemd/system
        COMPONENT runtime EXCLUDE_FROM_ALL)
install(FILES ${PROJECT_SOURCE_DIR}/examples/rules.yaml DESTINATION /etc/floodgate
        COMPONENT runtime EXCLUDE_FROM_ALL)
install(FILES ${FLOODGATE_PACKAGING}/default-floodgated DESTINATION /etc/default
        RENAME floodgated COMPONENT runtime EXCLUDE_FROM_ALL)
install(FILES ${PROJECT_SOURCE_DIR}/README.md ${PROJECT_SOURCE_DIR}/docs/operations.md
              ${PROJECT_SOURCE_DIR}/docs/service.md
        DESTINATION ${CMAKE_INSTALL_DATADIR}/doc/floodgate COMPONENT runtime EXCLUDE_FROM_ALL)
install(FILES ${PROJECT_SOURCE_DIR}/docs/library.md
        DESTINATION ${CMAKE_INSTALL_DATADIR}/doc/floodgate-dev COMPONENT dev EXCLUDE_FROM_ALL)
foreach(pair runtime:floodgate dev:floodgate-dev)
  string(REPLACE ":" ";" pair ${pair})
  list(GET pair 0 component)
  list(GET pair 1 package)
  install(FILES ${FLOODGATE_PACKAGING}/copyright ${floodgate_changelog}
          DESTINATION ${CMAKE_INSTALL_DATADIR}/doc/${package} COMPONENT ${component}
          EXCLUDE_FROM_ALL)
endforeach()

set(CPACK_GENERATOR DEB)
set(CPACK_PACKAGE_NAME floodgate)
set(CPACK_PACKAGE_VERSION ${PROJECT_VERSION})
set(CPACK_PACKAGE_VENDOR "the floodgate authors")
set(FLOODGATE_PACKAGE_MAINTAINER
    "floodgate maintainers <maintainers@users.noreply.a-seed-975cc758.example>"
    CACHE STRING "The Debian packages' Maintainer field")
set(CPACK_PACKAGE_CONTACT "${FLOODGATE_PACKAGE_MAINTAINER}")
# CPack puts this summary before every component's description when it is not its default;
# each package here has its own summary line instead.
set(CPACK_PACKAGE_DESCRIPTION_SUMMARY "${PROJECT_NAME} built using CMake")
set(CPACK_PACKAGING_INSTALL_PREFIX /usr)
set(CPACK_STRIP_FILES ON)
set(CPACK_PACKAGE_DIRECTORY ${PROJECT_BINARY_DIR}/deb)
set(CPACK_COMPONENTS_ALL runtime dev)
set(CPACK_DEB_COMPONENT_INSTALL ON)
set(CPACK_DEBIAN_FILE_NAME DEB-DEFAULT)
set(CPACK_DEBIAN_PACKAGE_PRIORITY optional)
set(CPACK_DEBIAN_PACKAGE_CONTROL_STRICT_PERMISSION ON)

set(CPACK_DEBIAN_RUNTIME_PACKAGE_NAME floodgate)
set(CPACK_DEBIAN_RUNTIME_PACKAGE_SECTION net)
# Depends: what dpkg-shlibdeps finds the programs need, plus the maintainer scripts' tools.
set(CPACK_DEBIAN_RUNTIME_PACKAGE_SHLIBDEPS ON)
set(CPACK_DEBIAN_RUNTIME_PACKAGE_DEPENDS "adduser")
set(CPACK_DEBIAN_RUNTIME_PACKAGE_SUGGESTS "redis-server")
set(CPACK_DEBIAN_RUNTIME_PACKAGE_CONTROL_EXTRA
    ${FLOODGATE_PACKAGING}/floodgate/postinst ${FLOODGATE_PACKAGING}/floodgate/prerm
    ${FLOODGATE_PACKAGING}/floodgate/postrm ${FLOODGATE_PACKAGING}/floodgate/conffiles)
set(CPACK_DEBIAN_RUNTIME_DESCRIPTION
"distributed rate limiter: service, CLI and load tool
floodgate decides whether a request may pass, for many servers sharing one
Redis (standalone, Cluster or Sentinel): every decision is one atomic Lua
script in Redis, with sliding log, sliding window, fixed window, token bucket
and GCRA. This package holds floodgated, the rate-limit service (HTTP/JSON,
nginx auth_request, Envoy's rate limit gRPC API), run by a hardened systemd
unit as the system user floodgate; floodgate, the operator's tool
(check-config, inspect, reset); and floodgate-bench, a load and accuracy tool.")

set(CPACK_DEBIAN_DEV_PACKAGE_NAME floodgate-dev)
set(CPACK_DEBIAN_DEV_PACKAGE_SECTION libdevel)
# The library is static: a program built with it links hiredis and OpenSSL itself
# (floodgate.pc's Requires.private, floodgate-config.cmake's find_dependency).
set(CPACK_DEBIAN_DEV_PACKAGE_DEPENDS "libhiredis-dev, libssl-dev, pkg-config")
set(CPACK_DEBIAN_DEV_PACKAGE_SUGGESTS "libboost-dev (>= 1.81)")
set(CPACK_DEBIAN_DEV_DESCRIPTION
"distributed rate limiter: C++20 library (development files)
libfloodgate is a rate limiter that C++ services embed: every decision is one
atomic Lua script in a shared Redis (standalone, Cluster or Sentinel), or in
process. This package holds the static library, its headers, a CMake package
(find_package(floodgate), floodgate::floodgate and floodgate::asio) and
pkg-config files (floodgate, floodgate-asio; floodgate/asio.hpp needs the Boost
headers).")

include(CPack)
