-- Entry of the batch script: many independent checks in one call (docs/algorithms.md,
-- "Batches"). The client sends the checks queued on one connection this way, so Redis pays
-- the per-call cost (EVALSHA, TIME) once for all of them.
-- KEYS[1..n]; ARGV = {now_ms, then per item: algorithm, limit, window_ms, burst, cost}.
-- Items are decided and written one after another at the same now, exactly as n calls of
-- the per-algorithm scripts in that order would be: an item sees what earlier items on its
-- key wrote. Returns five values per item: its decision's five integers, or, for an item
-- whose arguments are refused or whose key holds another type, the error followed by four
-- zeros (the others still count).
local n = #KEYS
if n < 1 or #ARGV ~= 1 + 5 * n then
  return redis.error_reply('ERR floodgate: batch takes n >= 1 keys and 1 + 5n arguments, got ' ..
                           n .. ' and ' .. #ARGV)
end
local now, err = read_now(ARGV[1])
if now == nil then return redis.error_reply(err) end
local out = {}
-- Items of one policy usually come together: an item whose five argument strings are the
-- previous item's (Lua interns strings, so == compares pointers) reuses its parsed values.
local pa, pl, pw, pb, pc, decide, l, w, b, cost
for i = 1, n do
  local at, base = 5 * i - 4, 5 * i - 5
  local a1, a2, a3, a4, a5 = ARGV[at + 1], ARGV[at + 2], ARGV[at + 3], ARGV[at + 4], ARGV[at + 5]
  if a1 ~= pa or a2 ~= pl or a3 ~= pw or a4 ~= pb or a5 ~= pc then
    decide = algorithms[a1]
    l, w, b, cost = parse_item(a2, a3, a4, a5)
    if decide ~= nil and l ~= nil then
      pa, pl, pw, pb, pc = a1, a2, a3, a4, a5
    else
      pa = nil
    end
  end
  if decide == nil or l == nil then
    local message
    if decide == nil then
      message = explain_item('algorithm', 'item ' .. i .. ' ', a1)
    else
      message = explain_item('item ' .. i .. ' ', a2, a3, a4, a5)
    end
    out[base + 1], out[base + 2], out[base + 3], out[base + 4], out[base + 5] =
        redis.error_reply(message), 0, 0, 0, 0
  else
    -- Written at once, so a later item on the same key sees it. An error (a key of another
    -- type: WRONGTYPE) is the item's own: the items before it have written, so the call must
    -- go on rather than fail them all.
    local ok, value, ttl = pcall(decide, KEYS[i], now, l, w, b, cost, out, base)
    if ok and value then ok, value = pcall(write, KEYS[i], value, ttl) end
    if not ok then
      local message = type(value) == 'table' and value.err or tostring(value)
      out[base + 1], out[base + 2], out[base + 3], out[base + 4], out[base + 5] =
          redis.error_reply(message), 0, 0, 0, 0
    end
  end
end
return out
