// Package life is the one owner of goroutine lifetimes. Every component
// that starts goroutines (the engine, the pool of nodes, the waiters'
// queue, a node's workers, the identifier, a Ring's forwarders) counts
// them in a Group, stops starting work when it closes, and waits for
// them, bounded by the closing caller's context.
package life

import (
	"context"
	"sync"
)

// A Group counts the goroutines of one component and says when it is
// closing. The zero Group is open and ready to use; it must not be copied
// after first use.
type Group struct {
	mu     sync.RWMutex
	closed bool
	once   sync.Once
	done   chan struct{}
	wg     sync.WaitGroup
}

func (g *Group) ch() chan struct{} {
	g.once.Do(func() { g.done = make(chan struct{}) })
	return g.done
}

// Go runs f in a goroutine that g counts, open or closing: the work of a
// call already admitted (a reply, a release owed) finishes either way.
func (g *Group) Go(f func()) { g.wg.Go(f) }

// Add counts n goroutines about to start, open or closing; each calls
// [Group.Done] when it returns.
func (g *Group) Add(n int) { g.wg.Add(n) }

// Done ends one goroutine that [Group.Add] or [Group.Enter] counted.
func (g *Group) Done() { g.wg.Done() }

// Enter counts one goroutine about to start and reports true, unless g
// is closing: then it counts nothing and reports false.
func (g *Group) Enter() bool {
	g.mu.RLock()
	defer g.mu.RUnlock()
	if g.closed {
		return false
	}
	g.wg.Add(1)
	return true
}

// While runs f unless g is closing, and reports whether it ran: no Stop
// completes while f runs, so what f records before Stop returns is seen
// by whoever closes after it. f must not call g's other methods but Go,
// Add and Done.
func (g *Group) While(f func()) bool {
	g.mu.RLock()
	defer g.mu.RUnlock()
	if g.closed {
		return false
	}
	f()
	return true
}

// Closed reports whether g is closing.
func (g *Group) Closed() bool {
	g.mu.RLock()
	defer g.mu.RUnlock()
	return g.closed
}

// Closing is closed once g is closing.
func (g *Group) Closing() <-chan struct{} { return g.ch() }

// Stop makes g closing: Enter and While refuse from then on, and Closing
// is closed. It reports whether this call did it (false when g was
// closing already).
func (g *Group) Stop() bool {
	ch := g.ch()
	g.mu.Lock()
	defer g.mu.Unlock()
	if g.closed {
		return false
	}
	g.closed = true
	close(ch)
	return true
}

// Wait waits for every goroutine g counts, or until ctx ends; it returns
// ctx's error when it stopped waiting first, and the goroutines left then
// finish by themselves.
func (g *Group) Wait(ctx context.Context) error {
	if ctx.Err() == nil {
		done := make(chan struct{})
		go func() {
			g.wg.Wait()
			close(done)
		}()
		select {
		case <-done:
			return nil
		case <-ctx.Done():
		}
	}
	return ctx.Err()
}
