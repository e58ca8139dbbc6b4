-- acquire_plain_tail.lua is the rest of acquire_plain.lua (see there),
-- after the functions it needs: v is what its SET ... NX GET answered,
-- other than a grant.
if type(v) == "table" then
	if string.sub(v.err, 1, 10) == "WRONGTYPE " then
		return alien(KEYS[1]) or 0
	end
	return v
end
if v == ARGV[1] then
	-- Held already by this token: a resent request, or a release that
	-- handed the lock over to this waiter (see hand_over in announce.lua).
	-- The TTL is re-armed, so that the grant's validity counts from this
	-- attempt.
	redis.call("PEXPIRE", KEYS[1], ARGV[2])
	if ARGV[3] == "1" then
		return node_time() or 1
	end
	return 1
end
return v
