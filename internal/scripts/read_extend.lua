-- read_extend re-arms the caller's read hold of a reader-writer lock, only
-- if it still has one that has not expired. It never admits anyone: a hold
-- that expired or was dropped stays lost. A waiting writer does not stop
-- it: the readers already in keep their holds as long as they extend them.
--
-- KEYS[1]  the lock name (see rw.lua, which scripts.go puts in front of
--          this file)
-- ARGV[1]  the caller's token
-- ARGV[2]  the new time to live, in milliseconds
--
-- Returns 1 when the caller was a reader and now is until ARGV[2] ms from
-- now, 0 otherwise, or an error reply when KEYS[1] holds what no lock
-- leaves.
local t = now()
local state = kind(KEYS[1])
if type(state) == "table" then
	return state
end
if state ~= "readers" or not live(KEYS[1], ARGV[1], t) then
	return 0
end
hold(KEYS[1], ARGV[1], t, ARGV[2], false)
return 1
