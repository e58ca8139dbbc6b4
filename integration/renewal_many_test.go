package integration

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/redlock-go/redlock/redlock"
)

// holdManyWithRenewal holds 40 locks with renewal and ttl over the nodes
// clients makes, for two and a half TTLs, while another process tries to
// take each: it never gets one, each is still held and its validity moved
// on, and each is free after its Unlock. Their extensions fall due
// together and go in shared rounds. opts are both processes' own. A node
// that answers within half a second is up (opts may say otherwise): a
// machine loaded by the parallel tests is not what this is about, and an
// extension that timed out on a majority for a TTL would read as lost.
func holdManyWithRenewal(t *testing.T, ctx context.Context, ttl time.Duration, clients func() []redis.UniversalClient, opts ...redlock.Option) {
	t.Helper()
	const locks = 40
	opts = append([]redlock.Option{redlock.WithTTL(ttl), redlock.WithNodeTimeout(500 * time.Millisecond)}, opts...)
	holder := redlockOver(t, clients(), append(opts, redlock.WithRenewal())...)
	other := redlockOver(t, clients(), opts...)
	ms := make([]*redlock.Mutex, locks)
	theirs := make([]*redlock.Mutex, locks)
	first := make([]time.Time, locks)
	for k := range ms {
		name := fmt.Sprintf("locks:renewed:%d", k) // within the ACL lines' keys
		ms[k], theirs[k] = newMutex(t, holder, name), newMutex(t, other, name)
		require.NoError(t, ms[k].Lock(ctx))
		first[k] = ms[k].Until()
	}
	for end := time.Now().Add(ttl * 5 / 2); time.Now().Before(end); time.Sleep(ttl / 4) {
		for k, m := range ms {
			require.NoError(t, m.Err(), "lock %d lost while held with renewal", k)
			err := theirs[k].TryLock(ctx)
			require.ErrorIs(t, err, redlock.ErrNotAcquired, "another process took lock %d while it was held", k)
		}
	}
	for k, m := range ms {
		assert.True(t, m.Until().After(first[k].Add(ttl)), "lock %d: validity %v, first %v: not renewed", k, m.Until(), first[k])
		require.NoError(t, m.Unlock(ctx), "lock %d", k)
	}
	for k, m := range theirs {
		require.NoError(t, m.TryLock(ctx), "lock %d, released", k)
		require.NoError(t, m.Unlock(ctx))
	}
}
