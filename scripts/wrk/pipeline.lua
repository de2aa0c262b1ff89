-- Pipelining: each write carries N requests (default 16) back to back.
-- Usage: wrk -s scripts/wrk/pipeline.lua http://127.0.0.1:8080/ -- 16
init = function(args)
  local depth = tonumber(args[1]) or 16
  local requests = {}
  for i = 1, depth do
    requests[i] = wrk.format(nil, wrk.path)
  end
  batch = table.concat(requests)
end

request = function()
  return batch
end
