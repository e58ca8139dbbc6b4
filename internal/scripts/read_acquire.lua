-- read_acquire takes a read hold of a reader-writer lock on this node: it
-- admits the caller unless a writer
-- holds the lock, or a writer waits (writers are not starved: while one
-- waits, no new reader gets in). A caller that is already a reader (the
-- client resent this request after losing the reply of a try that was
-- applied) is re-armed.
--
-- KEYS[1]  the lock name (see rw.lua, which scripts.go puts in front of
--          this file)
-- KEYS[2]  the key where a waiting writer marks itself (see
--          write_acquire.lua); absent where a Redis Cluster cannot keep it
--          in the name's slot
-- ARGV[1]  the caller's token
-- ARGV[2]  the time to live, in milliseconds
-- ARGV[3]  the least uptime, in whole seconds, at which this node may grant;
--          "0" for no check (see recovering in guard.lua)
--
-- Returns {status, n}, except for a grant:
--   time          granted (an integer, which costs the client less than an
--                 array): the caller is a reader until ARGV[2] ms from now;
--                 the node's time in Unix milliseconds, the clock evidence
--                 the vote carries (see internal/node/clock.go)
--   { 0, 0}       refused: a writer (or a Mutex) holds the lock
--   { 0, 1}       refused: a writer waits
--   {-1, uptime}  refused: the node has been up only `uptime` seconds
--   an error reply KEYS[1] holds what no lock leaves
local up = recovering(ARGV[3])
if up then
	return {-1, up}
end
local t = now()
local state = kind(KEYS[1])
if type(state) == "table" then
	return state
end
if state == "lock" then
	return {0, 0}
end
if state == "readers" and not prune(KEYS[1], t) then
	state = "none"
end
local again = state == "readers" and live(KEYS[1], ARGV[1], t)
if not again and #KEYS > 1 and redis.call("EXISTS", KEYS[2]) == 1 then
	return {0, 1}
end
hold(KEYS[1], ARGV[1], t, ARGV[2], state == "none")
return t
