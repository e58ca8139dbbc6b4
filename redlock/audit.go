package redlock

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"sync"
	"time"

	"github.com/redlock-go/redlock/redlock/internal/engine"
	"github.com/redlock-go/redlock/redlock/report"

	"github.com/redlock-go/redlock/redlock/internal/quorum"

	"github.com/redlock-go/redlock/internal/node"
)

// The audit. Redlock's safety assumes that a node keeps a key until its
// TTL ends or its owner deletes it, and that its clock runs with everyone
// else's. Ordinary settings break that: eviction under maxmemory, no
// append-only file, replicas written without acknowledgement, a clock far
// off. The audit reads each node's settings and its user's rights
// (node.Facts) and judges them against the Redlock's options: once in the
// background a second after the first attempt to acquire, and whenever [Redlock.Audit] is
// called. Each finding is kept for [report.NodeHealth.Audit] and told once to the
// Observer.

// auditTimeout bounds one node's audit (a dozen round trips).
const auditTimeout = 5 * time.Second

// auditor keeps each node's last audit and what was told of it.
type auditor struct {
	e *engine.Engine
	// judged against: New's restart delay and replica
	// acknowledgement, and the clock guard's tolerance (0: off).
	restart   time.Duration
	replicas  int
	tolerance time.Duration
	observer  report.AuditObserver // nil: none

	gate      bool          // WithSafeQuorum
	once      sync.Once     // the first audit starts once
	first     chan struct{} // closed when the first audit ended
	firstOnce sync.Once

	mu      sync.Mutex
	running bool // an audit started in the background runs
	last    []*report.NodeAudit
	told    []map[string]bool // per node: the finding codes told
}

func newAuditor(e *engine.Engine, n int, tolerance time.Duration) *auditor {
	return &auditor{e: e, tolerance: tolerance, first: make(chan struct{}), last: make([]*report.NodeAudit, n), told: make([]map[string]bool, n)}
}

// judgeBy sets the options findings are judged against, New's, and the
// Observer told of them.
func (a *auditor) judgeBy(cfg config) {
	a.restart, a.replicas, a.gate = cfg.Restart, cfg.Ack.Replicas, cfg.SafeQuorum
	a.observer, _ = cfg.events().(report.AuditObserver)
}

// of returns node i's last audit, nil before the first ended.
func (a *auditor) of(i int) *report.NodeAudit {
	a.mu.Lock()
	defer a.mu.Unlock()
	if a.last[i] == nil {
		return nil
	}
	c := *a.last[i]
	return &c
}

// firstAuditAfter is how long after the Redlock's first attempt to
// acquire its first audit starts: a short-lived process's first locks do
// not share the nodes with it, and one that closes sooner is not audited.
const firstAuditAfter = time.Second

// auditFirst starts the Redlock's first audit of every node in the
// background, firstAuditAfter after its first attempt to acquire ended
// (now, with WithSafeQuorum, whose first attempt waits for it).
func (au *auditor) auditFirst(after time.Duration) {
	au.once.Do(func() {
		if !au.auditLater(after) { // closed
			au.firstOnce.Do(func() { close(au.first) })
		}
	})
}

// Attempted implements admission: the first audit starts firstAuditAfter
// an attempt ended.
func (au *auditor) Attempted() { au.auditFirst(firstAuditAfter) }

// auditLater audits every node in the background after a pause of after,
// unless an audit started that way runs (or the engine is closed): it
// reports whether it started one. Close cuts the pause and the audit
// short.
func (au *auditor) auditLater(after time.Duration) bool {
	e := au.e
	au.mu.Lock()
	if au.running {
		au.mu.Unlock()
		return false
	}
	au.running = true
	au.mu.Unlock()
	if e.Track() != nil {
		return false
	}
	go func() {
		defer e.Untrack()
		ctx, cancel := context.WithCancel(context.Background())
		defer cancel()
		stop := make(chan struct{})
		var wg sync.WaitGroup
		wg.Go(func() {
			select {
			case <-e.Closing():
				cancel()
			case <-stop:
			}
		})
		if e.Sleep(after) {
			au.audit(ctx)
		}
		close(stop)
		wg.Wait()
		au.mu.Lock()
		au.running = false
		au.mu.Unlock()
		au.firstOnce.Do(func() { close(au.first) })
	}()
	return true
}

// safe counts the nodes found safe by their last audit, says why each
// other is not, and returns when the last audit ended.
func (au *auditor) safe() (safe int, why []string, last time.Time) {
	au.mu.Lock()
	defer au.mu.Unlock()
	for i, a := range au.last {
		switch {
		case a == nil:
			why = append(why, fmt.Sprintf("node %d not audited", i))
			continue
		case a.Err != nil:
			why = append(why, fmt.Sprintf("node %d could not be audited", i))
		case a.Verdict() >= report.SeverityUnsafe:
			why = append(why, fmt.Sprintf("node %d unsafe (%s)", i, a.Findings[0].Code))
		default:
			safe++
		}
		if a.At.After(last) {
			last = a.At
		}
	}
	return safe, why, last
}

// reauditEvery is how often, at most, acquisitions refused by
// WithSafeQuorum start another audit, so that a node fixed meanwhile is
// found safe again.
const reauditEvery = 5 * time.Second

// Admit implements admission. It refuses, with WithSafeQuorum, an acquisition that needs q
// nodes (0: a majority) while fewer than q were found safe by their last
// audit; it waits for the first audit, at most until ctx ends. Without the
// option it returns nil at once.
func (au *auditor) Admit(ctx context.Context, q int) error {
	e := au.e
	if !au.gate {
		return nil
	}
	au.auditFirst(0)
	select {
	case <-au.first:
	case <-ctx.Done():
		return errors.Join(fmt.Errorf("%w: the nodes' first audit had not ended (WithSafeQuorum)", engine.ErrNotAcquired), ctx.Err())
	}
	if q == 0 {
		q = quorum.Majority(e.Pool.Size())
	}
	safe, why, last := au.safe()
	if safe >= q {
		return nil
	}
	if e.Now().Sub(last) >= reauditEvery {
		au.auditLater(0)
	}
	return fmt.Errorf("%w: %d of %d nodes safe by their last audit, quorum %d (WithSafeQuorum): %s",
		engine.ErrNotAcquired, safe, len(au.last), q, strings.Join(why, ", "))
}

// audit audits every node at once, records and tells what it found, and
// returns it once every node's audit ended, or ctx did.
func (au *auditor) audit(ctx context.Context) []report.NodeAudit {
	e := au.e
	n := e.Pool.Size()
	out := make([]report.NodeAudit, n)
	ends := make(chan int, n)
	for i := range n {
		out[i] = report.NodeAudit{Index: i, Addr: e.Pool.Addr(i)}
		res := make(chan report.NodeAudit, 1)
		e.Pool.Go(func() { // counted as a node call: Close waits for it, within bounds
			actx, cancel := context.WithTimeout(ctx, auditTimeout)
			defer cancel()
			res <- au.auditNode(actx, i)
		})
		go func() {
			select {
			case a := <-res:
				out[i] = a
			case <-ctx.Done():
				out[i].Err = nodeError(e.Pool.Nodes, i, ctx.Err())
			}
			ends <- i
		}()
	}
	for range n {
		i := <-ends
		au.recordAudit(&out[i])
	}
	return out
}

// auditNode reads node i and judges what it read.
func (au *auditor) auditNode(ctx context.Context, i int) report.NodeAudit {
	e := au.e
	a := report.NodeAudit{Index: i, Addr: e.Pool.Addr(i)}
	reader, ok := e.Pool.Nodes[i].(node.Auditor)
	if !ok {
		a.Findings = []report.Finding{{Severity: report.SeverityInfo, Code: "rights", Message: "this node cannot be audited"}}
		a.At = e.Now()
		return a
	}
	f, err := reader.Audit(ctx)
	a.At = e.Now()
	if err != nil {
		err = node.Classify(node.ClientErr(err))
		a.Err = nodeError(e.Pool.Nodes, i, err)
		code, msg := "unreachable", "the node could not be reached: it takes no part in locks until it can"
		if errors.Is(err, ErrMisconfigured) {
			code, msg = "refused", "the node refuses this client (check its password, user and TLS settings): it takes no part in locks until it accepts it"
		}
		a.Findings = []report.Finding{{Severity: report.SeverityDegraded, Code: code, Message: msg + ": " + err.Error()}}
		return a
	}
	au.judge(&a, f)
	return a
}

// recordAudit keeps a as its node's last audit, and tells the
// report.AuditObserver of each finding above info not told before for that node.
func (au *auditor) recordAudit(a *report.NodeAudit) {
	au.mu.Lock()
	if a.Err == nil || au.last[a.Index] == nil || au.last[a.Index].Err != nil {
		// A cancelled audit keeps what the last one read.
		c := *a
		au.last[a.Index] = &c
	}
	if au.told[a.Index] == nil {
		au.told[a.Index] = map[string]bool{}
	}
	var tell []report.Finding
	for _, f := range a.Findings {
		if au.observer != nil && f.Severity >= report.SeverityDegraded && !au.told[a.Index][f.Code] {
			au.told[a.Index][f.Code] = true
			tell = append(tell, f)
		}
	}
	au.mu.Unlock()
	for _, f := range tell {
		au.observer.Found(a.Index, a.Addr, f)
	}
}
