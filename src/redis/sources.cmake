# The Redis backend, the inspection API (floodgate/inspect.hpp) and floodgate/redis_call.hpp,
# included from src/CMakeLists.txt. The sources given FLOODGATE_ASIO_TU_OPTIONS below are the
# only ones that include Asio: keep it that way, each costs ~20 s to compile.
target_sources(floodgate PRIVATE
  redis/sha256.cpp
  redis/resp_reader.cpp
  redis/resp_writer.cpp
  redis/url.cpp
  redis/url_options.cpp
  redis/topology.cpp
  redis/key.cpp
  redis/batch.cpp
  redis/stream.cpp
  redis/connection.cpp
  redis/node.cpp
  redis/node_pool.cpp
  redis/client.cpp
  redis/cluster_protocol.cpp
  redis/sentinel_answer.cpp
  redis/cluster_client.cpp
  redis/sentinel_client.cpp
  redis/url_asker.cpp
  redis/inspector.cpp
  redis/inspect_text.cpp
  redis/redis_caller.cpp
  redis/redis_backend.cpp)
# GCC 12 reports -Wnull-dereference inside Asio's scheduler after inlining it into our code
# (a false positive the system-header rule cannot silence: it fires after inlining), and,
# under -fsanitize=thread, -Wtsan for the fences in Asio's handler recycling.
set_source_files_properties(redis/stream.cpp redis/connection.cpp redis/node.cpp
  redis/node_pool.cpp redis/client.cpp
  redis/cluster_client.cpp redis/sentinel_client.cpp redis/url_asker.cpp
  TARGET_DIRECTORY floodgate PROPERTIES
  COMPILE_OPTIONS "${FLOODGATE_ASIO_TU_OPTIONS}")
# hiredis (the reply parser) and OpenSSL (rediss://) are link dependencies of the static
# library for users of the installed package too, not only inside this build:
# floodgate-config.cmake finds them, floodgate.pc requires them.
find_package(OpenSSL REQUIRED)
target_link_libraries(floodgate PRIVATE PkgConfig::HIREDIS OpenSSL::SSL OpenSSL::Crypto)
