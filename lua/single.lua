-- Entry of the per-algorithm scripts; `algorithm` is set by the generator just above.
-- KEYS[1] = state key; ARGV = {limit, window_ms, burst, cost, now_ms ('' unless a test clock)}.
if #KEYS ~= 1 or #ARGV ~= 5 then
  return redis.error_reply('ERR floodgate: ' .. algorithm .. ' takes 1 key and 5 arguments ' ..
                           '(limit, window_ms, burst, cost, now_ms), got ' .. #KEYS .. ' and ' ..
                           #ARGV)
end
local l, w, b, cost = parse_item(ARGV[1], ARGV[2], ARGV[3], ARGV[4])
if l == nil then return redis.error_reply(explain_item('', ARGV[1], ARGV[2], ARGV[3], ARGV[4])) end
local now, err = read_now(ARGV[5])
if now == nil then return redis.error_reply(err) end
local out = {0, 0, 0, 0, 0}
local value, ttl, failed = algorithms[algorithm](KEYS[1], now, l, w, b, cost, out, 0)
if failed then return failed end
if value then write(KEYS[1], value, ttl) end
expand(out, 0, b)
return out
