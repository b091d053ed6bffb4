-- Entry of the per-algorithm scripts; `algorithm` is set by the generator just above.
-- KEYS[1] = state key; ARGV = {limit, window_ms, burst, cost, now_ms ('' unless a test clock)}.
if #KEYS ~= 1 or #ARGV ~= 5 then
  return redis.error_reply('ERR floodgate: ' .. algorithm .. ' takes 1 key and 5 arguments ' ..
                           '(limit, window_ms, burst, cost, now_ms), got ' .. #KEYS .. ' and ' ..
                           #ARGV)
end
local now, err = read_now(ARGV[5])
if now == nil then return redis.error_reply(err) end
local p, cost = parse_item('', ARGV[1], ARGV[2], ARGV[3], ARGV[4])
if p == nil then return redis.error_reply(cost) end
local out, commit = algorithms[algorithm](KEYS[1], now, p, cost)
if commit then commit() end
return out
