-- cancel_batch: cancel a batch: its jobs that have not started are skipped when they are.
-- KEYS[1]  jobs:batch:<id>
-- ARGV[1]  unused
-- Returns 1 when cancelled now, 0 when there is no such batch or it was cancelled already.
if redis.call('exists', KEYS[1]) == 0 then
  return 0
end
return redis.call('hsetnx', KEYS[1], 'cancelled_at', now_millis())
