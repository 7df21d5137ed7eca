-- wrk's side of bench/http_client: WRK_DEPTH (environment; default 1) GETs of the URL's path
-- written together on every connection, the next batch once all their responses are in; wrk
-- counts each response as a request. At depth 1 no request function is defined, so wrk keeps
-- its static request (no Lua call per request). At the end, one JSON line with the figures
-- the driver reads (latencies in microseconds; p99.9 is not in wrk's own report).
--   WRK_DEPTH=16 wrk -t1 -c64 -d10s -s pipeline.lua URL
local depth = tonumber(os.getenv("WRK_DEPTH") or "1")

if depth > 1 then
    local req
    request = function()
        if req == nil then -- here, not at load: wrk.path is set by now
            local batch = {}
            for i = 1, depth do
                batch[i] = wrk.format("GET", wrk.path)
            end
            req = table.concat(batch)
        end
        return req
    end
end

done = function(summary, latency, requests)
    local e = summary.errors
    io.write(string.format('{"wrk":1,"depth":%d,"requests":%d,"duration_us":%d,"p50_us":%d,' ..
        '"p99_us":%d,"p999_us":%d,"errors":%d}\n', depth, summary.requests, summary.duration,
        latency:percentile(50), latency:percentile(99), latency:percentile(99.9),
        e.connect + e.read + e.write + e.status + e.timeout))
end
