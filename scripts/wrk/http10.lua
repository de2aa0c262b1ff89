-- HTTP/1.0 with keep-alive: persistence has to be asked for, and the server
-- answers with Connection: keep-alive.
-- Usage: wrk -s scripts/wrk/http10.lua http://127.0.0.1:8080/
request = function()
  return "GET " .. wrk.path .. " HTTP/1.0\r\nHost: " .. wrk.host ..
         "\r\nConnection: keep-alive\r\n\r\n"
end
