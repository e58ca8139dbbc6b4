package main

import (
	"github.com/go-redsync/redsync/v4"
	redsyncredis "github.com/go-redsync/redsync/v4/redis"
	redsyncrueidis "github.com/go-redsync/redsync/v4/redis/rueidis"
	"github.com/redis/go-redis/v9"
	"github.com/redis/rueidis"
	"github.com/redis/rueidis/rueidiscompat"
	valkey "github.com/valkey-io/valkey-go"

	"github.com/redlock-go/redlock/redlock"
	"github.com/redlock-go/redlock/redlockrueidis"
	"github.com/redlock-go/redlock/redlockvalkey"
)

// The implementations over rueidis and valkey-go clients: the library
// (redlockrueidis, redlockvalkey) and redsync over its own rueidis adapter
// (its valkey-go adapter needs valkey-go/valkeycompat, which the module
// proxy here does not serve). Each
// client is of the server of one go-redis client given, at the client's
// defaults but for client-side caching, which no lock reads.

// addrsOf returns the address of each go-redis client.
func addrsOf(clients []redis.UniversalClient) []string {
	out := make([]string, len(clients))
	for i, c := range clients {
		out[i] = c.(*redis.Client).Options().Addr
	}
	return out
}

func newRueidisImpl(clients []redis.UniversalClient) impl {
	var rcs []rueidis.Client
	for _, a := range addrsOf(clients) {
		c, err := rueidis.NewClient(rueidis.ClientOption{InitAddress: []string{a}, DisableCache: true})
		if err != nil {
			panic(err)
		}
		rcs = append(rcs, c)
	}
	rl, err := redlockrueidis.New(rcs, redlock.WithTTL(ttl))
	return otherImpl("redlock-go rueidis", rl, len(rcs), err, func() {
		for _, c := range rcs {
			c.Close()
		}
	})
}

func newValkeyImpl(clients []redis.UniversalClient) impl {
	var vcs []valkey.Client
	for _, a := range addrsOf(clients) {
		c, err := valkey.NewClient(valkey.ClientOption{InitAddress: []string{a}, DisableCache: true})
		if err != nil {
			panic(err)
		}
		vcs = append(vcs, c)
	}
	rl, err := redlockvalkey.New(vcs, redlock.WithTTL(ttl))
	return otherImpl("redlock-go valkey-go", rl, len(vcs), err, func() {
		for _, c := range vcs {
			c.Close()
		}
	})
}

// otherImpl is the library's Mutex over rl, of n nodes (New's err), whose
// clients closeClients closes.
func otherImpl(name string, rl *redlock.Redlock, n int, err error, closeClients func()) impl {
	if err != nil {
		panic(err)
	}
	im := redlockImplOver(name, rl, n, func(rl *redlock.Redlock, key string) (holder, error) {
		m, err := rl.NewMutex(key)
		return mutexHold{m}, err
	})
	closeRL := im.close
	im.close = func() {
		closeRL()
		closeClients()
	}
	return im
}

func newRedsyncRueidisImpl(clients []redis.UniversalClient) impl {
	var pools []redsyncredis.Pool
	var rcs []rueidis.Client
	for _, a := range addrsOf(clients) {
		c, err := rueidis.NewClient(rueidis.ClientOption{InitAddress: []string{a}, DisableCache: true})
		if err != nil {
			panic(err)
		}
		rcs = append(rcs, c)
		pools = append(pools, redsyncrueidis.NewPool(rueidiscompat.NewAdapter(c)))
	}
	im := redsyncOver("redsync rueidis", redsync.New(pools...), len(pools))
	im.close = func() {
		for _, c := range rcs {
			c.Close()
		}
	}
	return im
}
