package redlock

import (
	"context"
	"fmt"

	"github.com/redis/go-redis/v9"

	"github.com/redlock-go/redlock/internal/scripts"
	"github.com/redlock-go/redlock/redlock/internal/engine"
)

// SetFenced is the resource side of fencing, for a resource kept in Redis:
// in one atomic script, it sets key to value on c unless a write with a
// higher fencing token (see [Mutex.Fence]) was accepted for key before. The
// highest token accepted is kept at key + ":fence"; equal tokens are
// accepted, so one holder can write many times.
//
// It returns nil when the value was written, an error wrapping
// [ErrStaleFence] when it was refused (a later holder has written: stop
// acting as the holder), and one wrapping [ErrInvalidArgument] for a token
// of 0 (not fenced, or not held). c is the resource's own Redis, not one
// of the lock's nodes; with a Redis Cluster, give key a hash tag
// ("{account:7}") so that both keys share a slot.
func SetFenced(ctx context.Context, c redis.Scripter, key, value string, fence uint64) error {
	if ctx == nil {
		return engine.Invalid("nil context")
	}
	if fence == 0 || fence >= engine.MaxFence {
		return engine.Invalid("fencing token must be in [1, 2^53), got %d", fence)
	}
	keys, s := []string{key, key + ":fence"}, scripts.SetFenced
	cmd := c.EvalSha(ctx, s.Hash, keys, value, fence)
	if redis.HasErrorPrefix(cmd.Err(), "NOSCRIPT") {
		cmd = c.Eval(ctx, s.Source, keys, value, fence) // the node lost its script cache: it loads the script
	}
	written, err := cmd.Int64()
	if err != nil {
		return fmt.Errorf("redlock: set fenced %s: %w", key, err)
	}
	if written != 1 {
		return fmt.Errorf("%w: %s refused token %d", ErrStaleFence, key, fence)
	}
	return nil
}
