package main

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/redlock-go/redlock/redlock"
	"github.com/redlock-go/redlock/redlock/report"
)

// auditAct prints what the audit of each node finds (rl.Audit, what
// `redlock doctor` prints), and what it means for these nodes.
func auditAct(ctx context.Context, cluster *nodes) error {
	fmt.Println("\naudit: each node's settings judged, as `redlock doctor` does (rl.Audit changes nothing)")
	clients := cluster.Clients(nil)
	rl, err := redlock.New(clients)
	if err != nil {
		return err
	}
	defer func() {
		_ = rl.Close(context.Background())
		for _, c := range clients {
			_ = c.Close()
		}
	}()
	actx, cancel := context.WithTimeout(ctx, 10*time.Second)
	defer cancel()
	audits, err := rl.Audit(actx)
	if err != nil {
		return err
	}
	var findings []string          // above info, in the order first found
	where := map[string][]string{} // finding: the nodes it applies to
	for _, a := range audits {
		if a.Err != nil {
			fmt.Printf("  node %d: not audited: %v\n", a.Index, a.Err)
			continue
		}
		fmt.Printf("  node %d: %s %s, %s: %s\n", a.Index, a.Server, a.Version, a.Role, a.Verdict())
		for _, f := range a.Findings {
			if f.Severity > report.SeverityInfo {
				if where[f.String()] == nil {
					findings = append(findings, f.String())
				}
				where[f.String()] = append(where[f.String()], fmt.Sprint(a.Index))
			}
		}
	}
	for _, f := range findings {
		fmt.Printf("  on nodes %s: %s\n", strings.Join(where[f], ", "), f)
	}
	fmt.Println(`These nodes keep nothing on disk, as a demo's may: restarted, each would have
forgotten the locks it granted (the demo kills nodes but restarts none). In
production, run nodes with appendonly yes and appendfsync always, or give the
clients WithRestartDelay; docs/DEPLOYMENTS.md says what each finding means.`)
	fmt.Println()
	return nil
}

// fencingAct shows what fencing is for: a holder that stalls past its
// validity (as a GC pause or a stalled VM would make it) comes back and
// writes after a new holder took over; the resource, which checks fencing
// tokens, refuses the stale write. The resource is a key on node 0 reached
// directly, standing for any store that can check a token.
func fencingAct(ctx context.Context, cluster *nodes) error {
	fmt.Println("fencing: holder A stalls past its validity and B takes over; the store checks")
	fmt.Println("fencing tokens, so it must refuse A's late write")
	opts := &redis.Options{}
	var rls []*redlock.Redlock
	var all []redis.UniversalClient
	defer func() {
		for _, rl := range rls {
			_ = rl.Close(context.Background())
		}
		for _, c := range all {
			_ = c.Close()
		}
	}()
	mutex := func() (*redlock.Mutex, error) {
		clients := cluster.Clients(opts)
		all = append(all, clients...)
		rl, err := redlock.New(clients, redlock.WithTTL(500*time.Millisecond), redlock.WithFencing())
		if err != nil {
			return nil, err
		}
		rls = append(rls, rl)
		return rl.NewMutex("demo:invoice")
	}
	store := redis.NewClient(&redis.Options{Addr: cluster.Addr(0)})
	all = append(all, store)
	first, err := mutex()
	if err != nil {
		return err
	}
	second, err := mutex()
	if err != nil {
		return err
	}
	if err := first.Lock(ctx); err != nil {
		return err
	}
	fmt.Printf("  holder A: fence %d, valid for %v; stalls for 700ms\n", first.Fence(), time.Until(first.Until()).Round(time.Millisecond))
	stale := first.Fence()
	time.Sleep(700 * time.Millisecond)
	if err := second.Lock(ctx); err != nil {
		return err
	}
	fmt.Printf("  holder B: fence %d; writes total=120: %v\n", second.Fence(),
		redlock.SetFenced(ctx, store, "demo:invoice:total", "120", second.Fence()))
	err = redlock.SetFenced(ctx, store, "demo:invoice:total", "100", stale)
	fmt.Printf("  holder A wakes and writes total=100 with fence %d: %v\n", stale, err)
	total, _ := store.Get(ctx, "demo:invoice:total").Result()
	fmt.Printf("  total is %s\n", total)
	_ = second.Unlock(ctx)
	if !errors.Is(err, redlock.ErrStaleFence) || total != "120" {
		return errors.New("fencing did not refuse the stale holder")
	}
	return nil
}
