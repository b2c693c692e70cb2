-- Shared helpers for every algorithm include.
local ABSENT = {}
-- The same constants as src/algorithms/algorithm.ts and Number.EPSILON.
local FIT_EPSILON = 1e-9
local DBL_EPSILON = 2 ^ -52

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

-- Splits "a b c" into numbers; nil when the text is not exactly `count` numbers.
local function numbers(text, count)
  local out = {}
  for part in string.gmatch(text, '%S+') do
    local x = tonumber(part)
    -- x ~= x is NaN; inf and nan are not states Sluice writes
    if x == nil or x ~= x or x == math.huge or x == -math.huge then return nil end
    out[#out + 1] = x
  end
  if #out ~= count then return nil end
  return out
end

-- Loads a state string of space-separated numbers into a table with the given field
-- names, in order. Returns (state or nil when absent, ok); ok is false when the key
-- holds another type or a string that is not exactly that many finite numbers.
local function loadNumbers(key, fields)
  local v, ok = getString(key)
  if not ok then return nil, false end
  if v == nil then return nil, true end
  local x = numbers(v, #fields)
  if x == nil then return nil, false end
  local state = {}
  for i = 1, #fields do state[fields[i]] = x[i] end
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
