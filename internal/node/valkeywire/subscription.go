// Code generated from internal/node/rueidiswire/subscription.go by go generate ./internal/node/valkeywire; DO NOT EDIT.

package valkeywire

import (
	"context"
	"errors"
	"sync"
	"time"

	valkey "github.com/valkey-io/valkey-go"

	"github.com/redlock-go/redlock/internal/life"
	"github.com/redlock-go/redlock/internal/node"
)

// Subscribe implements node.Transport: a connection of the client's own,
// dedicated to the subscription, which a keeper re-dials and re-subscribes
// when it breaks (messages published meanwhile are lost, as node.Subscription
// allows).
func (t *Transport) Subscribe() node.Subscription {
	s := &subscription{c: t.c, out: make(chan node.Message, 100), channels: map[string]bool{}}
	s.mu.Lock()
	broken := s.dial()
	s.mu.Unlock()
	s.life.Go(func() { s.keep(broken) })
	return s
}

// subscription is one dedicated connection's subscriptions.
type subscription struct {
	c    valkey.Client
	out  chan node.Message
	life life.Group // the keeper

	// outMu keeps deliver from sending on out once Close closed it (the
	// client calls the hooks on a goroutine of its own).
	outMu sync.RWMutex
	ended bool // out is closed

	mu       sync.Mutex
	d        valkey.DedicatedClient // the connection; nil once closed
	cancel   func()                 // gives d back
	channels map[string]bool        // subscribed, to subscribe again on a new connection
}

// redial is how long the keeper waits before it dials again a connection
// that broke.
const redial = 100 * time.Millisecond

// dial takes a connection and sets its hooks; it returns the channel that
// says when the connection broke. Called with s.mu held.
func (s *subscription) dial() <-chan error {
	s.d, s.cancel = s.c.Dedicate()
	return s.d.SetPubSubHooks(valkey.PubSubHooks{OnMessage: s.deliver})
}

// deliver hands m on, unless the subscription is closing.
func (s *subscription) deliver(m valkey.PubSubMessage) {
	s.outMu.RLock()
	defer s.outMu.RUnlock()
	if s.ended {
		return
	}
	select {
	case s.out <- node.Message{Channel: m.Channel, Payload: m.Message}:
	case <-s.life.Closing():
	}
}

// keep takes a new connection each time the current one breaks, and
// subscribes it to every channel, until Close.
func (s *subscription) keep(broken <-chan error) {
	for {
		select {
		case <-s.life.Closing():
			return
		case err := <-broken:
			if err == nil {
				return // the hooks were removed: Close
			}
		}
		select {
		case <-s.life.Closing():
			return
		case <-time.After(redial):
		}
		s.mu.Lock()
		if s.d == nil {
			s.mu.Unlock()
			return
		}
		s.cancel()
		broken = s.dial()
		chans := make([]string, 0, len(s.channels))
		for ch := range s.channels {
			chans = append(chans, ch)
		}
		d := s.d
		s.mu.Unlock()
		if len(chans) > 0 {
			ctx, cancel := context.WithTimeout(context.Background(), time.Second)
			_ = d.Do(ctx, d.B().Subscribe().Channel(chans...).Build()).Error() // a failure breaks the connection: tried again
			cancel()
		}
	}
}

// Subscribe implements node.Subscription.
func (s *subscription) Subscribe(ctx context.Context, channels ...string) error {
	return s.change(ctx, true, channels)
}

// Unsubscribe implements node.Subscription.
func (s *subscription) Unsubscribe(ctx context.Context, channels ...string) error {
	return s.change(ctx, false, channels)
}

// change subscribes to channels, or unsubscribes from them.
func (s *subscription) change(ctx context.Context, on bool, channels []string) error {
	if len(channels) == 0 {
		return nil
	}
	s.mu.Lock()
	d := s.d
	for _, ch := range channels {
		if on {
			s.channels[ch] = true
		} else {
			delete(s.channels, ch)
		}
	}
	s.mu.Unlock()
	if d == nil {
		return errors.New("redlock: subscription closed")
	}
	cmd := d.B().Subscribe().Channel(channels...).Build()
	if !on {
		cmd = d.B().Unsubscribe().Channel(channels...).Build()
	}
	return readErr(d.Do(ctx, cmd).Error())
}

// Messages implements node.Subscription.
func (s *subscription) Messages() <-chan node.Message { return s.out }

// Close implements node.Subscription: it gives the connection back, and
// closes Messages once the keeper is done.
func (s *subscription) Close() error {
	if !s.life.Stop() {
		return nil
	}
	s.mu.Lock()
	if s.d != nil {
		s.d.SetPubSubHooks(valkey.PubSubHooks{})
		s.cancel()
		s.d = nil
	}
	s.mu.Unlock()
	_ = s.life.Wait(context.Background())
	s.outMu.Lock()
	s.ended = true
	close(s.out)
	s.outMu.Unlock()
	return nil
}
