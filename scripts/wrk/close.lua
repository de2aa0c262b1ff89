-- One request per connection: every request says Connection: close, so wrk
-- reconnects each time (accept + close cost, no keep-alive).
-- Usage: wrk -s scripts/wrk/close.lua http://127.0.0.1:8080/
wrk.headers["Connection"] = "close"
