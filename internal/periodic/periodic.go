package periodic

import (
	"context"
	"log/slog"
	"net/http"
	"sync"
	"time"
)

// Loop runs Pass. Ticks and prompts that arrive during a pass coalesce into
// at most one more pass.
type Loop struct {
	Interval time.Duration
	Pass     func(ctx context.Context) error
	Now      func() time.Time
	Logger   *slog.Logger
	// Name is the word the log lines use for a pass ("capture", "round").
	Name string

	prompt      chan struct{}
	mu          sync.Mutex
	lastSuccess time.Time
	started     time.Time
	initOnce    sync.Once
	// ticks replaces the interval's ticker when set, so a test can tick.
	ticks <-chan time.Time
}

func (l *Loop) init() {
	l.initOnce.Do(func() {
		l.prompt = make(chan struct{}, 1)
		if l.Now == nil {
			l.Now = time.Now
		}
		if l.Logger == nil {
			l.Logger = slog.Default()
		}
		if l.Name == "" {
			l.Name = "pass"
		}
	})
}

// Prompt asks for a pass soon; it never blocks.
func (l *Loop) Prompt() {
	l.init()
	select {
	case l.prompt <- struct{}{}:
	default:
	}
}

// Run passes at once, then on every tick and prompt, until ctx is done.
func (l *Loop) Run(ctx context.Context) {
	l.init()
	l.mu.Lock()
	l.started = l.Now()
	l.mu.Unlock()
	ticks := l.ticks
	if ticks == nil {
		ticker := time.NewTicker(l.Interval)
		defer ticker.Stop()
		ticks = ticker.C
	}
	for {
		l.RunOnce(ctx)
		select {
		case <-ctx.Done():
			return
		case <-ticks:
		case <-l.prompt:
		}
		if ctx.Err() != nil {
			return
		}
		// A tick and a prompt that both came during the last pass ask for
		// the same one pass, not two.
		select {
		case <-ticks:
		default:
		}
		select {
		case <-l.prompt:
		default:
		}
	}
}

// RunBeside runs the loop for as long as serve runs: a service's passes
// stop with its server, whichever way the server ends. It returns serve's
// error once the last pass has ended.
func (l *Loop) RunBeside(ctx context.Context, serve func(ctx context.Context) error) error {
	loopCtx, stop := context.WithCancel(ctx)
	var wg sync.WaitGroup
	wg.Go(func() { l.Run(loopCtx) })
	err := serve(ctx)
	stop()
	wg.Wait()
	return err
}

// RunOnce runs one pass now and records its outcome.
func (l *Loop) RunOnce(ctx context.Context) {
	l.init()
	start := l.Now()
	err := l.Pass(ctx)
	took := l.Now().Sub(start)
	if err != nil {
		if ctx.Err() == nil {
			l.Logger.Error(l.Name+" failed", slog.String("error", err.Error()), slog.Duration("took", took))
		}
		return
	}
	l.mu.Lock()
	l.lastSuccess = l.Now()
	l.mu.Unlock()
	l.Logger.Debug(l.Name+" done", slog.Duration("took", took))
}

// LastSuccess is when a pass last succeeded; zero before the first.
func (l *Loop) LastSuccess() time.Time {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.lastSuccess
}

// Fresh reports whether a pass succeeded within twice the interval. Before
// the first success the loop counts as fresh for two intervals from its start,
// so a slow first pass does not get the process restarted.
func (l *Loop) Fresh() bool {
	l.init()
	l.mu.Lock()
	defer l.mu.Unlock()
	since := l.lastSuccess
	if since.IsZero() {
		since = l.started
	}
	return !since.IsZero() && l.Now().Sub(since) <= 2*l.Interval
}

// FreshHandler answers 200 while the loop is fresh and 503 after.
func (l *Loop) FreshHandler(w http.ResponseWriter, _ *http.Request) {
	w.Header().Set("Content-Type", "text/plain; charset=utf-8")
	if !l.Fresh() {
		w.WriteHeader(http.StatusServiceUnavailable)
		_, _ = w.Write([]byte("no " + l.Name + " succeeded within twice the interval\n"))
		return
	}
	_, _ = w.Write([]byte("fresh\n"))
}
