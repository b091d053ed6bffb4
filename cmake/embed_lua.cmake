# Embeds the Lua scripts of lua/ into a C++ source that implements src/redis/scripts.hpp,
# each with the SHA1 of exactly the embedded text (what Redis computes on SCRIPT LOAD), so
# EVALSHA can be sent before any SCRIPT LOAD.
#
# A script is assembled from parts, so each algorithm is written once:
#   per algorithm:  #!lua, prelude.lua, <algorithm>.lua, `local algorithm = '<name>'`, single.lua
#   multi:          #!lua, prelude.lua, every <algorithm>.lua, multi.lua
#   batch:          #!lua, prelude.lua, every <algorithm>.lua, batch.lua
#   multi_block:    #!lua, prelude.lua, every <algorithm>.lua, penalty.lua, multi_block.lua
#   refund:         #!lua, prelude.lua, every <algorithm>.lua, refund.lua
#   acquire, release: #!lua, prelude.lua, acquire.lua / release.lua (concurrency limits)
#   reserve:        #!lua, prelude.lua, every <algorithm>.lua, reserve.lua
#   give_back:      #!lua, prelude.lua, give_back.lua
# and all of them as one function library (below): the parts once, each entry a function.
# The `#!lua` shebang makes Redis 7 treat the script as declaring its keys (Redis Cluster then
# rejects any undeclared key), and refuse it as a whole under OOM rather than fail mid-write.
#
# Two ways in:
#   include(cmake/embed_lua.cmake) then floodgate_embed_lua(<target>): adds a build step that
#     generates lua_scripts.cpp (rerun whenever a .lua file or this file changes) to <target>.
#   cmake -DLUA_DIR=<dir> -DOUTPUT=<file.cpp> -P embed_lua.cmake: that build step.

set(FLOODGATE_LUA_ALGORITHMS sliding_log sliding_window fixed_window token_bucket gcra)
set(FLOODGATE_LUA_PARTS prelude ${FLOODGATE_LUA_ALGORITHMS} single multi batch penalty multi_block refund acquire release reserve give_back)

if(NOT CMAKE_SCRIPT_MODE_FILE)
  set(_floodgate_embed_lua_file ${CMAKE_CURRENT_LIST_FILE})

  function(floodgate_embed_lua target)
    set(lua_dir ${PROJECT_SOURCE_DIR}/lua)
    set(out ${CMAKE_CURRENT_BINARY_DIR}/generated/lua_scripts.cpp)
    set(inputs)
    foreach(part IN LISTS FLOODGATE_LUA_PARTS)
      list(APPEND inputs ${lua_dir}/${part}.lua)
    endforeach()
    add_custom_command(
      OUTPUT ${out}
      COMMAND ${CMAKE_COMMAND} -DLUA_DIR=${lua_dir} -DOUTPUT=${out} -P ${_floodgate_embed_lua_file}
      DEPENDS ${inputs} ${_floodgate_embed_lua_file}
      COMMENT "Embedding lua/*.lua and their SHA1s"
      VERBATIM)
    target_sources(${target} PRIVATE ${out})
  endfunction()
  return()
endif()

# ---- cmake -P: generate the source ----

if(NOT LUA_DIR OR NOT OUTPUT)
  message(FATAL_ERROR "embed_lua.cmake: pass -DLUA_DIR=<dir> -DOUTPUT=<file.cpp>")
endif()

foreach(part IN LISTS FLOODGATE_LUA_PARTS)
  file(READ ${LUA_DIR}/${part}.lua text)
  # The hash must be of the bytes the compiler puts in the literal: LF line ends only.
  string(REPLACE "\r\n" "\n" text "${text}")
  set(part_${part} "${text}")
endforeach()

set(delimiter "floodgate_lua")
set(entries "")

# Records script `name`: `text` is what SCRIPT LOAD / EVALSHA run (the parts it needs, then
# `entry`); `entry` alone becomes the body of the library function of the same name.
set(script_names "")
function(add_script name text entry)
  string(FIND "${text}" ")${delimiter}\"" clash)
  if(NOT clash EQUAL -1)
    message(FATAL_ERROR "embed_lua.cmake: script '${name}' contains ')${delimiter}\"'")
  endif()
  set(script_names ${script_names} ${name} PARENT_SCOPE)
  set(text_${name} "${text}" PARENT_SCOPE)
  set(entry_${name} "${entry}" PARENT_SCOPE)
endfunction()

foreach(algo IN LISTS FLOODGATE_LUA_ALGORITHMS)
  set(entry "local algorithm = '${algo}'\n${part_single}")
  add_script(${algo} "#!lua\n${part_prelude}\n${part_${algo}}\n${entry}" "${entry}")
endforeach()
set(all_algorithms "")
foreach(algo IN LISTS FLOODGATE_LUA_ALGORITHMS)
  string(APPEND all_algorithms "\n${part_${algo}}")
endforeach()
add_script(multi "#!lua\n${part_prelude}${all_algorithms}\n${part_multi}" "${part_multi}")
add_script(batch "#!lua\n${part_prelude}${all_algorithms}\n${part_batch}" "${part_batch}")
add_script(multi_block
           "#!lua\n${part_prelude}${all_algorithms}\n${part_penalty}\n${part_multi_block}"
           "${part_multi_block}")
add_script(refund "#!lua\n${part_prelude}${all_algorithms}\n${part_refund}" "${part_refund}")
add_script(acquire "#!lua\n${part_prelude}\n${part_acquire}" "${part_acquire}")
add_script(release "#!lua\n${part_prelude}\n${part_release}" "${part_release}")
add_script(reserve "#!lua\n${part_prelude}${all_algorithms}\n${part_reserve}" "${part_reserve}")
add_script(give_back "#!lua\n${part_prelude}\n${part_give_back}" "${part_give_back}")

# The same scripts as one function library (FUNCTION LOAD once, FCALL by name): the prelude, the
# algorithms and the penalty run once, when the library loads, where a script runs its whole
# text, defining every helper again, on every call. Named by a hash of every script, so two
# floodgate versions sharing a Redis load two libraries side by side (function names are
# global to a server: each carries the library's name too).
#
# A library's top level sees no globals (`string` is nil while it loads): the prelude's
# string-function locals are bound by each function on its first call instead.
set(all_texts "")
foreach(name IN LISTS script_names)
  string(APPEND all_texts "${text_${name}}")
endforeach()
string(SHA1 library_hash "${all_texts}")
string(SUBSTRING "${library_hash}" 0 12 library_hash)
set(library_name "floodgate_${library_hash}")
set(string_locals "local find, format, sub, byte = string.find, string.format, string.sub, string.byte")
string(FIND "${part_prelude}" "${string_locals}" at)
if(at EQUAL -1)
  message(FATAL_ERROR "embed_lua.cmake: prelude.lua no longer has the line\n  ${string_locals}\n"
                      "which the function library binds lazily: update this file")
endif()
string(REPLACE "${string_locals}" "local find, format, sub, byte" library_prelude "${part_prelude}")
set(library "#!lua name=${library_name}\n${library_prelude}${all_algorithms}\n${part_penalty}\n")
set(entries "")
foreach(name IN LISTS script_names)
  set(function_name "${library_name}_${name}")
  string(APPEND library "redis.register_function('${function_name}', function(KEYS, ARGV)\n"
         "if not find then find, format, sub, byte = string.find, string.format, string.sub, "
         "string.byte end\n${entry_${name}}\nend)\n")
  string(SHA1 sha1 "${text_${name}}")
  string(APPEND entries "    {\"${name}\"sv, R\"${delimiter}(${text_${name}})${delimiter}\"sv,\n"
         "     \"${sha1}\"sv, \"${function_name}\"sv},\n")
endforeach()

set(cases "")
set(index 0)
foreach(algo IN LISTS FLOODGATE_LUA_ALGORITHMS)
  string(APPEND cases "    case algorithm::${algo}: return scripts[${index}];\n")
  math(EXPR index "${index} + 1")
endforeach()

file(WRITE ${OUTPUT} "// Generated by cmake/embed_lua.cmake from lua/*.lua: do not edit.
#include <string_view>

#include \"redis/scripts.hpp\"

namespace floodgate::redis {
namespace {

using namespace std::string_view_literals;

// The algorithms in enum order, then multi, batch, multi_block, refund, acquire, release,
// reserve, give_back.
constexpr script scripts[] = {
${entries}};

constexpr function_library library{\"${library_name}\"sv, R\"${delimiter}(${library})${delimiter}\"sv};

}  // namespace

const script& script_for(algorithm a) noexcept {
  switch (a) {
${cases}  }
  return scripts[0];
}

const script& multi_script() noexcept { return scripts[${index}]; }
const script& batch_script() noexcept { return scripts[${index} + 1]; }
const script& multi_block_script() noexcept { return scripts[${index} + 2]; }
const script& refund_script() noexcept { return scripts[${index} + 3]; }
const script& acquire_script() noexcept { return scripts[${index} + 4]; }
const script& release_script() noexcept { return scripts[${index} + 5]; }
const script& reserve_script() noexcept { return scripts[${index} + 6]; }
const script& give_back_script() noexcept { return scripts[${index} + 7]; }
const function_library& script_library() noexcept { return library; }

}  // namespace floodgate::redis
")
