-- wrk script: POST one fixed body (given in the BODY file) with the
-- headers given as "Name: value" lines in the HEADERS file, and count
-- the answers by status class, so a run that got errors says so.
--
--   wrk ... -s status.lua URL -- BODY HEADERS

function init(args)
  local f = assert(io.open(args[1], "r"))
  wrk.method = "POST"
  wrk.body = f:read("*a")
  f:close()
  wrk.headers["Content-Type"] = "application/json"
  for line in io.lines(args[2]) do
    local k, v = line:match("^([^:]+):%s*(.*)$")
    if k then wrk.headers[k] = v end
  end
  ok = 0
  bad = 0
end

function response(status, headers, body)
  if status >= 200 and status < 300 then ok = ok + 1 else bad = bad + 1 end
end

local threads = {}
function setup(thread) table.insert(threads, thread) end

function done(summary, latency, requests)
  local o, b = 0, 0
  for _, t in ipairs(threads) do o = o + t:get("ok"); b = b + t:get("bad") end
  io.write(string.format("BENCH ok=%d bad=%d p50_us=%d p99_us=%d secs=%.2f\n",
    o, b, latency:percentile(50), latency:percentile(99),
    summary.duration / 1e6))
end
