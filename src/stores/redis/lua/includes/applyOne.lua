-- One batch, all-or-nothing (decideBatch() in src/stores/batch.ts). Its n items are
-- KEYS[ko + 1 .. ko + n] and n packed items in `blob` from `pos` ('<BddddddB':
-- algorithm code, ttlMs, p1..p4, cost, enforce), unpacked in place (a table per item
-- costs more than the rest of the step). `dedup` is the request id's key, if any.
--
-- Returns (reply, next pos): the batch's reply framed as '<BI4' tag and body length, then
-- the body. Tag 0: body is per item struct '<Bdddd' (status 0 OK / 1 OVER_LIMIT /
-- 2 INVALID_POLICY, remaining, retryAfterMs, resetAfterMs, delayMs or NaN when absent),
-- then '<d' the now the batch was decided at (what refundBatch.lua needs to find the
-- window or log entry of this consumption): doubles travel exactly. Tag 1: the item's key
-- holds something that is not Sluice state; body '<I4' the 1-based item.
local NAN = 0 / 0

-- A one-item batch's whole framed reply in one pack: each string made in Lua is hashed
-- and interned, so fewer, larger strings cost Redis less.
local ONE_REPLY = '<BI4Bddddd'

local function packItem(status, remaining, retry, reset, delay)
  if delay == nil then delay = NAN end
  return spack(ITEM, status, remaining, retry, reset, delay)
end

local function framed(body)
  return spack('<BI4', TAG_DECISIONS, #body) .. body
end

-- Tag 1 for item i, and the position after the batch's items, where the next batch starts.
local function corrupt(i, first, n)
  return spack('<BI4I4', TAG_NOT_SLUICE_STATE, 4, i), first + n * ITEM_IN_BYTES
end

local function applyOne(KEYS, ko, blob, pos, n, now, dedup, dedupTtl)
  local first = pos
  if n == 1 and not dedup then
    -- One policy, no request id: the common check, without the batch bookkeeping.
    local code, ttl, p1, p2, p3, p4, cost, _
    code, ttl, p1, p2, p3, p4, cost, _, pos = sunpack(ITEM_IN, blob, pos)
    local alg = ALG[code]
    local key = KEYS[ko + 1]
    if alg.decide then
      local ok, status, remaining, retry, reset = alg.decide(key, now, cost, ttl, p1, p2, p3)
      if not ok then return corrupt(1, first, n) end
      return spack(ONE_REPLY, TAG_DECISIONS, ONE_BODY_BYTES, status, remaining, retry, reset, NAN, now), pos
    end
    local s, ok = alg.load(key, now, p1, p2, p3, p4)
    if not ok then return corrupt(1, first, n) end
    local state, status, remaining, retry, reset, delay = alg.step(s, now, cost, p1, p2, p3, p4)
    -- a cost-0 request only reads: nothing to write
    if cost > 0 and (status == STATUS_OK or (alg.chargesDenied and alg.chargesDenied(p1, p2, p3, p4))) then
      alg.save(key, state, now, ttl, p1, p2, p3, p4)
    end
    if delay == nil then delay = NAN end
    return spack(ONE_REPLY, TAG_DECISIONS, ONE_BODY_BYTES, status, remaining, retry, reset, delay, now), pos
  end

  if dedup then
    local seen, ok = getString(dedup)
    if not ok then return corrupt(n + 1, first, n) end
    -- the first reply, stored as it was sent
    if seen then return framed(seen), first + n * ITEM_IN_BYTES end
  end

  local items = {}
  local original = {} -- key -> state as read; ABSENT when there is none
  local current = {}  -- key -> state after the admitted steps so far in this batch
  local admitted = true
  for i = 1, n do
    local it = { key = KEYS[ko + i] }
    local code, enforce
    code, it.ttl, it.p1, it.p2, it.p3, it.p4, it.cost, enforce, pos = sunpack(ITEM_IN, blob, pos)
    it.alg = ALG[code]
    it.enforce = enforce == 1
    -- charged whether admitted or denied, whatever the rest of the batch decides
    it.charges = it.alg.chargesDenied ~= nil and it.alg.chargesDenied(it.p1, it.p2, it.p3, it.p4)
    if original[it.key] == nil then
      local s, ok = it.alg.load(it.key, now, it.p1, it.p2, it.p3, it.p4)
      if not ok then return corrupt(i, first, n) end
      original[it.key] = s == nil and ABSENT or s
      current[it.key] = original[it.key]
    end
    local s = current[it.key]
    if s == ABSENT then s = nil end
    it.state, it.status, it.remaining, it.retry, it.reset, it.delay =
      it.alg.step(s, now, it.cost, it.p1, it.p2, it.p3, it.p4)
    if it.status == STATUS_OK or it.charges then current[it.key] = it.state end
    if it.enforce and it.status ~= STATUS_OK then admitted = false end
    items[i] = it
  end

  local reply = {}
  for i = 1, n do
    local it = items[i]
    if it.charges then
      if it.cost > 0 then it.alg.save(it.key, it.state, now, it.ttl, it.p1, it.p2, it.p3, it.p4) end
    elseif admitted then
      -- a cost-0 request only reads: nothing to write
      if it.status == STATUS_OK and it.cost > 0 then it.alg.save(it.key, it.state, now, it.ttl, it.p1, it.p2, it.p3, it.p4) end
    elseif it.status == STATUS_OK then
      -- nothing is consumed: report the unconsumed capacity, as a cost-0 read of the original
      local s = original[it.key]
      if s == ABSENT then s = nil end
      local _
      _, it.status, it.remaining, it.retry, it.reset, it.delay =
        it.alg.step(s, now, 0, it.p1, it.p2, it.p3, it.p4)
    end
    reply[i] = packItem(it.status, it.remaining, it.retry, it.reset, it.delay)
  end
  reply[n + 1] = spack('<d', now)
  local packed = concat(reply)
  if dedup then rcall('SET', dedup, packed, 'PX', max(1, ceil(dedupTtl))) end
  return framed(packed), pos
end
