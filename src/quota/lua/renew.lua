-- Renews the leader key this term holds, or reclaims it if it ran out while no one
-- took a term since (the stored token is still this term's: every acquire raises it).
-- KEYS: leader, token. ARGV: held value, ttl ms, token. Returns 1, or 0.
local held = redis.call('GET', KEYS[1])
if held == ARGV[1] then
  return redis.call('PEXPIRE', KEYS[1], ARGV[2])
end
if held == false and redis.call('GET', KEYS[2]) == ARGV[3] then
  redis.call('SET', KEYS[1], ARGV[1], 'PX', ARGV[2])
  return 1
end
return 0
