-- extend_multi re-arms the expiry of every key of a multi-name lock, only
-- if each still holds the caller's token. It never creates a key: a name
-- that expired, was taken or was forcibly released leaves the lock lost.
--
-- KEYS     the lock names
-- ARGV[1]  the caller's token
-- ARGV[2]  the new time to live, in milliseconds
--
-- Returns 1 when every key held ARGV[1] and its expiry was set, 0 when one
-- did not (nothing was changed), or an error reply when GET failed.
for _, key in ipairs(KEYS) do
	local v = stored(key)
	if type(v) == "table" then
		return v
	end
	if v ~= ARGV[1] then
		return 0
	end
end
for _, key in ipairs(KEYS) do
	redis.call("PEXPIRE", key, ARGV[2])
end
return 1
