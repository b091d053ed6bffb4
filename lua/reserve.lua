-- Entry of the reserve script (issue 27, src/core/reserve.hpp): takes up to `wanted` units of a
-- key's quota at once, min(wanted, what is left now) (0 is a valid grant), recorded exactly as
-- one admitted request of that cost, so an instance may spend the grant without asking again.
-- Unspent units go back through give_back.lua, naming the window answered here.
--
-- KEYS[1] = state key; ARGV = {algorithm, limit, window_ms, burst, wanted, now_ms}.
-- Answers seven integers: granted; the window the grant was recorded in (floor(now / W)) and
-- the ms until it ends, by when the grant must be spent (fixed_window and sliding_window; the
-- others answer 0 and their spend span: floor(B × W / (10 × L)) for token_bucket and gcra,
-- floor(W / 10) for sliding_log, at least 1, which records the grant as admitted then); then
-- the limit, remaining, reset_after and retry_after of the key after the grant (retry_after:
-- until one more unit is left, 0 while some are, -1: never). As src/core/reserve.cpp.
if #KEYS ~= 1 or #ARGV ~= 6 then
  return redis.error_reply('ERR floodgate: reserve takes 1 key and 6 arguments (algorithm, ' ..
                           'limit, window_ms, burst, wanted, now_ms), got ' .. #KEYS .. ' and ' ..
                           #ARGV)
end
local decide = algorithms[ARGV[1]]
if decide == nil then return redis.error_reply(explain_item('algorithm', '', ARGV[1])) end
local l, w, b, wanted = parse_item(ARGV[2], ARGV[3], ARGV[4], ARGV[5])
if l == nil then return redis.error_reply(explain_item('', ARGV[2], ARGV[3], ARGV[4], ARGV[5])) end
local now, err = read_now(ARGV[6])
if now == nil then return redis.error_reply(err) end
local key = KEYS[1]
-- What is left: a peek's remaining, the most one request is admitted now.
local out = {0, 0, 0, 0, 0}
local _, _, failed = decide(key, now, l, w, b, 0, out, 0)
if failed then return failed end
local grant = wanted
if out[1] < grant then grant = out[1] end
local windowed = ARGV[1] == 'fixed_window' or ARGV[1] == 'sliding_window'
local window, spend_within = 0, 0
if windowed then
  window = floor_div(now, w)
  spend_within = window * w + w - now
else
  spend_within = ARGV[1] == 'sliding_log' and floor_div(w, 10) or floor_div(b * w, 10 * l)
  if spend_within < 1 then spend_within = 1 end
end
if grant > 0 then
  local value, ttl
  -- sliding_log counts the grant from the end of its spend span (the others take no `late`).
  value, ttl, failed = decide(key, now, l, w, b, grant, out, 0,
                              ARGV[1] == 'sliding_log' and spend_within or nil)
  if failed then return failed end
  if out[1] < 0 then
    grant = 0  -- (not reached: remaining is admitted by definition)
  elseif value then
    write(key, value, ttl)
  end
end
-- The key after the grant; with nothing left, when one more unit will be (a check of 1,
-- denied, says).
out = {0, 0, 0, 0, 0}
_, _, failed = decide(key, now, l, w, b, 0, out, 0)
if failed then return failed end
if out[1] == 0 then
  out = {0, 0, 0, 0, 0}
  _, _, failed = decide(key, now, l, w, b, 1, out, 0)
  if failed then return failed end
end
expand(out, 0, b)
return {grant, window, spend_within, out[2], out[3], out[4], out[5]}
