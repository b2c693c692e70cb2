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

-- Loads a state string of whitespace-separated numbers into a table with the given field
-- names, in order. Returns (state or nil when absent, ok); ok is false when the key
-- holds another type or a string that is not exactly that many finite numbers. Parsed
-- in place, one table per load: table allocations dominate a decision's cost in Redis.
local function loadNumbers(key, fields)
  local v, ok = getString(key)
  if not ok then return nil, false end
  if v == nil then return nil, true end
  local count = #fields
  local state, n, pos = {}, 0, 1
  while true do
    local first, last = string.find(v, '%S+', pos)
    if first == nil then break end
    n = n + 1
    if n > count then return nil, false end
    local x = tonumber(string.sub(v, first, last))
    -- x ~= x is NaN; inf and nan are not states Sluice writes
    if x == nil or x ~= x or x == math.huge or x == -math.huge then return nil, false end
    state[fields[n]] = x
    pos = last + 1
  end
  if n ~= count then return nil, false end
  return state, true
end

-- Writes a state string that expires when the bucket is as good as fresh.
local function setState(key, text, ttlMs)
  redis.call('SET', key, text, 'PX', math.max(1, math.ceil(ttlMs)))
end

-- waitUntil() of src/algorithms/algorithm.ts: a wait w with now + w >= target in doubles.
local function waitUntil(now, target)
  local w = target - now
  local step = 4 * math.max(1, math.abs(target), math.abs(now)) * DBL_EPSILON
  while now + w < target do w = w + step end
  return w
end
