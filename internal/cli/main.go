package cli

import (
	"context"
	"os"
	"os/signal"
	"syscall"
)

// Main is every binary's main: run gets a context that ends at SIGTERM or
// SIGINT, so a service drains and a job stops between its steps rather than
// dying mid-write, and the process exits with run's code. A second signal
// after the first is the default again, and ends the process at once.
func Main(run func(ctx context.Context) int) {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	go func() {
		<-ctx.Done()
		stop()
	}()
	code := run(ctx)
	stop()
	os.Exit(code)
}
