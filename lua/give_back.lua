-- Entry of the give-back script (docs/algorithms.md, "Reservations"; src/core/give_back.hpp):
-- returns units of a reservation its process did not spend, to the window the reservation
-- named (reserve.lua answers it), and only while that window is current: fixed_window's count,
-- or sliding_window's current count, drops by at most the units (never below 0). Other
-- windows get nothing back, so units of an old window never become capacity in a new one.
-- KEYS[1] = state key, KEYS[2] = the give-back's marker (in the state key's hash slot);
-- ARGV = {algorithm, window_ms, window, units, now_ms}. The marker is set with SET NX PX until
-- the window ends, and keeps what was given: a give-back sent twice counts once.
-- Answers two integers: the units given back (a replay: the first one's) and 1 if a replay.
if #KEYS ~= 2 or #ARGV ~= 5 then
  return redis.error_reply('ERR floodgate: give_back takes 2 keys and 5 arguments (algorithm, ' ..
                           'window_ms, window, units, now_ms), got ' .. #KEYS .. ' and ' .. #ARGV)
end
local algorithm = ARGV[1]
if algorithm ~= 'fixed_window' and algorithm ~= 'sliding_window' then
  return redis.error_reply("ERR floodgate: give_back takes fixed_window or sliding_window (got '" ..
                           sub((string.gsub(algorithm, '[^%w_]', '?')), 1, 32) .. "')")
end
for i = 2, 4 do
  if #ARGV[i] > 16 or not find(ARGV[i], '^%d+$') or ARGV[i] + 0 > max_value then
    return redis.error_reply('ERR floodgate: give_back\'s window_ms, window and units must be ' ..
                             "integers in 0..1e15 (got '" .. sub(ARGV[i], 1, 20) .. "')")
  end
end
local w, window, units = ARGV[2] + 0, ARGV[3] + 0, ARGV[4] + 0
if w < 1 or units < 1 then
  return redis.error_reply('ERR floodgate: give_back\'s window_ms and units must be at least 1')
end
local now, err = read_now(ARGV[5])
if now == nil then return redis.error_reply(err) end
local ends = window * w + w - now
-- Past its window (or not yet in it): nothing comes back, and there is nothing to remember.
if floor_div(now, w) ~= window then return {0, 0} end
if not redis.call('SET', KEYS[2], '0', 'NX', 'PX', str(ends)) then
  return {tonumber(redis.call('GET', KEYS[2])) or 0, 1}
end
local v = redis.pcall('GET', KEYS[1])
if type(v) == 'table' then return v end  -- WRONGTYPE: Redis's own words
local given = 0
if v then
  if algorithm == 'fixed_window' then
    local si, q = unpack2(v)
    if si == window then
      given = units < q and units or q
      redis.call('SET', KEYS[1], pack(si, q - given), 'KEEPTTL')
    end
  else
    local si, p, c = unpack3(v)
    if si == window then
      given = units < c and units or c
      redis.call('SET', KEYS[1], pack(si, p, c - given), 'KEEPTTL')
    end
  end
end
if given > 0 then redis.call('SET', KEYS[2], str(given), 'XX', 'KEEPTTL') end
return {given, 0}
