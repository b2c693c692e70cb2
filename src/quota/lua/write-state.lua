-- Writes the controller state only while the leader key holds this term.
-- KEYS: leader, state. ARGV: held value, state. Returns 1, or 0.
if redis.call('GET', KEYS[1]) == ARGV[1] then
  redis.call('SET', KEYS[2], ARGV[2])
  return 1
end
return 0
