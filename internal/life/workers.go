package life

import (
	"container/heap"
	"sync"
	"time"
)

// Workers runs functions on goroutines of a Group that it keeps for a
// while after their last function: work that recurs in bursts (renewal's
// extensions, due together on a grid) runs on goroutines whose stacks
// have grown already, rather than on a new goroutine each, and nothing
// waits on a goroutine of its own between bursts. At most Max run at
// once; the functions given beyond wait their turn, the one due soonest
// first (see Go). The zero
// Workers is ready to use once G is set; it must not be copied after
// first use.
type Workers struct {
	G    *Group        // counts the workers; they return when it closes
	Idle time.Duration // how long a worker waits for more work; 0: a second
	Max  int           // the most workers at once; 0: no bound

	mu      sync.Mutex
	idle    []chan func() // the idle workers' inboxes, the most recent last
	pending waiting       // what waits for a worker, at Max
	given   uint64        // functions queued so far: ties go in order
	running int
}

// Go runs f on an idle worker, on a new one, or, when Max run, on the
// first that is done, before every function waiting whose by is later
// (those of equal by in the order given); unless the group is closing and
// no worker runs: then it runs nothing and reports false.
func (w *Workers) Go(by time.Time, f func()) bool {
	w.mu.Lock()
	if n := len(w.idle); n > 0 {
		in := w.idle[n-1]
		w.idle = w.idle[:n-1]
		w.mu.Unlock()
		in <- f // buffered, and that worker receives it whatever else happens
		return true
	}
	if w.Max > 0 && w.running >= w.Max {
		w.given++
		heap.Push(&w.pending, task{by: by, seq: w.given, f: f}) // a worker runs it before it idles
		w.mu.Unlock()
		return true
	}
	if !w.G.Enter() {
		w.mu.Unlock()
		return false
	}
	w.running++
	w.mu.Unlock()
	go w.work(f)
	return true
}

// work runs f, then what waits and what Go hands it, until it has been
// idle for Idle or the group closes.
func (w *Workers) work(f func()) {
	defer w.G.Done()
	in := make(chan func(), 1)
	idle := time.NewTimer(w.idleFor())
	defer idle.Stop()
	for {
		f()
		w.mu.Lock()
		if len(w.pending) > 0 {
			f = heap.Pop(&w.pending).(task).f
			w.mu.Unlock()
			continue
		}
		w.idle = append(w.idle, in)
		w.mu.Unlock()
		idle.Reset(w.idleFor())
		select {
		case f = <-in:
			continue
		case <-idle.C:
		case <-w.G.Closing():
		}
		if !w.leave(in) {
			f = <-in // taken meanwhile: its work is on its way
			continue
		}
		return
	}
}

// leave takes in out of the idle workers and reports true, or false when
// Go took it already.
func (w *Workers) leave(in chan func()) bool {
	w.mu.Lock()
	defer w.mu.Unlock()
	for i, c := range w.idle {
		if c == in {
			w.idle = append(w.idle[:i], w.idle[i+1:]...)
			w.running--
			return true
		}
	}
	return false
}

func (w *Workers) idleFor() time.Duration {
	if w.Idle > 0 {
		return w.Idle
	}
	return time.Second
}

// task is a function waiting for a worker.
type task struct {
	by  time.Time
	seq uint64
	f   func()
}

// waiting is the functions waiting for a worker, a heap by by, then by
// the order given.
type waiting []task

func (q waiting) Len() int { return len(q) }
func (q waiting) Less(i, j int) bool {
	if !q[i].by.Equal(q[j].by) {
		return q[i].by.Before(q[j].by)
	}
	return q[i].seq < q[j].seq
}
func (q waiting) Swap(i, j int) { q[i], q[j] = q[j], q[i] }
func (q *waiting) Push(x any)   { *q = append(*q, x.(task)) }
func (q *waiting) Pop() any {
	old := *q
	t := old[len(old)-1]
	old[len(old)-1] = task{}
	*q = old[:len(old)-1]
	return t
}
