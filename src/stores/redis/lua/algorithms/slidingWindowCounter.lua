-- Sliding window counter: a line-for-line port of src/algorithms/sliding-window-counter.ts.
-- Params: p1 limit, p2 windowMs. State: packed doubles (window, current, previous): units
-- admitted in window number `window` (floor(nowMs / windowMs)) and in the one before it.
local SWC_FIELDS = { 'window', 'current', 'previous' }

-- The state as of nowWindow: counts of windows that have passed move back or drop out.
local function swcRollTo(s, nowWindow)
  if s == nil or nowWindow >= s.window + 2 then
    return { window = nowWindow, current = 0, previous = 0 }
  end
  if nowWindow == s.window + 1 then
    return { window = nowWindow, current = 0, previous = s.current }
  end
  -- Same window, or time went backwards into an earlier one: keep the state's window.
  return s
end

-- The instant a denied cost fits (see fitsAtMs in the TS).
local function swcFitsAt(s, cost, limit, windowMs)
  local start = s.window * windowMs
  if s.current + cost <= limit then
    local excess = s.previous + s.current + cost - limit
    return start + (excess * windowMs) / s.previous
  end
  local excess = s.current + cost - limit
  return start + windowMs + (excess * windowMs) / s.current
end

-- The state rolled to now's window, and the estimate of units in use at now.
local function swcObserve(state, now, windowMs)
  local s = swcRollTo(state, floor(now / windowMs))
  local elapsed = min(1, max(0, (now - s.window * windowMs) / windowMs))
  return s, s.previous * (1 - elapsed) + s.current
end

local function swcFits(estimate, cost, limit)
  return estimate + cost <= limit + FIT_EPSILON
end

-- The wait from now until a denied cost fits, nudged by a few ulps of the instant only
-- when asking again at exactly now + wait would still be denied by rounding.
local function swcRetryAfter(s, now, cost, limit, windowMs)
  local at = swcFitsAt(s, cost, limit, windowMs)
  local wait = at - now
  if wait > 0 then
    local _, estimate = swcObserve(s, now + wait, windowMs)
    if swcFits(estimate, cost, limit) then return wait end
  end
  return wait + 4 * max(1, abs(at), abs(now)) * DBL_EPSILON
end

ALG[CODE_SLIDING_WINDOW_COUNTER] = {
  load = function(key)
    return loadNumbers(key, SWC_FIELDS, CODE_SLIDING_WINDOW_COUNTER)
  end,

  step = function(state, now, cost, limit, windowMs)
    local s, estimate = swcObserve(state, now, windowMs)
    local start = s.window * windowMs
    -- Until the estimate reaches 0: current still has the next window to decay through.
    local function resetAfter(current)
      if current > 0 then return start + 2 * windowMs - now end
      if s.previous > 0 then return start + windowMs - now end
      return 0
    end

    if cost > limit then
      return s, STATUS_INVALID_POLICY, max(0, limit - estimate), 0, resetAfter(s.current)
    end
    if swcFits(estimate, cost, limit) then
      local current = s.current + cost
      return { window = s.window, current = current, previous = s.previous }, STATUS_OK,
        max(0, limit - estimate - cost), 0, resetAfter(current)
    end
    return s, STATUS_OVER_LIMIT, max(0, limit - estimate),
      swcRetryAfter(s, now, cost, limit, windowMs), resetAfter(s.current)
  end,

  save = function(key, s, now, ttl, limit, windowMs)
    -- From window + 2 on, the state rolls to a fresh one: expire then (later than
    -- now + 2 * windowMs after backwards time), never before.
    setState(key, spack('<Bddd', CODE_SLIDING_WINDOW_COUNTER, s.window, s.current, s.previous),
      (s.window + 2) * windowMs - now)
  end,
}

-- refundState() of src/algorithms/refund.ts: from current while the state is the window
-- of the consumption, from previous once it has moved one window on.
ALG[CODE_SLIDING_WINDOW_COUNTER].refund = function(key, s, now, at, cost, ttl, limit, windowMs)
  local w = floor(at / windowMs)
  local r
  if s.window == w then
    r = { window = s.window, current = max(0, s.current - cost), previous = s.previous }
  elseif s.window == w + 1 then
    r = { window = s.window, current = s.current, previous = max(0, s.previous - cost) }
  else
    return
  end
  -- As for fixed windows: at least the algorithm's TTL, never a life already over.
  setState(key, spack('<Bddd', CODE_SLIDING_WINDOW_COUNTER, r.window, r.current, r.previous),
    max(ttl, (r.window + 2) * windowMs - now))
end

-- The charge of a settle's excess (settle() of src/algorithms/sliding-window-counter.ts):
-- whole units into the current window of now while the estimate stays within
-- limit + maxDebt. Returns the units not charged.
ALG[CODE_SLIDING_WINDOW_COUNTER].charge = function(key, s, now, units, maxDebt, ttl, limit, windowMs)
  local r, estimate = swcObserve(s, now, windowMs)
  local room = max(0, floor(limit + maxDebt - estimate + FIT_EPSILON))
  local charged = min(units, room)
  setState(key, spack('<Bddd', CODE_SLIDING_WINDOW_COUNTER, r.window, r.current + charged, r.previous),
    max(ttl, (r.window + 2) * windowMs - now))
  return units - charged
end
