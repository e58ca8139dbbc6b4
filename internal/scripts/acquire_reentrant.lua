-- acquire_reentrant takes a reentrant lock, or one more hold on it when the
-- caller already owns it. The lock is a hash: one field, the owner, whose
-- value is the owner's hold count on this node.
--
-- KEYS[1]  the lock name
-- KEYS[2]  the name's fencing counter; absent when the lock is not fenced
-- ARGV[1]  the owner id
-- ARGV[2]  the time to live, in milliseconds
-- ARGV[3]  "1" when the caller already holds the lock (one more hold): then
--          an absent key is not created, since the lock was released or
--          lost meanwhile
-- ARGV[4]  the least uptime, in whole seconds, at which this node may grant;
--          "0" for no check (see recovering in guard.lua, which scripts.go
--          puts in front of this file)
--
-- Returns {holds, n}: holds is the owner's hold count after this call (1 or
-- more), or 0 when the key is held by another owner or is not a reentrant
-- lock, and n the fencing counter as stored ("0" when absent or not fenced);
-- {0, n, owner} when another owner holds the lock, naming it (where the
-- user may run HKEYS);
-- or {-1, uptime} when the node has been up less than ARGV[4] seconds; or
-- an error reply when the key holds something that is not a lock (see alien
-- in stored.lua).
local up = recovering(ARGV[4])
if up then
	return {-1, up}
end
local n = counter()
local kind = redis.call("TYPE", KEYS[1]).ok
if kind == "none" then
	if ARGV[3] == "1" then
		return {0, n}
	end
	redis.call("HSET", KEYS[1], ARGV[1], 1)
	redis.call("PEXPIRE", KEYS[1], ARGV[2])
	return {1, n}
end
if kind == "hash" and redis.call("HEXISTS", KEYS[1], ARGV[1]) == 1 then
	local holds = redis.call("HINCRBY", KEYS[1], ARGV[1], 1)
	redis.call("PEXPIRE", KEYS[1], ARGV[2])
	return {holds, n}
end
local bad = alien(KEYS[1])
if bad then
	return bad
end
if kind == "hash" and redis.call("HEXISTS", KEYS[1], "redlock:readers") == 0 then
	-- Another owner's (a reader-writer lock's readers have none): named
	-- where the user may run HKEYS, which the least ACL of a Mutex lacks.
	local owners = redis.pcall("HKEYS", KEYS[1])
	if type(owners) == "table" and not owners.err and owners[1] then
		return {0, n, owners[1]}
	end
end
return {0, n}
