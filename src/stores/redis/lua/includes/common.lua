-- Shared helpers for every algorithm include.
local ABSENT = {}
-- A stored state's recorded expiry: one '<d' after its fields (see flushState).
local EXPIRY_BYTES = 8
-- The most keys one call reads with MGET (see prefetch).
local MAX_PREFETCH_KEYS = 1000
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

-- What one call has read and written, by key. Reset at the start of every call (a
-- function library keeps upvalues between calls); `touched` says whether there is
-- anything to reset, so a lone check makes no tables.
--
-- Writes are held and sent once at the call's end (flushStates): a key decided several
-- times in one call (a hot key's coalesced checks) costs one read and one write, not a
-- pair per decision. Reads see the call's own writes first.
local prefetched = {}   -- key -> its value as the call's MGET read it (false: none, or not a string)
local written = {}      -- key -> packed state written during this call, not sent yet
local writtenTtl = {}   -- key -> the TTL that write asks for, in ms
local writtenOrder = {} -- keys, in the order first written
local writtenCount = 0
local expiryOf = {}     -- key -> the expiry its stored state records (false: none recorded)
local touched = false

local function resetCall()
  if touched then
    prefetched, written, writtenTtl, writtenOrder, expiryOf = {}, {}, {}, {}, {}
    writtenCount = 0
    touched = false
  end
end

-- Reads the string values of `keys` in one MGET (one command for the whole call, where a
-- GET each cost Redis a command dispatch per decision). Bounded: `unpack` has a limit.
local function prefetch(keys)
  local n = #keys
  if n < 2 or n > MAX_PREFETCH_KEYS then return end
  local values = redis.call('MGET', unpack(keys))
  touched = true
  for i = 1, n do prefetched[keys[i]] = values[i] end
end

-- Writes `key`'s pending state to Redis, with its expiry recorded after the packed fields
-- ('<d', server ms). Setting an expiry costs Redis more than the write itself, so a key
-- whose recorded expiry already covers the TTL asked for keeps it (KEEPTTL); else it gets
-- the TTL, or twice it when its recorded expiry fell short (a key written again and
-- again: room for the writes to come). The
-- recorded expiry is 1 ms short of the real one (Redis counts from its own later,
-- whole-ms clock), so a key never expires before its state's TTL.
local function flushState(key)
  local w = written[key]
  if w == nil then return end
  local need = math.max(1, math.ceil(writtenTtl[key]))
  local now = serverNowMs()
  local known = expiryOf[key]
  local value
  if known and known >= now + need then
    value = w .. struct.pack('<d', known)
    redis.call('SET', key, value, 'KEEPTTL')
  else
    local px = need
    if known then px = 2 * need end
    local expiry = now + px - 1
    value = w .. struct.pack('<d', expiry)
    redis.call('SET', key, value, 'PX', px)
    expiryOf[key] = expiry
  end
  written[key] = nil
  prefetched[key] = value
end

-- Sends every pending state, in the order first written.
local function flushStates()
  for i = 1, writtenCount do
    flushState(writtenOrder[i])
  end
end

-- Reads a string-valued key. Returns (value or nil, ok); ok is false when the key holds
-- another type, so a foreign key is reported instead of overwritten.
local function getString(key)
  local pending = written[key]
  if pending ~= nil then return pending, true end
  local p = prefetched[key]
  if p then return p, true end
  -- (MGET reads another type as none: GET tells the two apart)
  local v = redis.pcall('GET', key)
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
  return x == x and x ~= math.huge and x ~= -math.huge
end

-- Reads the packed state of algorithm `code`, `count` doubles, as scalars (no table).
-- Returns (ok, present, a, b, c); ok is false when the key holds another type or a string
-- that is not Sluice state, so a foreign value is reported, not overwritten. The state of
-- another algorithm (the policy's algorithm was changed) holds no units of this one: it
-- reads as absent, and the next write replaces it.
local function loadPacked(key, code, count)
  local v = written[key]
  local stored = v == nil
  if stored then
    local ok
    v, ok = getString(key)
    if not ok then return false end
    if v == nil then return true, false end
  end
  local tag = string.byte(v, 1)
  -- (the sliding log, keeps a sorted set: a string with it is foreign)
  if tag ~= code then return tag ~= nil and ALG[tag] ~= nil and tag ~= CODE_SLIDING_LOG, false end
  local size = 1 + 8 * count
  if stored then
    -- the recorded expiry follows the fields (flushState); a state without one is older
    local len = #v
    if len == size + EXPIRY_BYTES then
      local e = struct.unpack('<d', v, size + 1)
      if not finite(e) then return false end
      expiryOf[key] = e
    elseif len == size then
      expiryOf[key] = false
    else
      return false
    end
    touched = true
  elseif #v ~= size then
    return false
  end
  local _, a, b, c = struct.unpack(STATE_FORMAT[count], v)
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
-- the call: see flushState).
local function setState(key, packed, ttlMs)
  if written[key] == nil then
    writtenCount = writtenCount + 1
    writtenOrder[writtenCount] = key
  end
  written[key] = packed
  writtenTtl[key] = ttlMs
  touched = true
end

-- waitUntil() of src/algorithms/algorithm.ts: a wait w with now + w >= target in doubles.
local function waitUntil(now, target)
  local w = target - now
  local step = 4 * math.max(1, math.abs(target), math.abs(now)) * DBL_EPSILON
  while now + w < target do w = w + step end
  return w
end
