package cli

import (
	"context"
	"os"
	"os/signal"
	"syscall"
)

// Main is the main of every binary the module ships: run gets a context
// that ends at the first SIGTERM or SIGINT, so a service drains and a job
// stops between its steps rather than dying mid-write, and the process
// exits with run's code. The signals' default is back before the context
// ends, so a second signal kills a run whose drain hangs, as a person's
// second Ctrl-C expects.
func Main(run func(ctx context.Context) int) {
	ctx, cancel := context.WithCancel(context.Background())
	signals := make(chan os.Signal, 1)
	signal.Notify(signals, os.Interrupt, syscall.SIGTERM)
	go func() {
		<-signals
		signal.Stop(signals)
		cancel()
	}()
	code := run(ctx)
	cancel()
	os.Exit(code)
}
