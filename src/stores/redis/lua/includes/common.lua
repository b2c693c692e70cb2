-- Shared helpers for every algorithm include.
local ABSENT = {}

-- Library functions as upvalues: each use of a global is a table lookup, of an upvalue
-- an index. Bound by the first call (bindApi), since `struct` and `redis.call` do not
-- exist yet while a function library loads; they stay bound while the library does.
local max, min, abs, floor, ceil, huge
local band, concat, sbyte, spack, sunpack, rcall, rpcall
local function bindApi()
  if rcall ~= nil then return end
  max, min, abs, floor, ceil, huge = math.max, math.min, math.abs, math.floor, math.ceil, math.huge
  band, concat, sbyte = bit.band, table.concat, string.byte
  spack, sunpack, rcall, rpcall = struct.pack, struct.unpack, redis.call, redis.pcall
end
-- The same constants as src/algorithms/algorithm.ts and Number.EPSILON.
local FIT_EPSILON = 1e-9
local DBL_EPSILON = 2 ^ -52

-- Redis TIME in ms, read once per script call: every batch of one call decides at the
-- same instant, and TIME is not paid per batch.
local cachedServerNow
local function serverNowMs()
  if cachedServerNow == nil then
    local t = rcall('TIME')
    cachedServerNow = tonumber(t[1]) * 1000 + tonumber(t[2]) / 1000
  end
  return cachedServerNow
end

-- %.17g round-trips every double, so no fraction is lost on the way to the client.
local function fmt(x)
  return string.format('%.17g', x)
end

-- A cost-0 read of each of the n items' buckets at now, written into reply as refundBatch
-- and settleBatch answer: REFUND_REPLY_FIELDS per item (status, remaining, retry, reset,
-- delay or '').
local function readBack(items, n, now, reply)
  for i = 1, n do
    local it = items[i]
    local s = it.alg.load(it.key)
    local _, status, remaining, retry, reset, delay = it.alg.step(s, now, 0, it.p1, it.p2, it.p3, it.p4)
    local j = (i - 1) * REFUND_REPLY_FIELDS
    reply[j + 1] = status
    reply[j + 2] = fmt(remaining)
    reply[j + 3] = fmt(retry)
    reply[j + 4] = fmt(reset)
    reply[j + 5] = delay == nil and '' or fmt(delay)
  end
end

-- States written during this call, by key, sent to Redis once at its end (flushStates):
-- a key decided several times in one call (a hot key's coalesced checks) costs one GET and
-- one SET, not a pair per decision. Reads see the call's own writes first. Reset at the
-- start of every call (resetStates): a function library keeps upvalues between calls.
local written = {}      -- key -> packed state
local writtenTtl = {}   -- key -> its TTL in ms
local writtenOrder = {} -- keys, in the order first written
local writtenCount = 0

-- Empties the tables in place: a new table a call costs an allocation and its growth.
local function resetStates()
  for i = 1, writtenCount do
    local key = writtenOrder[i]
    written[key] = nil
    writtenTtl[key] = nil
    writtenOrder[i] = nil
  end
  writtenCount = 0
end

-- The last TTL written and, once it has come twice in a row, its text. A number argument
-- of redis.call is formatted anew each time; most policies write one TTL over and over
-- (a token bucket's is its refill time), so its text is kept. Kept between the calls of a
-- function library.
local lastTtl, lastTtlText

-- Sends `key`'s pending state now (before a command that reads the key in Redis itself).
local function flushState(key)
  local w = written[key]
  if w == nil then return end
  local px = max(1, ceil(writtenTtl[key]))
  if px == lastTtl and px < 1e14 then
    -- (below 1e14, tostring writes an integer as digits only, as PX needs)
    if lastTtlText == nil then lastTtlText = tostring(px) end
    rcall('SET', key, w, 'PX', lastTtlText)
  else
    lastTtl, lastTtlText = px, nil
    rcall('SET', key, w, 'PX', px)
  end
  written[key] = nil
end

-- Sends every pending state, in the order first written.
local function flushStates()
  for i = 1, writtenCount do
    flushState(writtenOrder[i])
  end
  resetStates()
end

-- Reads a string-valued key. Returns (value or nil, ok); ok is false when the key holds
-- another type, so a foreign key is reported instead of overwritten.
local function getString(key)
  local pending = written[key]
  if pending ~= nil then return pending, true end
  local v = rpcall('GET', key)
  if type(v) == 'table' and v.err then return nil, false end
  if v == false then return nil, true end
  return v, true
end

-- States are packed: the algorithm's code (ALG[code]) as a byte, then little-endian
-- doubles, one per field. Exact, 8 bytes a number (a bucket fits a smaller allocation),
-- and no text to format or parse. The code byte tells Sluice state from a foreign value.

local STATE_FORMAT = { '<Bd', '<Bdd', '<Bddd' }

-- x ~= x is NaN; inf and nan are not states Sluice writes
local function finite(x)
  return x == x and x ~= huge and x ~= -huge
end

-- Reads the packed state of algorithm `code`, `count` doubles, as scalars (no table).
-- Returns (ok, present, a, b, c); ok is false when the key holds another type or a string
-- that is not Sluice state, so a foreign value is reported, not overwritten. The state of
-- another algorithm (the policy's algorithm was changed) holds no units of this one: it
-- reads as absent, and the next write replaces it.
local function loadPacked(key, code, count)
  local v, ok = getString(key)
  if not ok then return false end
  if v == nil then return true, false end
  local tag = sbyte(v, 1)
  -- (the sliding log, keeps a sorted set: a string with it is foreign)
  if tag ~= code then return tag ~= nil and ALG[tag] ~= nil and tag ~= CODE_SLIDING_LOG, false end
  if #v ~= 1 + 8 * count then return false end
  local _, a, b, c = sunpack(STATE_FORMAT[count], v)
  if count == 1 then return finite(a), true, a end
  if not (finite(a) and finite(b) and (count == 2 or finite(c))) then return false end
  return true, true, a, b, c
end

-- The same state as a table with the given field names, in order: (state or nil when
-- absent, ok).
local function loadNumbers(key, fields, code)
  local ok, present, a, b, c = loadPacked(key, code, #fields)
  if not ok then return nil, false end
  if not present then return nil, true end
  local state = { [fields[1]] = a }
  if fields[2] then state[fields[2]] = b end
  if fields[3] then state[fields[3]] = c end
  return state, true
end

-- Writes a packed state that expires when the bucket is as good as fresh (at the end of
-- the call: see `written`).
local function setState(key, packed, ttlMs)
  if written[key] == nil then
    writtenCount = writtenCount + 1
    writtenOrder[writtenCount] = key
  end
  written[key] = packed
  writtenTtl[key] = ttlMs
end

-- waitUntil() of src/algorithms/algorithm.ts: a wait w with now + w >= target in doubles.
local function waitUntil(now, target)
  local w = target - now
  local step = 4 * max(1, abs(target), abs(now)) * DBL_EPSILON
  while now + w < target do w = w + step end
  return w
end
