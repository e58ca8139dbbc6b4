package engine

import (
	"sync"
	"time"
)

// Due lines. Renewal's extensions fall due on a grid (redlock/internal/
// lease), thousands on one line when thousands of locks are held: each
// with a timer of its own, each line fired thousands of timers, each on a
// goroutine of its own. The engine keeps one timer per line instead, which
// runs the line's functions one after the other on its goroutine, and
// then makes the extensions they gave it together (ExtendAll).

// dueLines are the lines waiting for their time, by their instant.
type dueLines struct {
	mu     sync.Mutex
	lines  map[int64]*dueLine
	closed bool // Close stopped every line: nothing is due any more
}

// dueLine is one line: its functions, run when its timer fires.
type dueLine struct {
	fs    []func(*Batch)
	timer *time.Timer
}

// stop stops every line waiting, whose functions then never run, and
// every line asked for later: the engine is closing.
func (ds *dueLines) stop() {
	ds.mu.Lock()
	defer ds.mu.Unlock()
	ds.closed = true
	for key, l := range ds.lines {
		l.timer.Stop()
		delete(ds.lines, key)
	}
}

// Due runs f after d, with the other functions due at the same instant at
// (the line, read on the wall clock; d is measured on the monotonic one:
// the first function of a line sets its timer). f runs on the line's
// timer goroutine, after the line's earlier functions: it must not block.
// It may add extensions to the line's batch, which the line makes once
// its every function has run (ExtendAll), on the same goroutine. Nothing
// cancels f: it checks whether it is still wanted. Once the engine is
// closing, nothing runs.
func (e *Engine) Due(at time.Time, d time.Duration, f func(*Batch)) {
	ds := &e.due
	key := at.UnixNano()
	ds.mu.Lock()
	defer ds.mu.Unlock()
	if ds.closed {
		return
	}
	if l, ok := ds.lines[key]; ok {
		l.fs = append(l.fs, f)
		return
	}
	if ds.lines == nil {
		ds.lines = map[int64]*dueLine{}
	}
	l := &dueLine{fs: []func(*Batch){f}}
	ds.lines[key] = l
	l.timer = time.AfterFunc(d, func() {
		ds.mu.Lock()
		delete(ds.lines, key)
		fs := l.fs
		ds.mu.Unlock()
		var b Batch
		for _, f := range fs {
			f(&b)
		}
		e.ExtendAll(b.xs)
	})
}
