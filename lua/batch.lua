-- Entry of the batch script: many independent checks in one call (docs/algorithms.md,
-- "Batches"). The client sends the checks queued on one connection this way, so Redis pays
-- the per-call cost (EVALSHA, TIME) once for all of them.
-- KEYS[1..n]; ARGV = {now_ms, then per item: algorithm, limit, window_ms, burst, cost}.
-- Items are decided and written one after another at the same now, exactly as n calls of
-- the per-algorithm scripts in that order would be: an item sees what earlier items on its
-- key wrote. Returns five values per item: its decision's five integers, or, for an item
-- whose arguments are refused, the error followed by four zeros (the others still count).
local n = #KEYS
if n < 1 or #ARGV ~= 1 + 5 * n then
  return redis.error_reply('ERR floodgate: batch takes n >= 1 keys and 1 + 5n arguments, got ' ..
                           n .. ' and ' .. #ARGV)
end
local now, err = read_now(ARGV[1])
if now == nil then return redis.error_reply(err) end
local out = {}
for i = 1, n do
  local at, base = 5 * i - 4, 5 * i - 5
  local decide = algorithms[ARGV[at + 1]]
  local l, w, b, cost = parse_item(ARGV[at + 2], ARGV[at + 3], ARGV[at + 4], ARGV[at + 5])
  if decide == nil or l == nil then
    local message
    if decide == nil then
      message = explain_item('algorithm', 'item ' .. i .. ' ', ARGV[at + 1])
    else
      message = explain_item('item ' .. i .. ' ', ARGV[at + 2], ARGV[at + 3], ARGV[at + 4],
                             ARGV[at + 5])
    end
    out[base + 1], out[base + 2], out[base + 3], out[base + 4], out[base + 5] =
        redis.error_reply(message), 0, 0, 0, 0
  else
    -- Written at once, so a later item on the same key sees it.
    local value, ttl = decide(KEYS[i], now, l, w, b, cost, out, base)
    if value then write(KEYS[i], value, ttl) end
  end
end
return out
