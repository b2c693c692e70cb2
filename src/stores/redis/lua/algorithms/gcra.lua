-- GCRA: a line-for-line port of src/algorithms/gcra.ts.
-- Params: p1 rate, p2 periodMs, p3 burst. State: one packed double, tatMs.
local GCRA_FIELDS = { 'tat' }
local function gcraEmissionMs(units, rate, periodMs)
  return (units * periodMs) / rate
end

local function gcraFreeUnits(aheadMs, rate, periodMs, burst)
  return min(burst, max(0, burst - (aheadMs * rate) / periodMs))
end

local function gcraSlackMs(tat, rate, periodMs, burst)
  return FIT_EPSILON * gcraEmissionMs(1, rate, periodMs) + (burst * abs(tat) * DBL_EPSILON) / 2
end

-- The step on scalars: tat0 is the state's TAT, nil when there is none. Returns the next
-- TAT (a refusal leaves the state's, or now for none), then status, remaining,
-- retryAfterMs, resetAfterMs.
local function gcraStep(tat0, now, cost, rate, periodMs, burst)
  local tat = max(tat0 or now, now)
  local ahead = tat - now
  if cost > burst then
    return tat0 or now, STATUS_INVALID_POLICY, gcraFreeUnits(ahead, rate, periodMs, burst), 0, ahead
  end
  local newAhead = ahead + gcraEmissionMs(cost, rate, periodMs)
  local over = newAhead - gcraEmissionMs(burst, rate, periodMs)
  if cost == 0 or over <= gcraSlackMs(tat, rate, periodMs, burst) then
    return tat + gcraEmissionMs(cost, rate, periodMs), STATUS_OK,
      gcraFreeUnits(newAhead, rate, periodMs, burst), 0, newAhead
  end
  return tat0 or now, STATUS_OVER_LIMIT, gcraFreeUnits(ahead, rate, periodMs, burst), over, ahead
end

local function gcraSave(key, tat, now, ttl)
  -- A state with tat <= now decides exactly like a fresh one, so tat - now is its exact
  -- remaining life. Saved states come from admitted costs, where tat - now <= ttl + the
  -- fit slack (1e-4 ms at epoch ms): ttl, the algorithm's ttlMs, is kept as the floor
  -- (what MemoryStore keeps, and what the differential tests rely on), and tat - now
  -- wins only when the slack pushes it past ttl.
  setState(key, spack('<Bd', CODE_GCRA, tat), max(ttl, tat - now))
end

ALG[CODE_GCRA] = {
  load = function(key)
    return loadNumbers(key, GCRA_FIELDS, CODE_GCRA)
  end,

  step = function(s, now, cost, rate, periodMs, burst)
    local tat, status, remaining, retry, reset =
      gcraStep(s ~= nil and s.tat or nil, now, cost, rate, periodMs, burst)
    return { tat = tat }, status, remaining, retry, reset
  end,

  save = function(key, s, now, ttl)
    gcraSave(key, s.tat, now, ttl)
  end,

  -- A one-request batch on scalars (see ALG[CODE_TOKEN_BUCKET].decide).
  decide = function(key, now, cost, ttl, rate, periodMs, burst)
    local ok, present, tat0 = loadPacked(key, CODE_GCRA, 1)
    if not ok then return false end
    if not present then tat0 = nil end
    local tat, status, remaining, retry, reset = gcraStep(tat0, now, cost, rate, periodMs, burst)
    -- a cost-0 request only reads: nothing to write
    if status == STATUS_OK and cost > 0 then gcraSave(key, tat, now, ttl) end
    return true, status, remaining, retry, reset
  end,
}

-- refundState() of src/algorithms/refund.ts: move the TAT back by cost, never before now.
ALG[CODE_GCRA].refund = function(key, s, now, at, cost, ttl, rate, periodMs)
  ALG[CODE_GCRA].save(key, { tat = max(now, s.tat - gcraEmissionMs(cost, rate, periodMs)) }, now, ttl)
end

-- The charge of a settle's excess (settle() of src/algorithms/gcra.ts): the TAT moves on by
-- `units`, to at most (burst + maxDebt) x T past now, never back. Returns the units not
-- charged.
ALG[CODE_GCRA].charge = function(key, s, now, units, maxDebt, ttl, rate, periodMs, burst)
  local tat = max(s ~= nil and s.tat or now, now)
  local wanted = tat + gcraEmissionMs(units, rate, periodMs)
  local nextTat = max(tat, min(wanted, now + gcraEmissionMs(burst + maxDebt, rate, periodMs)))
  gcraSave(key, nextTat, now, ttl)
  return ((wanted - nextTat) * rate) / periodMs
end
