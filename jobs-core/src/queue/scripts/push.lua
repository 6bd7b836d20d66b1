-- push: append ready jobs to a queue, one wake-up token per job.
-- KEYS[1]  queues:<name>          ready list
-- KEYS[2]  queues:<name>:notify   wake-up tokens
-- ARGV     one or more payloads, in order
-- Returns the ready list's length after the push.
local len = rpush_chunked(KEYS[1], ARGV, 1, #ARGV)
local tokens = {}
for i = 1, #ARGV do tokens[i] = '1' end
rpush_chunked(KEYS[2], tokens, 1, #tokens)
return len
