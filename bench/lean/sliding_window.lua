#!lua
-- The lean reference for sliding_window (bench/compare, bench/lua_cost): the least a batched
-- sliding-window script can do, to judge floodgate's batch script against in the same run. Not
-- used by floodgate. KEYS = the keys, one decision each at cost 1; ARGV = {limit, window_ms}.
-- State: the textbook's two counters, one key per window (<key>:<window index>, expiring two
-- windows after the window starts); the previous window's count weighs by the part of it
-- still inside the sliding window. An admission is counted with INCRBY first (its reply is
-- the new count) and taken back on a denial, so an admitted item costs one GET and one
-- INCRBY (and a PEXPIRE on a window's first hit). Returns one integer per key: the remaining
-- count, or -1 when denied.
local t = redis.call('TIME')
local now = t[1] * 1000 + (t[2] - t[2] % 1000) / 1000
local limit, window = tonumber(ARGV[1]), tonumber(ARGV[2])
local index = (now - now % window) / window
local weight = (window - now % window) / window  -- the previous window's share
local cur_suffix, prev_suffix = ':' .. index, ':' .. (index - 1)
local ttl = string.format('%d', 2 * window)
local out = {}
for i = 1, #KEYS do
  local key = KEYS[i]
  local prev = tonumber(redis.call('GET', key .. prev_suffix) or '0')
  local cur_key = key .. cur_suffix
  local count = redis.call('INCRBY', cur_key, '1')
  if count == 1 then redis.call('PEXPIRE', cur_key, ttl) end
  local used = count + prev * weight
  if used - (used % 1) <= limit then
    out[i] = limit - (used - used % 1)
  else
    redis.call('INCRBY', cur_key, '-1')
    out[i] = -1
  end
end
return out
