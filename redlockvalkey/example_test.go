// Code generated from redlockrueidis/example_test.go by go generate ./internal/node/valkeywire; DO NOT EDIT.

package redlockvalkey_test

import (
	"context"
	"fmt"
	"log"

	"github.com/alicebob/miniredis/v2"
	valkey "github.com/valkey-io/valkey-go"

	"github.com/redlock-go/redlock/redlockvalkey"
)

// A Redlock over valkey-go clients: the same locks as over go-redis.
func ExampleNew() {
	var addrs []string
	for range 3 {
		s := miniredis.NewMiniRedis()
		if err := s.Start(); err != nil {
			log.Fatal(err)
		}
		defer s.Close()
		addrs = append(addrs, s.Addr())
	}
	useValkey(addrs)
	// Output: holding invoice:42
}

func useValkey(addrs []string) {
	// One valkey-go client per independent Redis server.
	var clients []valkey.Client
	for _, addr := range addrs {
		c, err := valkey.NewClient(valkey.ClientOption{
			InitAddress:  []string{addr},
			DisableCache: true, // the library reads no cached key; and a user refused CLIENT TRACKING can connect
		})
		if err != nil {
			log.Fatal(err)
		}
		defer c.Close()
		clients = append(clients, c)
	}
	rl, err := redlockvalkey.New(clients) // the same *redlock.Redlock as redlock.New's
	if err != nil {
		log.Fatal(err)
	}
	defer rl.Close(context.Background())
	err = rl.Do(context.Background(), "invoice:42", func(ctx context.Context) error {
		fmt.Println("holding invoice:42")
		return nil
	})
	if err != nil {
		log.Fatal(err)
	}
}
