package redlock

import (
	"context"
	"math"
	"testing"
	"time"

	"github.com/redlock-go/redlock/redlock/internal/engine"

	"github.com/redlock-go/redlock/redlock/internal/quorum"

	"github.com/redis/go-redis/v9"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/redlock-go/redlock/internal/node/nodetest"
)

func TestNewRejectsBadClients(t *testing.T) {
	a := redis.NewClient(&redis.Options{Addr: "127.0.0.1:1"})
	b := redis.NewClient(&redis.Options{Addr: "127.0.0.1:2"})
	sameAddr := redis.NewClient(&redis.Options{Addr: "127.0.0.1:1", DB: 3})
	t.Cleanup(func() { _ = a.Close(); _ = b.Close(); _ = sameAddr.Close() })
	var nilClient *redis.Client
	for name, clients := range map[string][]redis.UniversalClient{
		"none":         nil,
		"empty":        {},
		"nil":          {a, nil},
		"typed nil":    {a, nilClient},
		"same twice":   {a, b, a},
		"same address": {a, sameAddr},
	} {
		t.Run(name, func(t *testing.T) {
			r, err := New(clients)
			assert.ErrorIs(t, err, ErrInvalidArgument)
			assert.Nil(t, r)
		})
	}
	r, err := New([]redis.UniversalClient{a, b})
	require.NoError(t, err)
	assert.Equal(t, 2, r.Quorum())
	require.NoError(t, r.Close(t.Context()))
}

func TestOptionsValidated(t *testing.T) {
	for name, opts := range map[string][]Option{
		"nil option":                {nil},
		"zero ttl":                  {WithTTL(0)},
		"negative ttl":              {WithTTL(-time.Second)},
		"sub-millisecond ttl":       {WithTTL(1500 * time.Microsecond)},
		"zero node timeout":         {WithNodeTimeout(0)},
		"node timeout equals ttl":   {WithTTL(time.Second), WithNodeTimeout(time.Second)},
		"node timeout above ttl":    {WithNodeTimeout(time.Minute)},
		"negative drift":            {WithDriftFactor(-0.1)},
		"drift one half":            {WithDriftFactor(0.5)},
		"drift NaN":                 {WithDriftFactor(math.NaN())},
		"drift eats the ttl":        {WithTTL(2 * time.Millisecond), WithNodeTimeout(time.Millisecond)},
		"negative tries":            {WithTries(-1)},
		"zero retry delay":          {WithRetryDelay(0, time.Second)},
		"retry delay max below min": {WithRetryDelay(time.Second, time.Millisecond)},
		"negative clock tolerance":  {WithClockTolerance(-time.Second)},
	} {
		t.Run(name, func(t *testing.T) {
			ns := nodetest.Nodes(nodetest.Fakes(3))
			r, err := newRedlock(ns, opts...)
			assert.ErrorIs(t, err, ErrInvalidArgument, "New")
			assert.Nil(t, r)

			var lockOpts []LockOption
			for _, o := range opts {
				if lo, ok := o.(LockOption); ok {
					lockOpts = append(lockOpts, lo)
				}
			}
			if len(lockOpts) < len(opts) {
				return // New's only: the compiler refuses it to NewMutex
			}
			r, err = newRedlock(ns)
			require.NoError(t, err)
			m, err := r.NewMutex("k", lockOpts...)
			assert.ErrorIs(t, err, ErrInvalidArgument, "NewMutex")
			assert.Nil(t, m)
		})
	}
}

func TestOptionsApply(t *testing.T) {
	ns := nodetest.Nodes(nodetest.Fakes(3))
	r, err := newRedlock(ns, WithTTL(time.Minute), WithTries(3))
	require.NoError(t, err)
	m, err := r.NewMutex("k", WithNodeTimeout(time.Second), WithDriftFactor(0), WithRetryDelay(time.Millisecond, 2*time.Millisecond))
	require.NoError(t, err)
	assert.Equal(t, engine.Settings{
		TTL: time.Minute, NodeTimeout: time.Second, DriftFactor: 0, Tries: 3,
		DelayMin: time.Millisecond, DelayMax: 2 * time.Millisecond, Listen: true, ClockTolerance: quorum.DefaultClockTolerance,
	}, m.h.Settings)
	d, err := r.NewMutex("j")
	require.NoError(t, err)
	assert.Equal(t, defaultNodeTimeout, d.h.Settings.NodeTimeout, "NewMutex options do not leak into the Redlock's defaults")
	assert.Equal(t, "j", d.Name())
}

func TestBadArguments(t *testing.T) {
	ns := nodetest.Nodes(nodetest.Fakes(3))
	r, err := newRedlock(ns)
	require.NoError(t, err)
	_, err = r.NewMutex("")
	require.ErrorIs(t, err, ErrInvalidArgument)
	m, err := r.NewMutex("k")
	require.NoError(t, err)
	var nilCtx context.Context
	for name, call := range map[string]func() error{
		"Lock":    func() error { return m.Lock(nilCtx) },
		"TryLock": func() error { return m.TryLock(nilCtx) },
		"Unlock":  func() error { return m.Unlock(nilCtx) },
		"Extend":  func() error { return m.Extend(nilCtx) },
		"Close":   func() error { return r.Close(nilCtx) },
	} {
		assert.ErrorIs(t, call(), ErrInvalidArgument, name)
	}
}

// The options of the Redlock as a whole are no LockOption: the compiler
// refuses them to NewMutex and its kin. Every other option is both.
func TestRedlockOnlyOptions(t *testing.T) {
	for name, o := range map[string]Option{
		"WithoutScripts": WithoutScripts(), "WithClockTolerance": WithClockTolerance(time.Second),
		"WithSafeQuorum": WithSafeQuorum(), "WithLogger": WithLogger(nil),
	} {
		_, ok := o.(LockOption)
		assert.False(t, ok, "%s is New's only", name)
	}
	var lock Option = WithTTL(time.Second)
	_, ok := lock.(LockOption)
	assert.True(t, ok, "a lock's option is also New's")
}
