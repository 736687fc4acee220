package watch_test

import (
	"context"
	"log"

	"github.com/sds-proxy/sds-proxy/config"
	"github.com/sds-proxy/sds-proxy/config/watch"
)

func ExampleWatcher() {
	current, err := config.Load("sds.yaml", config.Options{})
	if err != nil {
		log.Fatal(err)
	}
	w, err := watch.New("sds.yaml", config.Options{}, current)
	if err != nil {
		log.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	go w.Run(ctx)
	// On SIGHUP: w.Reload()
	for r := range w.Results() {
		switch {
		case r.Err != nil:
			log.Printf("config rejected, the last good one stays in force:\n%v", r.Err)
		case r.Unchanged:
			log.Print("config unchanged")
		default:
			log.Printf("config applied: %v", r.Change)
			// Build the new proxy and limiter snapshot from r.File, then swap it in.
		}
	}
}
