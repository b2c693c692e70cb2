-- GCRA: a line-for-line port of src/algorithms/gcra.ts.
-- Params: p1 rate, p2 periodMs, p3 burst. State: one packed double, tatMs.
local GCRA_FIELDS = { 'tat' }
local function gcraEmissionMs(units, rate, periodMs)
  return (units * periodMs) / rate
end

local function gcraFreeUnits(aheadMs, rate, periodMs, burst)
  return math.min(burst, math.max(0, burst - (aheadMs * rate) / periodMs))
end

local function gcraSlackMs(tat, rate, periodMs, burst)
  return FIT_EPSILON * gcraEmissionMs(1, rate, periodMs) + (burst * math.abs(tat) * DBL_EPSILON) / 2
end

-- The state a refusal leaves, built only when a refusal needs it.
local function gcraUnchanged(s, now)
  if s == nil then return { tat = now } end
  return s
end

ALG[2] = {
  load = function(key)
    return loadNumbers(key, GCRA_FIELDS, 2)
  end,

  step = function(s, now, cost, rate, periodMs, burst)
    local tat = now
    if s ~= nil then tat = s.tat end
    tat = math.max(tat, now)
    local ahead = tat - now
    if cost > burst then return gcraUnchanged(s, now), 2, gcraFreeUnits(ahead, rate, periodMs, burst), 0, 0 end
    local newAhead = ahead + gcraEmissionMs(cost, rate, periodMs)
    local over = newAhead - gcraEmissionMs(burst, rate, periodMs)
    if cost == 0 or over <= gcraSlackMs(tat, rate, periodMs, burst) then
      return { tat = tat + gcraEmissionMs(cost, rate, periodMs) }, 0,
        gcraFreeUnits(newAhead, rate, periodMs, burst), 0, newAhead
    end
    return gcraUnchanged(s, now), 1, gcraFreeUnits(ahead, rate, periodMs, burst), over, ahead
  end,

  save = function(key, s, now, ttl)
    -- A state with tat <= now decides exactly like a fresh one, so tat - now is its exact
    -- remaining life. Saved states come from admitted costs, where tat - now <= ttl + the
    -- fit slack (1e-4 ms at epoch ms): ttl, the algorithm's ttlMs, is kept as the floor
    -- (what MemoryStore keeps, and what the differential tests rely on), and tat - now
    -- wins only when the slack pushes it past ttl.
    setState(key, struct.pack('<Bd', 2, s.tat), math.max(ttl, s.tat - now))
  end,
}

-- refundState() of src/algorithms/refund.ts: move the TAT back by cost, never before now.
ALG[2].refund = function(key, s, now, at, cost, ttl, rate, periodMs)
  ALG[2].save(key, { tat = math.max(now, s.tat - gcraEmissionMs(cost, rate, periodMs)) }, now, ttl)
end
