-- chain: start a chain: push its first job and keep the links after it and its catch job, in
-- one step, so that a chain's record never exists without the job that advances it.
-- KEYS[1]  the first job's ready list, or its delayed set when ARGV[1] is a due time
-- KEYS[2]  the first job's queue's notify
-- KEYS[3]  jobs:chain:<id>         list: the links after the first, in order
-- KEYS[4]  jobs:chain:<id>:catch   string: the catch link
-- ARGV[1]  the first job's due time as later.lua takes it, or '' to push it ready
-- ARGV[2]  the first job's link (lib/push_job.lua)
-- ARGV[3]  the catch link, or '' for none
-- ARGV[4..] the links after the first (lib/chain.lua), in order
-- Returns the number of links kept.
if #ARGV > 3 then
  redis.call('rpush', KEYS[3], unpack(ARGV, 4))
end
if ARGV[3] ~= '' then
  redis.call('set', KEYS[4], ARGV[3])
end
push_link(KEYS[1], KEYS[2], ARGV[1], ARGV[2])
return #ARGV - 3
