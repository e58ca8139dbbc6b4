package main

import (
	"errors"
	"flag"
	"fmt"
	"io"
	"net/url"
	"strconv"
	"strings"
	"time"

	"github.com/redis/go-redis/v9"
)

// Exit statuses (sysexits.h where one fits, the shell's for commands that
// cannot run).
const (
	exitOK         = 0
	exitUsage      = 64  // EX_USAGE: bad arguments
	exitSoftware   = 70  // EX_SOFTWARE: the lock (or permit) was lost while the command ran, or an internal failure
	exitTempFail   = 75  // EX_TEMPFAIL: the lock (or permit) was not acquired: held elsewhere
	exitCannotExec = 126 // the command was found but could not be executed
	exitNotFound   = 127 // the command was not found
)

// The exit statuses of a lock (or permit) not acquired for another reason
// than its being held elsewhere (see refusal).
const (
	exitUnavailable = 69 // EX_UNAVAILABLE: too many nodes failed for a quorum to grant it
	exitConfig      = 78 // EX_CONFIG: too many nodes refuse this client for good (misconfigured)
)

// invocation is a parsed command line.
type invocation struct {
	cmd      string // "run", "status", "unlock", "doctor" or "help"
	topic    string // help: the subcommand asked about ("" for the overview)
	nodes    []*redis.Options
	addrs    []string // the node URLs with passwords redacted, for messages
	name     string
	ttl      time.Duration
	wait     time.Duration
	fencing  bool
	permits  int  // run --permits: a semaphore of that many permits; 0 for a lock
	read     bool // run --read: a read lock of a reader-writer lock
	json     bool
	restart  time.Duration // doctor --restart-delay: judge as a Redlock given WithRestartDelay
	replicas int           // doctor --replica-ack: judge as a Redlock given WithReplicaAck
	argv     []string      // run: the command and its arguments
}

// usageError is a command line that cannot be run: exit 64.
type usageError struct{ msg string }

func (e *usageError) Error() string { return e.msg }

func usagef(format string, args ...any) error {
	return &usageError{msg: fmt.Sprintf(format, args...)}
}

const defaultTTL = 10 * time.Second

// parseArgs reads the command line (without the program name). getenv
// supplies REDLOCK_NODES. It returns a *usageError for anything that
// cannot be run; "--help" anywhere before the lock name asks for help.
func parseArgs(args []string, getenv func(string) string) (*invocation, error) {
	inv, done, err := parseSubcommand(args)
	if done || err != nil {
		return inv, err
	}
	fs, nodes, force := newFlagSet(inv)
	if err := fs.Parse(args[1:]); err != nil {
		if errors.Is(err, flag.ErrHelp) {
			return &invocation{cmd: "help", topic: inv.cmd}, nil
		}
		return nil, usagef("%s: %v", inv.cmd, err)
	}
	if err := parseOperands(inv, fs.Args()); err != nil {
		return nil, err
	}
	if inv.cmd == "unlock" && !*force {
		return nil, usagef("unlock: --force is required: it deletes the lock whoever holds it (see redlock help unlock)")
	}
	if err := parseNodes(inv, *nodes, getenv); err != nil {
		return nil, err
	}
	return inv, nil
}

// parseSubcommand reads the subcommand; done is set when the invocation is
// complete without flags (help).
func parseSubcommand(args []string) (inv *invocation, done bool, err error) {
	if len(args) == 0 {
		return nil, true, usagef("no subcommand: use run, status, unlock or doctor (see redlock --help)")
	}
	inv = &invocation{cmd: args[0]}
	switch args[0] {
	case "-h", "-help", "--help":
		inv.cmd = "help"
		return inv, true, nil
	case "help":
		return inv, true, parseHelp(inv, args[1:])
	case "run", "status", "unlock", "doctor":
		return inv, false, nil
	}
	if strings.HasPrefix(args[0], "-") {
		return nil, true, usagef("flag %s before the subcommand: use redlock SUBCOMMAND [FLAGS] NAME", args[0])
	}
	return nil, true, usagef("unknown subcommand %q: use run, status, unlock or doctor", args[0])
}

// parseHelp reads help's one optional subcommand.
func parseHelp(inv *invocation, args []string) error {
	if len(args) > 1 {
		return usagef("help takes one subcommand, got %q", strings.Join(args, " "))
	}
	if len(args) == 1 {
		inv.topic = args[0]
		if _, ok := helpTexts[inv.topic]; !ok {
			return usagef("no help for %q: the subcommands are run, status, unlock and doctor", inv.topic)
		}
	}
	return nil
}

// newFlagSet returns the flags of inv's subcommand, writing into inv; nodes
// and force receive --nodes and unlock's --force.
func newFlagSet(inv *invocation) (fs *flag.FlagSet, nodes *string, force *bool) {
	fs = flag.NewFlagSet(inv.cmd, flag.ContinueOnError)
	fs.SetOutput(io.Discard) // errors are reported by the caller, help by help.go
	nodes = fs.String("nodes", "", "")
	force = new(bool)
	switch inv.cmd {
	case "run":
		fs.DurationVar(&inv.ttl, "ttl", defaultTTL, "")
		fs.DurationVar(&inv.wait, "wait", 0, "")
		fs.BoolVar(&inv.fencing, "fencing", false, "")
		fs.Func("permits", "", func(v string) error { return parsePermits(inv, v) })
		fs.BoolVar(&inv.read, "read", false, "")
	case "status":
		fs.BoolVar(&inv.json, "json", false, "")
	case "doctor":
		fs.BoolVar(&inv.json, "json", false, "")
		fs.DurationVar(&inv.restart, "restart-delay", 0, "")
		fs.IntVar(&inv.replicas, "replica-ack", 0, "")
	case "unlock":
		fs.BoolVar(force, "force", false, "")
	}
	return fs, nodes, force
}

// parseOperands reads what follows the flags: the lock name and what
// follows it, or for doctor nothing (and it checks doctor's flags).
func parseOperands(inv *invocation, args []string) error {
	if inv.cmd != "doctor" {
		rest, err := parseName(inv, args)
		if err != nil {
			return err
		}
		return parseRest(inv, rest)
	}
	if len(args) > 0 {
		return usagef("doctor: unexpected %q: doctor takes no lock name", strings.Join(args, " "))
	}
	if inv.restart != 0 && inv.restart < 2*opNodeTimeout {
		return usagef("doctor: --restart-delay must be 0 or at least %v, got %v", 2*opNodeTimeout, inv.restart)
	}
	if inv.replicas < 0 {
		return usagef("doctor: --replica-ack must be 0 or more replicas, got %d", inv.replicas)
	}
	return nil
}

// parseName reads the lock name from what follows the flags, and returns
// what follows it.
func parseName(inv *invocation, rest []string) ([]string, error) {
	if len(rest) == 0 || rest[0] == "--" {
		return nil, usagef("%s: no lock name", inv.cmd)
	}
	inv.name, rest = rest[0], rest[1:]
	if inv.name == "" {
		return nil, usagef("%s: empty lock name", inv.cmd)
	}
	if strings.HasPrefix(inv.name, "-") {
		return nil, usagef("%s: lock name %q starts with '-': flags go before the name", inv.cmd, inv.name)
	}
	return rest, nil
}

// parseRest reads what follows the lock name: run's command, nothing for
// the others.
func parseRest(inv *invocation, rest []string) error {
	if inv.cmd != "run" {
		if len(rest) > 0 {
			return usagef("%s: unexpected %q after the lock name (flags go before it)", inv.cmd, strings.Join(rest, " "))
		}
		return nil
	}
	if len(rest) > 0 && rest[0] == "--" {
		rest = rest[1:]
	} else if len(rest) > 0 && strings.HasPrefix(rest[0], "-") {
		return usagef("run: %s after the lock name: flags go before NAME, the command after --", rest[0])
	}
	if len(rest) == 0 {
		return usagef("run: no command: redlock run [FLAGS] NAME -- COMMAND [ARGS...]")
	}
	if rest[0] == "" {
		return usagef("run: empty command")
	}
	inv.argv = rest
	return checkRunFlags(inv)
}

// parsePermits reads run's --permits: a whole number, at least 1.
func parsePermits(inv *invocation, v string) error {
	k, err := strconv.Atoi(v)
	if err != nil || k < 1 {
		return fmt.Errorf("--permits must be a whole number of at least 1")
	}
	inv.permits = k
	return nil
}

// checkRunFlags checks run's --ttl and --wait, and the flags --permits
// does not go with.
func checkRunFlags(inv *invocation) error {
	switch {
	case inv.permits > 0 && inv.fencing:
		return usagef("run: --fencing cannot be used with --permits: a semaphore's permits have no fencing tokens")
	case inv.read && inv.fencing:
		return usagef("run: --fencing cannot be used with --read: read locks have no fencing tokens")
	case inv.read && inv.permits > 0:
		return usagef("run: --read and --permits cannot be used together")
	}
	if inv.ttl <= 0 || inv.ttl%time.Millisecond != 0 {
		return usagef("run: --ttl must be a positive whole number of milliseconds, got %v", inv.ttl)
	}
	if inv.ttl < 10*time.Millisecond {
		return usagef("run: --ttl %v is too short to hold a lock (at least 10ms)", inv.ttl)
	}
	if inv.wait < 0 {
		return usagef("run: --wait must not be negative, got %v", inv.wait)
	}
	return nil
}

// parseNodes reads the node URLs from --nodes, or else REDLOCK_NODES.
func parseNodes(inv *invocation, list string, getenv func(string) string) error {
	if list == "" {
		list = getenv("REDLOCK_NODES")
	}
	if strings.TrimSpace(list) == "" {
		return usagef("%s: no nodes: give --nodes or set REDLOCK_NODES (comma-separated redis:// or rediss:// URLs)", inv.cmd)
	}
	for i, raw := range strings.Split(list, ",") {
		opts, shown, err := parseNode(strings.TrimSpace(raw), i)
		if err != nil {
			return usagef("%s: %v", inv.cmd, err)
		}
		inv.nodes = append(inv.nodes, opts)
		inv.addrs = append(inv.addrs, shown)
	}
	return nil
}

// parseNode parses node URL i (counted from 0, as the library numbers
// nodes) as go-redis does. Messages never show
// a password: they show the URL redacted, or only its position.
func parseNode(raw string, i int) (opts *redis.Options, shown string, err error) {
	if raw == "" {
		return nil, "", fmt.Errorf("node URL %d is empty (a stray comma?)", i)
	}
	shown = fmt.Sprintf("node URL %d", i)
	if u, err := url.Parse(raw); err == nil {
		shown = u.Redacted()
	}
	if !strings.HasPrefix(raw, "redis://") && !strings.HasPrefix(raw, "rediss://") {
		return nil, "", fmt.Errorf("%s: not a redis:// or rediss:// URL", shown)
	}
	opts, err = redis.ParseURL(raw)
	if err != nil {
		msg := strings.ReplaceAll(err.Error(), raw, shown)
		if _, perr := url.Parse(raw); perr != nil {
			msg = "not a valid URL"
		}
		return nil, "", fmt.Errorf("%s: %s", shown, msg)
	}
	return opts, shown, nil
}
