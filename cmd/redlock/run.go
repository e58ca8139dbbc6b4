package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"os/exec"
	"os/signal"
	"runtime"
	"syscall"
	"time"

	"github.com/redlock-go/redlock/redlock"
	"github.com/redlock-go/redlock/redlock/report"
)

// forwarded are the signals redlock handles: during the wait for the lock
// they end it (exit 128+N); while the command runs they are passed on to
// it. SIGQUIT is handled like SIGINT: from a terminal both go to the
// command directly (see forward).
var forwarded = []os.Signal{syscall.SIGINT, syscall.SIGTERM, syscall.SIGHUP, syscall.SIGQUIT}

// run is `redlock run`: it takes the lock (with --permits, a permit of the
// semaphore), runs the command while holding it, releases it, and returns
// the exit status.
func run(inv *invocation, stderr io.Writer) int {
	path, err := exec.LookPath(inv.argv[0])
	if err != nil && !errors.Is(err, exec.ErrDot) {
		fmt.Fprintf(stderr, "redlock: run: %v\n", err)
		return startStatus(err)
	}

	// From here on, these signals are redlock's to handle until it exits.
	sigs := make(chan os.Signal, 8)
	signal.Notify(sigs, forwarded...)
	defer signal.Stop(sigs)

	rl, closeAll, err := connect(inv, redlock.WithTTL(inv.ttl), redlock.WithNodeTimeout(nodeTimeout(inv.ttl)))
	if err != nil {
		return connectFailed(stderr, "run", err)
	}
	defer closeAll() // waits for the releases still in flight
	h, err := newHeld(rl, inv)
	if err != nil {
		return connectFailed(stderr, "run", err)
	}

	// hold bounds the renewal: it ends when run returns, or when a signal
	// ends the wait.
	hold, stop := context.WithCancel(context.Background())
	defer stop()
	sig, err := acquire(hold, stop, h, inv.wait, sigs)
	switch {
	case sig != nil:
		if err == nil {
			_ = release(h, inv.name, stderr, true)
		}
		fmt.Fprintf(stderr, "redlock: run: %v while waiting for %s\n", sig, h.what())
		return 128 + int(sig.(syscall.Signal))
	case errors.Is(err, redlock.ErrInvalidArgument):
		fmt.Fprintf(stderr, "redlock: run: %v\n", err)
		return exitUsage
	case err != nil:
		return notAcquired(stderr, inv, h, err)
	}

	return runHolding(inv, path, h, sigs, stderr)
}

// newHeld returns what run is to hold: a renewed Mutex, with --permits a
// Semaphore of that many permits, or with --read an RWMutex's read lock.
func newHeld(rl *redlock.Redlock, inv *invocation) (held, error) {
	if inv.permits > 0 {
		s, err := rl.NewSemaphore(inv.name, inv.permits)
		if err != nil {
			return nil, err
		}
		return &permit{shared: s, permits: inv.permits, ttl: inv.ttl}, nil
	}
	if inv.read {
		rw, err := rl.NewRWMutex(inv.name)
		if err != nil {
			return nil, err
		}
		return &permit{shared: reader{RWMutex: rw, quorum: rl.Quorum()}, ttl: inv.ttl}, nil
	}
	opts := []redlock.LockOption{redlock.WithRenewal()}
	if inv.fencing {
		opts = append(opts, redlock.WithFencing())
	}
	m, err := rl.NewMutex(inv.name, opts...)
	if err != nil {
		return nil, err
	}
	return &lock{Mutex: m, fencing: inv.fencing, quorum: rl.Quorum()}, nil
}

// runHolding runs the command found at path while h is held, then
// releases it, and returns the exit status: the command's, or exitSoftware
// when h was lost while it ran.
func runHolding(inv *invocation, path string, h held, sigs <-chan os.Signal, stderr io.Writer) int {
	cmd := exec.Command(path, inv.argv[1:]...)
	cmd.Args[0] = inv.argv[0]
	cmd.Env = append(append(os.Environ(), "REDLOCK_NAME="+inv.name), h.env()...)
	cmd.Stdin, cmd.Stdout, cmd.Stderr = os.Stdin, os.Stdout, os.Stderr
	// A command reading the terminal must stay in the terminal's
	// foreground process group, redlock's own: in a group of its own it
	// would be stopped (SIGTTIN). Elsewhere it gets its own group, so that
	// signals reach its children too.
	tty := onTerminal()
	cmd.SysProcAttr = procAttr(!tty)
	c := &child{cmd: cmd, group: !tty}
	if err := c.start(); err != nil {
		_ = release(h, inv.name, stderr, true)
		fmt.Fprintf(stderr, "redlock: run: %v\n", err)
		return startStatus(err)
	}

	lost := c.supervise(h, sigs, stderr, tty)
	status := exitStatus(cmd.ProcessState)
	if !lost && stillHeld(h) != nil {
		// Deleted (a forced unlock) or taken since the last renewal: the
		// command ran its last part without the lock. Unlock cannot tell:
		// a key found gone on the server that granted it counts as its
		// own resent release.
		fmt.Fprintf(stderr, "redlock: run: %s was lost while the command ran\n", h.what())
		lost = true
	}
	_ = release(h, inv.name, stderr, !lost)
	if lost {
		return exitSoftware
	}
	return status
}

// acquire waits, at most wait, for h; a signal ends the wait (and the
// hold, through stop) and is returned.
func acquire(hold context.Context, stop func(), h held, wait time.Duration, sigs <-chan os.Signal) (os.Signal, error) {
	var got os.Signal
	done := make(chan struct{})
	watched := make(chan struct{})
	go func() {
		defer close(watched)
		select {
		case got = <-sigs:
			stop()
		case <-done:
		}
	}()
	err := h.take(hold, wait)
	close(done)
	<-watched
	return got, err
}

// notAcquired says why h was not acquired (held elsewhere, nodes
// misconfigured, or nodes failing, named) and returns the exit status
// that says which (see refusal).
func notAcquired(stderr io.Writer, inv *invocation, h held, err error) int {
	n, quorum := len(inv.nodes), h.Quorum()
	status, failed, refused := refusal(err, n, quorum)
	why := reason(status, err, h.busy(), n, quorum, failed, refused)
	within := "in one attempt"
	if inv.wait > 0 {
		within = "within " + inv.wait.String()
	}
	fmt.Fprintf(stderr, "redlock: run: %s not acquired %s: %s\n", h.what(), within, why)
	describeNodeErrors(stderr, err)
	return status
}

// reason is why an acquisition over n nodes needing quorum failed with
// err, for refusal's status, as stderr says it: busy when the library
// said the lock is held, each other case by what the error says of it.
func reason(status int, err error, busy string, n, quorum, failed, refused int) string {
	switch {
	case status == exitConfig:
		return fmt.Sprintf("%d of %d nodes refuse it for a reason no retry changes (a wrong password, a missing right, another count: "+
			"see below), a quorum of %d cannot grant it until they are fixed", refused, n, quorum)
	case status == exitUnavailable && n-failed < quorum:
		return fmt.Sprintf("%d of %d nodes failed, a quorum of %d cannot grant it", failed, n, quorum)
	case status == exitUnavailable && errors.Is(err, redlock.ErrNodesFailed):
		return fmt.Sprintf("%d of %d nodes failed, too many for the refusals alone to say it is held (see below)", failed, n)
	case status == exitUnavailable:
		return fmt.Sprintf("nothing said another holds it (nodes slow to answer, the wait ended first, or a grant too late to leave validity); "+
			"%d of %d nodes failed", failed, n)
	case failed > 0:
		return fmt.Sprintf("%s; %d of %d nodes failed", busy, failed, n)
	}
	return busy
}

// refusal classifies an acquisition over n nodes needing quorum that
// failed with err, and returns its exit status with the number of nodes
// that failed and of those that refused for a reason no retry changes:
//   - exitConfig when the nodes that refused so (ErrMisconfigured: a wrong
//     password, a missing right, a semaphore kept with another count)
//     leave fewer than a quorum: no retry succeeds until they are fixed;
//   - exitUnavailable when the nodes that failed, however, leave fewer
//     than a quorum that answered: the lock may well be free;
//   - exitTempFail when the library says the lock is held by another
//     (ErrHeld: a quorum of the nodes that answered refused it, naming its
//     holder, or no permit or read lock was free) or that contenders split
//     the nodes between them (ErrSplit);
//   - exitUnavailable otherwise: nodes failed so many that the refusals
//     alone do not say it is held (ErrNodesFailed), or the wait ended
//     before any attempt could tell why (the nodes slow to answer, or a
//     grant that came too late to leave validity): nothing says another
//     holds it.
//
// So a cron job's "|| [ $? -eq 75 ]" hides a busy lock and nothing else.
func refusal(err error, n, quorum int) (status, failed, refused int) {
	nodeErrs := report.NodeErrors(err)
	for _, ne := range nodeErrs {
		if errors.Is(ne, redlock.ErrMisconfigured) {
			refused++
		}
	}
	failed = len(nodeErrs)
	switch {
	case n-refused < quorum:
		return exitConfig, failed, refused
	case n-failed < quorum:
		return exitUnavailable, failed, refused
	case errors.Is(err, redlock.ErrHeld), errors.Is(err, redlock.ErrSplit):
		return exitTempFail, failed, refused
	}
	return exitUnavailable, failed, refused
}

// stillHeld checks, once the command has exited, that h was held to the
// end: an extension, which fails with ErrLockLost when a quorum of nodes
// no longer holds the token. Other failures (nodes down) prove nothing
// either way: nil.
func stillHeld(h held) error {
	ctx, cancel := context.WithTimeout(context.Background(), closeWithin)
	defer cancel()
	if err := h.Extend(ctx); errors.Is(err, redlock.ErrLockLost) {
		return err
	}
	return nil
}

// release gives h back, waiting for the nodes (closeWithin at most; the
// Redlock's Close then waits for the rest), and reports a failure when
// report is set (a lock known to be lost fails to release, as expected).
func release(h held, name string, stderr io.Writer, report bool) error {
	ctx, cancel := context.WithTimeout(context.Background(), closeWithin)
	defer cancel()
	err := h.give(ctx)
	if err != nil && report {
		fmt.Fprintf(stderr, "redlock: run: release of %q: %v\n", name, firstLine(err))
		describeNodeErrors(stderr, err)
	}
	return err
}

// child is the command redlock runs.
type child struct {
	cmd    *exec.Cmd
	group  bool          // it leads its own process group: signal the group
	exited chan struct{} // closed once it exited and was waited for
}

// start starts the command. Its parent-death signal (Linux) belongs to the
// thread that started it, which must outlive it: the goroutine that starts
// and waits for it stays locked to its thread until it exits.
func (c *child) start() error {
	started := make(chan error, 1)
	c.exited = make(chan struct{})
	go func() {
		runtime.LockOSThread()
		defer runtime.UnlockOSThread()
		if err := c.cmd.Start(); err != nil {
			started <- err
			return
		}
		started <- nil
		_ = c.cmd.Wait() // its status is in ProcessState
		close(c.exited)
	}()
	return <-started
}

// signal sends sig to the command, or to its process group.
func (c *child) signal(sig syscall.Signal) {
	_ = signalProcess(c.cmd.Process.Pid, c.group, sig)
}

// supervise waits for the command to exit, forwarding signals, and stops
// it if h is lost: SIGTERM at once, SIGKILL when h's validity would end.
// It reports whether h was lost.
func (c *child) supervise(h held, sigs <-chan os.Signal, stderr io.Writer, tty bool) bool {
	lost := false
	done := h.Done()
	var kill <-chan time.Time
	for {
		select {
		case <-c.exited:
			return lost
		case sig := <-sigs:
			if tty && fromTerminal(sig) {
				continue // the terminal sent it to the command as well
			}
			c.signal(sig.(syscall.Signal))
		case <-done:
			done = nil
			lost = true
			fmt.Fprintf(stderr, "redlock: run: %s lost: %v; stopping the command (SIGTERM)\n", h.what(), firstLine(h.Err()))
			c.signal(syscall.SIGTERM)
			kill = time.After(max(time.Until(h.Until()), 0))
		case <-kill:
			kill = nil
			fmt.Fprintf(stderr, "redlock: run: the validity of %s ended: SIGKILL\n", h.what())
			c.signal(syscall.SIGKILL)
		}
	}
}

// fromTerminal reports whether sig, received while redlock and the
// command share the terminal's foreground process group, was most likely
// sent by the terminal to the whole group (Ctrl-C, Ctrl-\, a hangup): the
// command got it too, and forwarding it would deliver it twice.
func fromTerminal(sig os.Signal) bool {
	switch sig {
	case syscall.SIGINT, syscall.SIGQUIT, syscall.SIGHUP:
		return inForeground()
	}
	return false
}

// startStatus is the exit status for a command that could not be started,
// as shells have it: 127 when not found, 126 otherwise.
func startStatus(err error) int {
	if errors.Is(err, exec.ErrNotFound) || errors.Is(err, fs.ErrNotExist) {
		return exitNotFound
	}
	return exitCannotExec
}

// exitStatus is the command's exit status as a shell reports it: its
// exit code, or 128+N when signal N ended it.
func exitStatus(ps *os.ProcessState) int {
	if ws, ok := ps.Sys().(syscall.WaitStatus); ok && ws.Signaled() {
		return 128 + int(ws.Signal())
	}
	return ps.ExitCode()
}

// firstLine is err's message up to its first line break: the summary
// line of a joined error, whose node errors are listed separately.
func firstLine(err error) string {
	s := err.Error()
	for i := range len(s) {
		if s[i] == '\n' {
			return s[:i]
		}
	}
	return s
}
