-- queue adds a waiting Lock to the lock's queue of waiters, or removes it.
-- The queue is what makes a release hand the lock to one waiter instead of
-- waking them all: the release script pops the oldest and names it in its
-- announcement (see release.lua).
--
-- KEYS[1]  the queue: a sorted set of waiter ids, scored by when each
--          started waiting (milliseconds since the epoch, the waiter's clock)
-- ARGV[1]  "add" or "remove"
-- ARGV[2]  the waiter's id
-- ARGV[3]  add: the score
-- ARGV[4]  add: the queue's time to live, in milliseconds; it is renewed by
--          every add, so a queue nobody waits on goes away
--
-- An add keeps an existing entry's score (NX): a waiter re-added after it
-- was named keeps its place. Returns 1.
if ARGV[1] == "add" then
	redis.call("ZADD", KEYS[1], "NX", ARGV[3], ARGV[2])
	redis.call("PEXPIRE", KEYS[1], ARGV[4])
else
	redis.call("ZREM", KEYS[1], ARGV[2])
end
return 1
