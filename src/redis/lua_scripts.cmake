# The Lua scripts of lua/, embedded with their SHA1s at build time: the definitions of
# src/redis/scripts.hpp (see cmake/embed_lua.cmake).
include(${PROJECT_SOURCE_DIR}/cmake/embed_lua.cmake)
floodgate_embed_lua(floodgate)
