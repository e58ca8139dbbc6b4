-- rw_base.lua is not a script of its own: scripts.go puts it in front of
-- the reader-writer lock's scripts, after clock.lua, and before their first
-- lines (read_acquire_head.lua, read_release_head.lua) and rw.lua, which
-- says how the readers are kept.

local MARK = "redlock:readers"

-- PRUNE_MIN is the least size at which a grant prunes the hash; a release
-- that leaves at most SMALL fields prunes it, so that the last live
-- reader's release is seen as the last and announced.
local PRUNE_MIN = 16
local SMALL = 8

-- live reports whether token is a reader of key whose hold has not
-- expired at t.
local function live(key, token, t)
	local expiry = redis.call("HGET", key, token)
	return expiry and tonumber(expiry) > t
end

-- hold makes token a reader of key until ttl (text, in ms) from t, and
-- keeps key at least until then; fresh says that key holds nothing yet.
local function hold(key, token, t, ttl, fresh)
	if fresh then
		redis.call("HSET", key, MARK, PRUNE_MIN, token, t + tonumber(ttl))
		redis.call("PEXPIRE", key, ttl)
		return
	end
	redis.call("HSET", key, token, t + tonumber(ttl))
	if redis.call("PTTL", key) < tonumber(ttl) then
		redis.call("PEXPIRE", key, ttl)
	end
end
