-- restart: ask every worker to stop once its running jobs are done.
-- KEYS[1]  jobs:restart   the time of the last restart request
-- Sets it to Redis's time in Unix milliseconds, and returns that. Workers compare it with the
-- value they saw at their start; the server's clock keeps requests from different hosts in
-- order.
local ms = now_millis()
redis.call('set', KEYS[1], ms)
return ms
