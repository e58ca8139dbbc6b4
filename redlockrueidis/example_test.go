package redlockrueidis_test

import (
	"context"
	"fmt"
	"log"

	"github.com/alicebob/miniredis/v2"
	"github.com/redis/rueidis"

	"github.com/redlock-go/redlock/redlockrueidis"
)

// A Redlock over rueidis clients: the same locks as over go-redis.
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
	useRueidis(addrs)
	// Output: holding invoice:42
}

func useRueidis(addrs []string) {
	// One rueidis client per independent Redis server.
	var clients []rueidis.Client
	for _, addr := range addrs {
		c, err := rueidis.NewClient(rueidis.ClientOption{
			InitAddress:  []string{addr},
			DisableCache: true, // the library reads no cached key; and a user refused CLIENT TRACKING can connect
		})
		if err != nil {
			log.Fatal(err)
		}
		defer c.Close()
		clients = append(clients, c)
	}
	rl, err := redlockrueidis.New(clients) // the same *redlock.Redlock as redlock.New's
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
