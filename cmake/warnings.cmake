# Warnings and sanitizers as INTERFACE targets: linked where wanted, never global flags.
add_library(floodgate_warnings INTERFACE)
target_compile_options(floodgate_warnings INTERFACE
  -Wall -Wextra -Wpedantic -Wshadow -Wnon-virtual-dtor -Wcast-align -Wunused
  -Woverloaded-virtual -Wnull-dereference -Wimplicit-fallthrough
  $<$<BOOL:${FLOODGATE_WERROR}>:-Werror>)

add_library(floodgate_sanitizers INTERFACE)
if(FLOODGATE_SANITIZE STREQUAL "address")
  target_compile_options(floodgate_sanitizers INTERFACE
    -fsanitize=address,undefined -fno-omit-frame-pointer -fno-sanitize-recover=undefined)
  target_link_options(floodgate_sanitizers INTERFACE -fsanitize=address,undefined)
elseif(FLOODGATE_SANITIZE STREQUAL "thread")
  target_compile_options(floodgate_sanitizers INTERFACE -fsanitize=thread -fno-omit-frame-pointer)
  target_link_options(floodgate_sanitizers INTERFACE -fsanitize=thread)
elseif(FLOODGATE_SANITIZE STREQUAL "undefined")
  # UBSan alone: scripts/fuzz's fast flavour (ASan's allocator dominates yaml-cpp's cost).
  target_compile_options(floodgate_sanitizers INTERFACE
    -fsanitize=undefined -fno-omit-frame-pointer -fno-sanitize-recover=undefined)
  target_link_options(floodgate_sanitizers INTERFACE -fsanitize=undefined)
elseif(NOT FLOODGATE_SANITIZE STREQUAL "")
  message(FATAL_ERROR "FLOODGATE_SANITIZE must be empty, 'address', 'undefined' or 'thread'")
endif()

# libFuzzer: coverage for everything the fuzz targets reach (tests/fuzz links -fsanitize=fuzzer).
if(FLOODGATE_FUZZ)
  if(NOT CMAKE_CXX_COMPILER_ID STREQUAL "Clang")
    message(FATAL_ERROR "FLOODGATE_FUZZ needs clang (scripts/fuzz sets CXX=clang++-14)")
  endif()
  target_compile_options(floodgate_sanitizers INTERFACE -fsanitize=fuzzer-no-link)
endif()

# For a source file that runs Asio's io_context: GCC 12 reports -Wnull-dereference inside Asio's
# scheduler after inlining it into our code (a false positive the system-header rule cannot
# silence), and, under -fsanitize=thread, -Wtsan for the fences in Asio's handler recycling.
#   set_source_files_properties(x.cpp PROPERTIES COMPILE_OPTIONS "${FLOODGATE_ASIO_TU_OPTIONS}")
set(FLOODGATE_ASIO_TU_OPTIONS "-Wno-null-dereference;$<$<CXX_COMPILER_ID:GNU>:-Wno-tsan>")
