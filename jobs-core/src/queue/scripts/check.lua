-- check: run once when a worker starts, to learn whether the server lets this user load and
-- run scripts (an ACL may deny EVALSHA or SCRIPT) before a job depends on it.
-- KEYS: none
-- ARGV: none
-- Returns 1.
return 1
