-- stored.lua is not a script of its own: scripts.go puts it in front of the
-- scripts that read a lock's value, acquire.lua, release.lua
-- and fence.lua (and of the reentrant ones, which need alien or server).

-- stored returns the string that key holds, false when key is absent, and
-- nil when key holds another type (a reentrant lock, or something that is
-- not a lock at all). Any other error of GET is returned as it is, an error
-- table: the caller returns it, so that it is never taken for an answer.
local function stored(key)
	local v = redis.pcall("GET", key)
	if type(v) == "table" and v.err then
		if string.sub(v.err, 1, 10) == "WRONGTYPE " then
			return nil
		end
		return v
	end
	return v
end

-- alien returns an error reply when key holds what no lock leaves: a type
-- other than a string (a plain lock) or a hash (a reentrant lock), or one of
-- these without an expiry (every lock has one). It returns nil when key is
-- absent or may be a lock. Another program uses the name: retrying cannot
-- help, and the caller should hear so instead of "held by another".
local function alien(key)
	local kind = redis.call("TYPE", key).ok
	if kind == "none" then
		return nil
	end
	if (kind == "string" or kind == "hash") then
		if redis.call("PTTL", key) ~= -1 then
			return nil
		end
		kind = kind .. " without expiry"
	end
	local who = "another program"
	if kind == "zset" then
		who = "a Semaphore or another program"
	end
	return redis.error_reply("WRONGTYPE redlock: the key " .. key .. " holds a " .. kind ..
		", not a lock: " .. who .. " uses this name")
end

-- held answers an acquisition by ARGV[1] of the lock KEYS[1] that its SET
-- did not make, with n the fencing counter: {1, n} when KEYS[1] holds
-- ARGV[1] (a command the client resent), {0, n, holder} when another
-- token holds it, {0, n} for a reentrant lock's hash (or readers), and an
-- error reply when it holds what no lock leaves (see alien). acquire.lua
-- and write_acquire.lua end with it.
local function held(n)
	local holder = stored(KEYS[1])
	if type(holder) == "table" then
		return holder
	end
	if holder == ARGV[1] then
		return {1, n}
	end
	if holder then
		return {0, n, holder}
	end
	return alien(KEYS[1]) or {0, n}
end

-- server returns the node's run id, unique to the server process: a
-- release that finds its key gone, or another's, says which server
-- answered ("taken:" and the run id for the latter), so that the caller
-- can tell its own resent release (the same server it acquired on, whose
-- first try freed the key another then took) from a restart or a failover
-- that lost the key (another server). A release whose outcome no one
-- reads (an undo, one hold of a reentrant lock) asks no INFO.
-- A server that refuses INFO (an ACL user without it) answers "", which
-- matches no server: the caller then reads the absent key as not held.
local function server()
	local info = redis.pcall("INFO", "server")
	if type(info) ~= "string" then
		return ""
	end
	return string.match(info, "run_id:(%x+)") or ""
end

