-- Fixed window: a line-for-line port of src/algorithms/fixed-window.ts.
-- Params: p1 limit, p2 windowMs, p3 1 when denied requests are charged too (chargeDenied).
-- State: packed doubles (window, count), where window is floor(nowMs / windowMs) of the
-- window the count belongs to. One key per bucket: the value carries the window number, so
-- backwards time reads it exactly as the TS does.
local FW_FIELDS = { 'window', 'count' }
ALG[CODE_FIXED_WINDOW] = {
  load = function(key)
    return loadNumbers(key, FW_FIELDS, CODE_FIXED_WINDOW)
  end,

  step = function(s, now, cost, limit, windowMs, charge)
    local nowWindow = floor(now / windowMs)
    -- A later window starts empty; an earlier one (time went backwards) is read as the
    -- state's window, count kept.
    local window
    if s == nil then window = nowWindow else window = max(s.window, nowWindow) end
    local count = 0
    if s ~= nil and s.window == window then count = s.count end
    -- From the effective window, so after backwards time this can exceed windowMs.
    local untilEnd = waitUntil(now, (window + 1) * windowMs)
    local function resetAfter(n)
      if n > 0 then return untilEnd end
      return 0
    end

    local charged = charge == 1
    if cost > limit and not charged then
      return { window = window, count = count }, STATUS_INVALID_POLICY, max(0, limit - count), 0, resetAfter(count)
    end
    -- Counts are whole units, so the comparison is exact: no FIT_EPSILON.
    if count + cost <= limit then
      local used = count + cost
      return { window = window, count = used }, STATUS_OK, limit - used, 0, resetAfter(used)
    end
    -- A denial reports the capacity it found (none, once a charged count passed the limit).
    local found = max(0, limit - count)
    if charged then
      -- A cost above the limit never fits; any other fits the next window, which starts empty.
      local retry = untilEnd
      if cost > limit then retry = huge end
      return { window = window, count = count + cost }, STATUS_OVER_LIMIT, found, retry, untilEnd
    end
    return { window = window, count = count }, STATUS_OVER_LIMIT, found, untilEnd, resetAfter(count)
  end,

  -- Whether a denial is charged too, so its state must be written (chargesDenied in the TS).
  chargesDenied = function(limit, windowMs, charge)
    return charge == 1
  end,

  save = function(key, s, now, ttl, limit, windowMs)
    -- Once the state's window has ended, the next step reads count 0 in the window of
    -- now, exactly as from no state: expire then (later than now + windowMs after
    -- backwards time), never before.
    setState(key, spack('<Bdd', CODE_FIXED_WINDOW, s.window, s.count), (s.window + 1) * windowMs - now)
  end,
}

-- refundState() of src/algorithms/refund.ts: only the window the units were taken in
-- holds them; a later window never did.
ALG[CODE_FIXED_WINDOW].refund = function(key, s, now, at, cost, ttl, limit, windowMs)
  if s.window ~= floor(at / windowMs) then return end
  -- A refund may come after the window ended (a slow cross-slot check, or a clock that
  -- went back): keep the state at least the algorithm's TTL instead of a life that may
  -- already be over, so a later check on a clock behind still sees what the window held.
  setState(key, spack('<Bdd', CODE_FIXED_WINDOW, s.window, max(0, s.count - cost)),
    max(ttl, (s.window + 1) * windowMs - now))
end

-- The charge of a settle's excess (settle() of src/algorithms/fixed-window.ts): to the
-- window of now (as a step reads it), up to limit + maxDebt. Returns the units not charged.
ALG[CODE_FIXED_WINDOW].charge = function(key, s, now, units, maxDebt, ttl, limit, windowMs)
  local nowWindow = floor(now / windowMs)
  local window = nowWindow
  if s ~= nil then window = max(s.window, nowWindow) end
  local count = 0
  if s ~= nil and s.window == window then count = s.count end
  local wanted = count + units
  local charged = max(count, min(wanted, limit + maxDebt))
  setState(key, spack('<Bdd', CODE_FIXED_WINDOW, window, charged),
    max(ttl, (window + 1) * windowMs - now))
  return wanted - charged
end
