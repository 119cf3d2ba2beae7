-- wrk script: GET /v1/jobs/{id} for ids drawn uniformly from 1..MAXID.
--
--   wrk ... -s get.lua URL -- MAXID
--
-- Every id must exist (bench/api/run passes the highest id it committed),
-- so any status but 200 is a failure.  done() prints one "BENCH ..." line
-- like post.lua's.

local threads = {}

function setup(thread)
  thread:set("tid", #threads)
  table.insert(threads, thread)
end

function init(args)
  maxid = tonumber(args[1] or "1") or 1
  math.randomseed(12345 + tid)
  sent = 0
  -- wrk calls thread 0's request() once before the run, only to see how
  -- many requests it returns (script_verify_request); that one is never
  -- sent, so it must not be counted.
  verify_call = (tid == 0)
  ok = 0
  other = 0
end

function request()
  if verify_call then
    verify_call = false
    return wrk.format("GET", "/healthz")
  end
  sent = sent + 1
  return wrk.format("GET", "/v1/jobs/" .. math.random(1, maxid))
end

function response(status, headers, body)
  if status == 200 then
    ok = ok + 1
  else
    other = other + 1
    if other <= 3 then
      io.stderr:write("get.lua: status " .. status .. ": " .. body .. "\n")
    end
  end
end

function done(summary, latency, requests)
  local s, o, x = 0, 0, 0
  for _, t in ipairs(threads) do
    s = s + t:get("sent")
    o = o + t:get("ok")
    x = x + t:get("other")
  end
  local er = summary.errors
  io.write(string.format(
    "BENCH sent=%d ok=%d other=%d filler=0 maxid=0 requests=%d duration_us=%d " ..
    "p50_us=%d p90_us=%d p99_us=%d max_us=%d err_connect=%d err_read=%d " ..
    "err_write=%d err_timeout=%d\n",
    s, o, x, summary.requests, summary.duration,
    latency:percentile(50), latency:percentile(90), latency:percentile(99),
    latency.max, er.connect, er.read, er.write, er.timeout))
end
