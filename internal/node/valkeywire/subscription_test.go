// Code generated from internal/node/rueidiswire/subscription_test.go by go generate ./internal/node/valkeywire; DO NOT EDIT.

package valkeywire_test

import (
	"context"
	"testing"
	"time"

	"github.com/alicebob/miniredis/v2"
	"github.com/stretchr/testify/require"
	valkey "github.com/valkey-io/valkey-go"

	"github.com/redlock-go/redlock/internal/node"
	"github.com/redlock-go/redlock/internal/node/valkeywire"
)

// TestSubscriptionOutlivesARestart subscribes, restarts the server, and
// checks that the subscription's keeper dialled again and subscribed its
// channels again: a message published after the restart arrives.
func TestSubscriptionOutlivesARestart(t *testing.T) {
	s := miniredis.RunT(t)
	c, err := valkey.NewClient(valkey.ClientOption{InitAddress: []string{s.Addr()}, DisableCache: true})
	require.NoError(t, err)
	defer c.Close()
	sub := valkeywire.New(c).Subscribe()
	defer func() { require.NoError(t, sub.Close()) }()
	ctx := context.Background()
	require.NoError(t, sub.Subscribe(ctx, "a", "b"))
	require.NoError(t, sub.Unsubscribe(ctx, "b"))
	published := func(channel string) int {
		n := 0
		for _, p := range s.PubSubNumSub(channel) {
			n += p
		}
		return n
	}
	require.Eventually(t, func() bool { return published("a") == 1 }, 5*time.Second, 10*time.Millisecond)
	s.Publish("a", "before")
	require.Equal(t, node.Message{Channel: "a", Payload: "before"}, <-sub.Messages())

	s.Close()
	require.NoError(t, s.Restart())
	require.Eventually(t, func() bool { return published("a") == 1 }, 10*time.Second, 10*time.Millisecond,
		"subscribed again on a new connection")
	require.Zero(t, published("b"), "b was left before the restart")
	s.Publish("a", "after")
	select {
	case m := <-sub.Messages():
		require.Equal(t, node.Message{Channel: "a", Payload: "after"}, m)
	case <-time.After(5 * time.Second):
		t.Fatal("no message after the restart")
	}
}
