-- Shared helpers for every algorithm include.
local ABSENT = {}
-- The same constants as src/algorithms/algorithm.ts and Number.EPSILON.
local FIT_EPSILON = 1e-9
local DBL_EPSILON = 2 ^ -52

-- Redis TIME in ms, read once per script call: every batch of one call decides at the
-- same instant, and TIME is not paid per batch.
local cachedServerNow
local function serverNowMs()
  if cachedServerNow == nil then
    local t = redis.call('TIME')
    cachedServerNow = tonumber(t[1]) * 1000 + tonumber(t[2]) / 1000
  end
  return cachedServerNow
end

-- %.17g round-trips every double, so no fraction is lost on the way to the client.
local function fmt(x)
  return string.format('%.17g', x)
end

-- Reads a string-valued key. Returns (value or nil, ok); ok is false when the key holds
-- another type, so a foreign key is reported instead of overwritten.
local function getString(key)
  local v = redis.pcall('GET', key)
  if type(v) == 'table' and v.err then return nil, false end
  if v == false then return nil, true end
  return v, true
end

-- States are packed: the algorithm's code (ALG[code]) as a byte, then little-endian
-- doubles, one per field. Exact, 8 bytes a number (a bucket fits a smaller allocation),
-- and no text to format or parse. The code byte tells Sluice state from a foreign value.

-- Loads the state of algorithm `code` into a table with the given field names, in order.
-- Returns (state or nil when absent, ok); ok is false when the key holds another type or
-- a string that is not Sluice state, so a foreign value is reported, not overwritten. The
-- state of another algorithm (the policy's algorithm was changed) holds no units of this
-- one: it reads as absent, and the next write replaces it.
local function loadNumbers(key, fields, code)
  local v, ok = getString(key)
  if not ok then return nil, false end
  if v == nil then return nil, true end
  local tag = string.byte(v, 1)
  if tag ~= code then
    if tag ~= nil and ALG[tag] ~= nil and tag ~= 6 then return nil, true end
    return nil, false
  end
  local count = #fields
  if #v ~= 1 + 8 * count then return nil, false end
  local state, pos, x = {}, 2, 0
  for i = 1, count do
    x, pos = struct.unpack('<d', v, pos)
    -- x ~= x is NaN; inf and nan are not states Sluice writes
    if x ~= x or x == math.huge or x == -math.huge then return nil, false end
    state[fields[i]] = x
  end
  return state, true
end

-- Writes a packed state that expires when the bucket is as good as fresh.
local function setState(key, packed, ttlMs)
  redis.call('SET', key, packed, 'PX', math.max(1, math.ceil(ttlMs)))
end

-- waitUntil() of src/algorithms/algorithm.ts: a wait w with now + w >= target in doubles.
local function waitUntil(now, target)
  local w = target - now
  local step = 4 * math.max(1, math.abs(target), math.abs(now)) * DBL_EPSILON
  while now + w < target do w = w + step end
  return w
end
