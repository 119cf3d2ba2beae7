-- wrk script: POST /v1/jobs with a held job of a unique name per request.
--
--   wrk ... -s post.lua URL -- TAG [BUDGET DONE_FILE]
--
-- TAG makes names unique across runs against one database.  Without a
-- BUDGET the run lasts wrk's -d and the requests still in flight when it
-- ends are abandoned (the server may commit them without wrk counting
-- them).  With BUDGET > 0 each thread sends exactly BUDGET POSTs, then
-- only GET /healthz (200, touches no job) until every POST is answered,
-- stops, and creates DONE_FILE: the database must then hold exactly the
-- 201s counted.  wrk's main thread sleeps out -d whatever its threads do,
-- so the caller sends wrk SIGINT when DONE_FILE appears, and the time
-- from the first POST to the last answer is measured here (elapsed_us).
-- done() prints one "BENCH key=value ..." line that bench/api/run reads:
-- POSTs generated (sent), 201s (ok), other statuses (other), /healthz
-- fillers, the highest job id a 201 carried, and latency percentiles in
-- microseconds.  Counting statuses needs response(), which makes wrk
-- parse every answer; that cost is the client's.

local threads = {}

-- A monotonic clock through LuaJIT's ffi (wrk embeds LuaJIT); 0 without.
local have_ffi, ffi = pcall(require, "ffi")
local now_us = function() return 0 end
if have_ffi then
  ffi.cdef [[
    struct bench_timespec { long tv_sec; long tv_nsec; };
    int clock_gettime(int clk, struct bench_timespec *ts);
  ]]
  local ts = ffi.new("struct bench_timespec")
  now_us = function()
    ffi.C.clock_gettime(1, ts) -- CLOCK_MONOTONIC
    return tonumber(ts.tv_sec) * 1e6 + tonumber(ts.tv_nsec) / 1e3
  end
end

function setup(thread)
  thread:set("tid", #threads)
  table.insert(threads, thread)
end

function init(args)
  tag = args[1] or "run"
  budget = tonumber(args[2] or "0") or 0
  done_file = args[3]
  t_first = 0
  t_last = 0
  sent = 0
  -- wrk calls thread 0's request() once before the run, only to see how
  -- many requests it returns (script_verify_request); that one is never
  -- sent, so it must not be counted.
  verify_call = (tid == 0)
  filler = 0
  ok = 0
  other = 0
  maxid = 0
  hdrs = { ["Content-Type"] = "application/json" }
end

function request()
  if verify_call then
    verify_call = false
    return wrk.format("GET", "/healthz")
  end
  if budget > 0 and sent >= budget then
    filler = filler + 1
    return wrk.format("GET", "/healthz")
  end
  if sent == 0 then
    t_first = now_us()
  end
  sent = sent + 1
  local body = string.format(
    '{"name":"bench-%s-%d-%d","project":"bench","command":["true"],' ..
    '"gpus":0,"hold":true}', tag, tid, sent)
  return wrk.format("POST", "/v1/jobs", hdrs, body)
end

function response(status, headers, body)
  if status == 201 then
    ok = ok + 1
    -- the id is the first field of the job object
    local id = tonumber(string.match(body, '^{"id":(%d+)'))
    if id ~= nil and id > maxid then
      maxid = id
    end
  elseif status == 200 and budget > 0 then
    return -- a /healthz filler
  else
    other = other + 1
    if other <= 3 then
      io.stderr:write("post.lua: status " .. status .. ": " .. body .. "\n")
    end
  end
  if budget > 0 and ok + other >= budget and t_last == 0 then
    t_last = now_us()
    if done_file ~= nil then
      local f = io.open(done_file, "w")
      if f ~= nil then
        f:close()
      end
    end
    wrk.thread:stop()
  end
end

function done(summary, latency, requests)
  local s, o, x, f, m, el = 0, 0, 0, 0, 0, 0
  for _, t in ipairs(threads) do
    s = s + t:get("sent")
    o = o + t:get("ok")
    x = x + t:get("other")
    f = f + t:get("filler")
    m = math.max(m, t:get("maxid"))
    el = math.max(el, t:get("t_last") - t:get("t_first"))
  end
  local er = summary.errors
  io.write(string.format(
    "BENCH sent=%d ok=%d other=%d filler=%d maxid=%d requests=%d duration_us=%d " ..
    "elapsed_us=%d " ..
    "p50_us=%d p90_us=%d p99_us=%d max_us=%d err_connect=%d err_read=%d " ..
    "err_write=%d err_timeout=%d\n",
    s, o, x, f, m, summary.requests, summary.duration, math.max(el, 0),
    latency:percentile(50), latency:percentile(90), latency:percentile(99),
    latency.max, er.connect, er.read, er.write, er.timeout))
end
