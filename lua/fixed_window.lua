-- fixed_window (docs/algorithms.md): pack(window index floor(now / W), count).
--
-- An admission inside the window whose count keeps its number of digits adds to the packed
-- value in place: pack(i, q + c) is pack(i, q) + 10c there, so INCRBY does it and keeps the
-- key's expiry (the end of that window), where a SET ... PX costs Redis about three times as
-- much. The first admission of a window, and one that adds a digit, write with SET.
local function fixed_window(key, now, l, w, b, cost, out, at)
  local i = (now - now % w) / w  -- floor(now / W): exact, see floor_div
  local until_next = i * w + w - now
  local q, p = 0, 0  -- the count, and 10^digits(count) when INCRBY may add to it
  local s = redis.pcall('GET', key)
  if s then
    local v = tonumber(s)
    if v and v >= 0 and v + 10 * cost < two53 then  -- unpack2 inline: the digits' value is exact
      local d = v % 10
      local m = (v - d) / 10
      p = 1
      for _ = 1, d do p = p * 10 end
      local c = m % p
      if (m - c) / p == i then q = c end  -- (else q stays 0, and nothing is added in place)
    elseif type(s) == 'table' then
      return nil, nil, s  -- WRONGTYPE: the item's own error
    else
      local si, c = unpack2(s)
      if si == i then q = c end
    end
  end
  local reset = 0
  if q > 0 then reset = until_next end
  if cost > l then return put(out, at, false, l - q, reset, -1) end
  if cost > 0 and q + cost > l then  -- a peek is never denied
    return put(out, at, false, l - q, reset, until_next)
  end
  if cost == 0 then return put(out, at, true, l - q, reset, 0) end
  q = q + cost
  out[at + 1], out[at + 2] = l - q, until_next  -- put(out, at, true, ...) inline
  if q < p and q > cost and i > 0 then  -- (i > 0: no leading zero, which INCRBY refuses)
    return cost == 1 and '10' or format('%d', 10 * cost), -1  -- write(): INCRBY
  end
  return pack(i, q), until_next
end
algorithms.fixed_window = fixed_window
