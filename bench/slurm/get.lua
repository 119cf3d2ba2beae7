-- wrk script: GET /v1/jobs/{id} of random existing jobs at a modest,
-- steady pace, as clients polling their jobs would, while tenbind
-- dispatches to Slurm.
--
--   wrk ... -s get.lua URL -- MAXID DELAY_MS
--
-- Each connection waits DELAY_MS between its requests (wrk's delay()),
-- so that the probe measures how long tenbind's loop keeps a request
-- waiting without itself taking the core the dispatch needs; DELAY_MS 0
-- is a closed loop at full speed.  wrk's latency is from sending a
-- request to reading its answer (the delay is not part of it).  Any
-- status but 200 is counted as "other".  done() prints one
-- "BENCH key=value ..." line with the percentiles in microseconds.

local threads = {}

function setup(thread)
  thread:set("tid", #threads)
  table.insert(threads, thread)
end

function init(args)
  maxid = tonumber(args[1] or "1") or 1
  pause = tonumber(args[2] or "10") or 10
  math.randomseed(4242 + tid)
  ok = 0
  other = 0
end

function delay()
  return pause
end

function request()
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
  local o, x = 0, 0
  for _, t in ipairs(threads) do
    o = o + t:get("ok")
    x = x + t:get("other")
  end
  io.write(string.format(
    "BENCH ok=%d other=%d requests=%d duration_us=%d p50_us=%d " ..
    "p90_us=%d p99_us=%d max_us=%d errors=%d\n",
    o, x, summary.requests, summary.duration,
    latency:percentile(50), latency:percentile(90), latency:percentile(99),
    latency.max, summary.errors.connect + summary.errors.read +
    summary.errors.write + summary.errors.timeout))
end
