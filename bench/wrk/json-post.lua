wrk.method = "POST"
wrk.headers["content-type"] = "application/json"
local n = 0
request = function()
  n = n + 1
  local t = n % 10000
  return wrk.format(nil, "/json", nil, '{"domain":"bench","descriptors":[{"entries":[{"key":"tenant","value":"tenant-' .. t .. '"}]}]}')
end
