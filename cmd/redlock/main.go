// Command redlock runs a command while holding a distributed lock taken on
// a majority of independent Redis masters (Redlock), or one permit of a
// counting semaphore on them (--permits K), and shows or frees such locks:
//
//	redlock run [--nodes URLS] [--ttl 10s] [--wait DURATION] [--fencing | --permits K] NAME -- COMMAND [ARGS...]
//	redlock status [--nodes URLS] [--json] NAME
//	redlock unlock --force [--nodes URLS] NAME
//	redlock doctor [--nodes URLS] [--json] [--restart-delay D] [--replica-ack N]
//
// Install it with
//
//	go install github.com/redlock-go/redlock/cmd/redlock@latest
//
// and see `redlock --help` for the whole story: signals, exit statuses,
// examples. It uses only the public API of package redlock.
package main

import (
	"context"
	"fmt"
	"io"
	"os"

	"github.com/redis/go-redis/v9"
)

func main() {
	// go-redis logs reconnections of pub/sub connections to nodes that are
	// down; redlock reports node failures itself.
	redis.SetLogger(quiet{})
	os.Exit(cli(os.Args[1:], os.Getenv, os.Stdout, os.Stderr))
}

// cli runs one command line and returns the exit status.
func cli(args []string, getenv func(string) string, stdout, stderr io.Writer) int {
	inv, err := parseArgs(args, getenv)
	if err != nil {
		fmt.Fprintf(stderr, "redlock: %v\n", err)
		return exitUsage
	}
	switch inv.cmd {
	case "help":
		if inv.topic == "" {
			fmt.Fprint(stdout, overview)
		} else {
			fmt.Fprint(stdout, helpTexts[inv.topic])
		}
		return exitOK
	case "run":
		return run(inv, stderr)
	case "status":
		return status(inv, stdout, stderr)
	case "doctor":
		return doctor(inv, stdout, stderr)
	default: // "unlock": parseArgs accepts nothing else
		return unlock(inv, stdout, stderr)
	}
}

// quiet is a go-redis logger that drops everything.
type quiet struct{}

func (quiet) Printf(context.Context, string, ...any) {}
