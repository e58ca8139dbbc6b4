package integration

import (
	"bufio"
	"bytes"
	"context"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"time"

	"github.com/redis/go-redis/v9"
)

// The server matrix's harness: servers run as child processes of the test
// binary, bound to 127.0.0.1 on free ports, with no persistence. Each
// server of the matrix is a launcher that scripts/fetch-servers.sh writes
// (DIR/bin/redis-7.0, DIR/bin/valkey-9.1, ...): a shell script that execs
// the server through its own loader, keeping the PID, so that signals sent
// to the PID reach the server itself. `make test` runs fetch-servers.sh
// and names its list of launchers in REDLOCK_SERVERS.

// ServersEnv names the file listing the matrix's launchers, one path per
// line: the file scripts/fetch-servers.sh prints.
const ServersEnv = "REDLOCK_SERVERS"

// Launcher is one server of the matrix.
type Launcher struct {
	// Name is the launcher's file name: the server and its major.minor
	// version, "redis-7.0" or "valkey-9.1".
	Name string
	// Path is the launcher's path; it takes redis-server's arguments.
	Path string
}

// Launchers reads the launchers listed in the file $REDLOCK_SERVERS. It
// fails, saying how to get them, when the variable is unset, and when the
// file lists none or a launcher is not executable.
func Launchers() ([]Launcher, error) {
	list := os.Getenv(ServersEnv)
	if list == "" {
		return nil, errors.New("integration: " + ServersEnv + " is unset: run the server matrix with `make test` (or `make integration`), " +
			"which fetches Redis 7.0 and 8.6, Valkey 8.0, 8.1 and 9.1 with scripts/fetch-servers.sh and sets " +
			ServersEnv + " to the list it prints; by hand: " + ServersEnv + "=$(scripts/fetch-servers.sh)")
	}
	f, err := os.Open(list)
	if err != nil {
		return nil, fmt.Errorf("integration: %s: %w (run scripts/fetch-servers.sh)", ServersEnv, err)
	}
	defer func() { _ = f.Close() }()
	var out []Launcher
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		path := strings.TrimSpace(sc.Text())
		if path == "" {
			continue
		}
		st, err := os.Stat(path)
		if err != nil || st.Mode()&0o111 == 0 {
			return nil, fmt.Errorf("integration: %s lists %s, which is not an executable launcher (run scripts/fetch-servers.sh again)", list, path)
		}
		out = append(out, Launcher{Name: filepath.Base(path), Path: path})
	}
	if err := sc.Err(); err != nil {
		return nil, fmt.Errorf("integration: read %s: %w", list, err)
	}
	if len(out) == 0 {
		return nil, fmt.Errorf("integration: %s lists no launcher (run scripts/fetch-servers.sh again)", list)
	}
	return out, nil
}

// Servers is a set of independent servers of one launcher, each a child
// process listening on its own port of 127.0.0.1. Methods are safe for
// concurrent use.
type Servers struct {
	launcher Launcher
	dir      string // working directory and logs
	ports    []int
	mu       sync.Mutex
	procs    []*exec.Cmd // nil once reaped
}

// StartServers starts n servers of l and waits until each answers PING.
// On error, the servers already started are stopped.
func StartServers(ctx context.Context, l Launcher, n int) (*Servers, error) {
	ports, err := freePorts(n)
	if err != nil {
		return nil, err
	}
	return startOn(ctx, l, ports)
}

// startOn starts one server of l per port; one whose port is taken starts
// on another (see startReady).
func startOn(ctx context.Context, l Launcher, ports []int) (*Servers, error) {
	n := len(ports)
	dir, err := os.MkdirTemp("", "redlock-"+l.Name+"-")
	if err != nil {
		return nil, fmt.Errorf("integration: %w", err)
	}
	s := &Servers{launcher: l, dir: dir, ports: ports, procs: make([]*exec.Cmd, n)}
	for i := range n {
		if err := s.startReady(ctx, i); err != nil {
			return nil, errors.Join(fmt.Errorf("integration: %s: %w (the servers' output: %s)", l.Name, err, s.logs()), s.Close())
		}
	}
	return s, nil
}

// errPortTaken is a server that found its port taken: another program
// bound it between freePorts and the server's start.
var errPortTaken = errors.New("port taken")

// startReady starts server i and waits until it answers; a server that
// found its port taken starts again on another, up to three times.
func (s *Servers) startReady(ctx context.Context, i int) error {
	for attempt := 1; ; attempt++ {
		if err := s.start(i); err != nil {
			return err
		}
		err := s.waitReady(ctx, i)
		if err == nil || attempt == 3 || !errors.Is(err, errPortTaken) {
			return err
		}
		if err := s.Kill(ctx, i); err != nil {
			return err
		}
		ports, err := freePorts(1)
		if err != nil {
			return err
		}
		s.ports[i] = ports[0]
	}
}

// waitReady polls PING on server i until it answers as itself (INFO's
// process_id is its PID, not another program's that took its port), and
// gives up at once when its process has exited (a launcher that cannot
// start its server, a port taken).
func (s *Servers) waitReady(ctx context.Context, i int) error {
	rc := adminClient(s.Addr(i), nil)
	defer func() { _ = rc.Close() }()
	ctx, cancel := context.WithTimeout(ctx, settleTimeout)
	defer cancel()
	for {
		err := rc.Ping(ctx).Err()
		switch {
		case err == nil:
			return s.isItself(ctx, i, rc)
		case s.exited(i):
			if out, _ := os.ReadFile(s.logPath(i)); bytes.Contains(out, []byte("Address already in use")) {
				return fmt.Errorf("server %d (%s): %w", i, s.Addr(i), errPortTaken)
			}
			return fmt.Errorf("server %d (%s) exited before it answered PING", i, s.Addr(i))
		case ctx.Err() != nil:
			return fmt.Errorf("PING %s: gave up: %w", s.Addr(i), err)
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// isItself checks that the server answering on server i's port is server
// i's process.
func (s *Servers) isItself(ctx context.Context, i int, rc *redis.Client) error {
	info, err := rc.Info(ctx, "server").Result()
	if err != nil {
		return fmt.Errorf("INFO server of %s: %w", s.Addr(i), err)
	}
	if pid := infoField(info, "process_id"); pid != strconv.Itoa(s.Pid(i)) {
		return fmt.Errorf("server %d (%s): the server there is process %s, not %d: %w", i, s.Addr(i), pid, s.Pid(i), errPortTaken)
	}
	return nil
}

// exited reports whether server i's process has exited and waits to be
// reaped (a zombie: state Z in /proc/PID/stat).
func (s *Servers) exited(i int) bool {
	stat, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", s.Pid(i)))
	if err != nil {
		return true
	}
	_, rest, _ := bytes.Cut(stat, []byte(") "))
	return len(rest) > 0 && rest[0] == 'Z'
}

// start starts server i; its output goes to a file (no goroutine copies
// it), and it dies with the test binary's thread that started it, should
// the binary die before Close.
func (s *Servers) start(i int) error {
	log, err := os.Create(s.logPath(i))
	if err != nil {
		return fmt.Errorf("integration: %w", err)
	}
	defer func() { _ = log.Close() }() // the child has its own descriptor
	// MODULE from loopback: the matrix unloads a Valkey 9's Lua engine.
	args := serverArgs(s.ports[i], "--dir", s.dir, "--dbfilename", fmt.Sprintf("dump-%d.rdb", i), "--enable-module-command", "local")
	cmd := exec.Command(s.launcher.Path, args...)
	cmd.Dir = s.dir
	cmd.Stdout, cmd.Stderr = log, log
	cmd.SysProcAttr = &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL}
	if err := cmd.Start(); err != nil {
		return fmt.Errorf("integration: start %s on port %d: %w", s.launcher.Name, s.ports[i], err)
	}
	s.mu.Lock()
	s.procs[i] = cmd
	s.mu.Unlock()
	return nil
}

func (s *Servers) logPath(i int) string { return filepath.Join(s.dir, fmt.Sprintf("server-%d.log", i)) }

// logs returns the servers' output, for an error message.
func (s *Servers) logs() string {
	var b strings.Builder
	for i := range s.ports {
		out, _ := os.ReadFile(s.logPath(i))
		fmt.Fprintf(&b, "\n--- server %d (%s):\n%s", i, s.Addr(i), out)
	}
	return b.String()
}

// Launcher returns the launcher the servers run.
func (s *Servers) Launcher() Launcher { return s.launcher }

// Len returns the number of servers.
func (s *Servers) Len() int { return len(s.ports) }

// Addr returns server i's address, host:port on 127.0.0.1.
func (s *Servers) Addr(i int) string { return addr(s.ports[i]) }

// Clients returns one new go-redis client per server, as an independent
// process would have. opts may be nil; its Addr is replaced. The caller
// closes them.
func (s *Servers) Clients(opts *redis.Options) []redis.UniversalClient {
	return newClients(len(s.ports), s.Addr, opts)
}

// Pid returns server i's process id; 0 once it was killed.
func (s *Servers) Pid(i int) int {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.procs[i] == nil {
		return 0
	}
	return s.procs[i].Process.Pid
}

// signal sends sig to server i's process, by its PID.
func (s *Servers) signal(i int, sig syscall.Signal) error {
	pid := s.Pid(i)
	if pid == 0 {
		return fmt.Errorf("integration: %s server %d is not running", s.launcher.Name, i)
	}
	if err := syscall.Kill(pid, sig); err != nil {
		return fmt.Errorf("integration: %v to %s server %d (pid %d): %w", sig, s.launcher.Name, i, pid, err)
	}
	return nil
}

// Pause stops server i (SIGSTOP): connections stay open and commands get
// no answer, as with a stalled machine.
func (s *Servers) Pause(_ context.Context, i int) error { return s.signal(i, syscall.SIGSTOP) }

// Unpause resumes server i (SIGCONT); it then answers the commands queued
// meanwhile.
func (s *Servers) Unpause(_ context.Context, i int) error { return s.signal(i, syscall.SIGCONT) }

// Kill kills server i (SIGKILL) and reaps it: clients see connection
// refused at once. It is not started again.
func (s *Servers) Kill(_ context.Context, i int) error {
	s.mu.Lock()
	cmd := s.procs[i]
	s.procs[i] = nil
	s.mu.Unlock()
	if cmd == nil {
		return nil
	}
	return reap(cmd)
}

// Restart kills server i (SIGKILL) and starts it again, on its port when
// it is still free: with no persistence, its keys are gone, and it is
// another server process (another run id).
func (s *Servers) Restart(ctx context.Context, i int) error {
	if err := s.Kill(ctx, i); err != nil {
		return err
	}
	return s.startReady(ctx, i)
}

// reap kills cmd's process by its PID and waits for it.
func reap(cmd *exec.Cmd) error {
	if err := cmd.Process.Kill(); err != nil && !errors.Is(err, os.ErrProcessDone) {
		return fmt.Errorf("integration: kill pid %d: %w", cmd.Process.Pid, err)
	}
	err := cmd.Wait()
	var exit *exec.ExitError
	if errors.As(err, &exit) { // killed, as asked
		return nil
	}
	return err
}

// Close kills every server that is still running, waits for each, and
// removes their directory.
func (s *Servers) Close() error {
	var errs []error
	for i := range s.procs {
		errs = append(errs, s.Kill(context.Background(), i))
	}
	errs = append(errs, os.RemoveAll(s.dir))
	return errors.Join(errs...)
}

// infoField reads one field of an INFO reply.
func infoField(info, field string) string {
	for line := range strings.Lines(info) {
		if v, ok := strings.CutPrefix(strings.TrimSpace(line), field+":"); ok {
			return v
		}
	}
	return ""
}
