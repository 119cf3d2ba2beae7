-- wrk script: POST exactly BUDGET runnable jobs to tenbind's /v1/jobs.
--
--   wrk -t1 -cC ... -s post.lua URL -- BUDGET DONE_FILE
--
-- Each job is {"name":"true","project":"bench","command":["true"],
-- "gpus":0}: the job bench/slurm/run's bare curl loop sends to slurmrestd
-- directly.  Once BUDGET POSTs are sent, the connections send only
-- GET /healthz (touches no job) until every POST is answered; then the
-- thread stops and DONE_FILE is created, and the caller sends wrk SIGINT
-- (wrk's main thread sleeps out -d otherwise).  done() prints one
-- "BENCH key=value ..." line: POSTs sent, 201s, other statuses, and the
-- highest job id a 201 carried.

local threads = {}

function setup(thread)
  table.insert(threads, thread)
end

function init(args)
  budget = tonumber(args[1] or "1") or 1
  done_file = args[2]
  sent = 0
  ok = 0
  other = 0
  maxid = 0
  -- wrk calls request() once before the run only to see what it returns
  -- (script_verify_request); that request is never sent.
  verify_call = true
  hdrs = { ["Content-Type"] = "application/json" }
  body = '{"name":"true","project":"bench","command":["true"],"gpus":0}'
end

function request()
  if verify_call then
    verify_call = false
    return wrk.format("GET", "/healthz")
  end
  if sent >= budget then
    return wrk.format("GET", "/healthz")
  end
  sent = sent + 1
  return wrk.format("POST", "/v1/jobs", hdrs, body)
end

function response(status, headers, body)
  if status == 201 then
    ok = ok + 1
    local id = tonumber(string.match(body, '^{"id":(%d+)'))
    if id ~= nil and id > maxid then
      maxid = id
    end
  elseif status == 200 then
    return -- a /healthz filler
  else
    other = other + 1
    if other <= 3 then
      io.stderr:write("post.lua: status " .. status .. ": " .. body .. "\n")
    end
  end
  if ok + other >= budget then
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
  local s, o, x, m = 0, 0, 0, 0
  for _, t in ipairs(threads) do
    s = s + t:get("sent")
    o = o + t:get("ok")
    x = x + t:get("other")
    m = math.max(m, t:get("maxid"))
  end
  io.write(string.format("BENCH sent=%d ok=%d other=%d maxid=%d\n",
                         s, o, x, m))
end
