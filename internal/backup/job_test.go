package backup

import (
	"bufio"
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"
)

// killChildDir, when set, makes this test binary a backup run that stops
// between making its generation durable and renaming it, for the parent
// test to kill.
const killChildDir = "BACKUP_TEST_KILL_CHILD_DIR"

func TestMain(m *testing.M) {
	if dir := os.Getenv(killChildDir); dir != "" {
		os.Exit(runUntilKilled(dir))
	}
	os.Exit(m.Run())
}

func runUntilKilled(dir string) int {
	job := Job{Dir: dir, Method: staticMethod{Method: Files{}, body: bytes.Repeat([]byte("data"), 1<<16)}, Retain: 1}
	job.beforeRename = func(string) error {
		fmt.Println("ready")
		select {} // wait for SIGKILL
	}
	_, err := job.Run(context.Background())
	fmt.Fprintln(os.Stderr, "the run was not killed:", err)
	return 1
}

// staticMethod writes fixed bytes, or fails, in place of the known method
// it embeds.
type staticMethod struct {
	Method
	body []byte
	err  error
}

// mysql is a method no registry knows; all else about it is a files method's.
type mysql struct{ Files }

func (mysql) Name() string { return "mysql" }

func (s staticMethod) Write(_ context.Context, w io.Writer) error {
	if s.err != nil {
		return s.err
	}
	_, err := w.Write(s.body)
	return err
}

// clock is a fake clock that a test moves by hand.
type clock struct{ now time.Time }

func (c *clock) Now() time.Time { return c.now }

func TestRetentionAndRollbackCopiesWithAFakeClock(t *testing.T) {
	dir := t.TempDir()
	c := &clock{now: t0}
	method := staticMethod{Method: Postgres{}, body: []byte("SELECT 1;\n")}
	run := func(request string) Result {
		t.Helper()
		r, err := Job{Dir: dir, Method: method, Retain: 3, Request: request, Now: c.Now}.Run(context.Background())
		if err != nil {
			t.Fatal(err)
		}
		return r
	}
	// Files the pruner must never touch.
	foreign := []string{"notes.txt", Generation{Method: "files", Time: t0.Add(-30 * 24 * time.Hour)}.Name(),
		Generation{Method: "files", Time: t0.Add(-30 * 24 * time.Hour), Request: "old"}.Name()}
	for _, name := range foreign {
		if err := os.WriteFile(filepath.Join(dir, name), nil, 0o600); err != nil {
			t.Fatal(err)
		}
	}

	var scheduled []string
	for range 5 {
		scheduled = append(scheduled, run("").Generation.Name())
		c.now = c.now.Add(24 * time.Hour)
	}
	rollback := run("rb-7").Generation.Name()
	if rollback != "rollback-rb-7-postgres-20261031T031500Z.sql.gz" {
		t.Fatalf("rollback copy named %s", rollback)
	}
	assertFiles(t, dir, append(slices.Clone(foreign), scheduled[2], scheduled[3], scheduled[4], rollback)...)

	// Rollback copies do not count: a scheduled run keeps three scheduled
	// generations and the rollback copy.
	c.now = c.now.Add(24 * time.Hour)
	sixth := run("")
	if !slices.Equal(sixth.Pruned, []string{scheduled[2]}) {
		t.Fatalf("pruned %q", sixth.Pruned)
	}
	// Seven days on the copy stays; past them any run removes it.
	c.now = t0.Add(5*24*time.Hour + 7*24*time.Hour)
	run("")
	if _, err := os.Stat(filepath.Join(dir, rollback)); err != nil {
		t.Fatalf("a 7-day-old rollback copy was pruned: %v", err)
	}
	c.now = c.now.Add(time.Hour)
	last := run("rb-8")
	if !slices.Contains(last.Pruned, rollback) {
		t.Fatalf("the expired rollback copy was not pruned: %q", last.Pruned)
	}
	for _, name := range foreign {
		if _, err := os.Stat(filepath.Join(dir, name)); err != nil {
			t.Fatalf("%s was touched: %v", name, err)
		}
	}
}

func TestAFailedRunDeletesNothing(t *testing.T) {
	dir := t.TempDir()
	old := []string{
		Generation{Method: "files", Time: t0.Add(-48 * time.Hour)}.Name(),
		Generation{Method: "files", Time: t0.Add(-24 * time.Hour)}.Name(),
		Generation{Method: "files", Time: t0.Add(-10 * 24 * time.Hour), Request: "rb-1"}.Name(),
	}
	for _, name := range old {
		if err := os.WriteFile(filepath.Join(dir, name), nil, 0o600); err != nil {
			t.Fatal(err)
		}
	}
	now := func() time.Time { return t0 }
	cases := map[string]Job{
		"the method fails": {Method: staticMethod{Method: Files{}, err: errors.New("disk on fire")}},
		"the rename is refused": {Method: staticMethod{Method: Files{}},
			beforeRename: func(string) error { return errors.New("injected") }},
	}
	for name, job := range cases {
		t.Run(name, func(t *testing.T) {
			job.Dir, job.Retain, job.Now = dir, 1, now
			if _, err := job.Run(context.Background()); err == nil {
				t.Fatal("the run succeeded")
			}
			assertFiles(t, dir, old...)
		})
	}
	// A run stopped (SIGTERM) once its method has written everything is
	// still abandoned before the rename: the method's success alone
	// publishes nothing.
	t.Run("the run is cancelled", func(t *testing.T) {
		ctx, cancel := context.WithCancel(context.Background())
		defer cancel()
		job := Job{Dir: dir, Retain: 1, Now: now, Method: cancelling{staticMethod{Method: Files{}, body: []byte("all of it")}, cancel}}
		if _, err := job.Run(ctx); err == nil || !strings.Contains(err.Error(), "abandoned") {
			t.Fatalf("a cancelled run gave %v", err)
		}
		assertFiles(t, dir, old...)
	})
}

// cancelling writes its whole body, then cancels the run, as a SIGTERM
// arriving at that moment does.
type cancelling struct {
	staticMethod
	cancel context.CancelFunc
}

func (c cancelling) Write(ctx context.Context, w io.Writer) error {
	defer c.cancel()
	return c.staticMethod.Write(ctx, w)
}

func TestAGenerationIsNeverOverwritten(t *testing.T) {
	dir := t.TempDir()
	job := Job{Dir: dir, Method: staticMethod{Method: RabbitMQ{}, body: []byte("{}")}, Retain: 2, Now: func() time.Time { return t0 }}
	first, err := job.Run(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	if _, err := job.Run(context.Background()); err == nil || !strings.Contains(err.Error(), "already exists") {
		t.Fatalf("a second run in the same second gave %v", err)
	}
	assertFiles(t, dir, first.Generation.Name())
}

func TestJobRefusesBadSettings(t *testing.T) {
	dir := t.TempDir()
	for name, job := range map[string]Job{
		"no method":      {Dir: dir, Retain: 1},
		"unknown method": {Dir: dir, Retain: 1, Method: mysql{}},
		"retain 0":       {Dir: dir, Method: staticMethod{Method: Files{}}},
		"bad request":    {Dir: dir, Retain: 1, Method: staticMethod{Method: Files{}}, Request: "../etc"},
		"no claim":       {Dir: filepath.Join(dir, "missing"), Retain: 1, Method: staticMethod{Method: Files{}}},
	} {
		if _, err := job.Run(context.Background()); err == nil {
			t.Errorf("%s: the run started", name)
		}
	}
	assertFiles(t, dir)
}

// offCluster records what it is handed, and fails when told to.
type offCluster struct {
	copied []string
	err    error
}

func (o *offCluster) Copy(_ context.Context, g Generation, path string) error {
	if _, err := os.Stat(path); err != nil {
		return err
	}
	o.copied = append(o.copied, g.Name())
	return o.err
}

func TestOffClusterCopyFollowsTheLocalGeneration(t *testing.T) {
	dir := t.TempDir()
	c := &clock{now: t0}
	dest := &offCluster{}
	job := Job{Dir: dir, Method: staticMethod{Method: Files{}}, Retain: 1, Now: c.Now, OffCluster: dest}
	first, err := job.Run(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	c.now = c.now.Add(time.Hour)
	job.Request = "rb-1"
	rollback, err := job.Run(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	if !slices.Equal(dest.copied, []string{first.Generation.Name()}) {
		t.Fatalf("copied off the cluster: %q; a rollback copy stays on the claim", dest.copied)
	}
	// A failed copy fails the run, keeps the new generation and prunes nothing.
	c.now = c.now.Add(time.Hour)
	job.Request = ""
	dest.err = errors.New("endpoint unreachable")
	second, err := job.Run(context.Background())
	if err == nil || !strings.Contains(err.Error(), "kept on the claim") {
		t.Fatalf("got %v", err)
	}
	assertFiles(t, dir, first.Generation.Name(), rollback.Generation.Name(), second.Generation.Name())
}

func TestARunWaitsForTheClaim(t *testing.T) {
	dir := t.TempDir()
	held, err := OpenClaim(context.Background(), dir)
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 700*time.Millisecond)
	defer cancel()
	_, err = Job{Dir: dir, Method: staticMethod{Method: Files{}}, Retain: 1}.Run(ctx)
	if err == nil || !strings.Contains(err.Error(), "held by another run") {
		t.Fatalf("got %v", err)
	}
	if err := held.Close(); err != nil {
		t.Fatal(err)
	}
	if _, err := (Job{Dir: dir, Method: staticMethod{Method: Files{}}, Retain: 1}).Run(context.Background()); err != nil {
		t.Fatal(err)
	}
}

// A run killed after its data is durable but before the rename leaves no
// file a reader or the pruner could take for a generation; the next run
// removes what it left.
func TestARunKilledBeforeTheRenameLeavesNoGeneration(t *testing.T) {
	dir := t.TempDir()
	child := exec.Command(os.Args[0], "-test.run=^$")
	child.Env = append(os.Environ(), killChildDir+"="+dir)
	stdout, err := child.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	var stderr bytes.Buffer
	child.Stderr = &stderr
	if err := child.Start(); err != nil {
		t.Fatal(err)
	}
	line, err := bufio.NewReader(stdout).ReadString('\n')
	if err != nil || line != "ready\n" {
		_ = child.Process.Kill()
		t.Fatalf("the child never reached the rename: %q %v %s", line, err, stderr.String())
	}
	if err := child.Process.Kill(); err != nil {
		t.Fatal(err)
	}
	_ = child.Wait()

	names, err := os.ReadDir(dir)
	if err != nil {
		t.Fatal(err)
	}
	var leftovers []string
	for _, e := range names {
		if _, err := ParseName(e.Name()); err == nil {
			t.Fatalf("the killed run left a generation: %s", e.Name())
		}
		if strings.HasPrefix(e.Name(), partialPrefix) {
			leftovers = append(leftovers, e.Name())
		}
	}
	if len(leftovers) != 1 {
		t.Fatalf("expected the killed run's temporary file, found %q", leftovers)
	}
	if got := Prune([]string{leftovers[0]}, "files", 1, time.Now(), ""); len(got) != 0 {
		t.Fatalf("the pruner would take %q", got)
	}

	var logs bytes.Buffer
	next, err := Job{Dir: dir, Method: staticMethod{Method: Files{}}, Retain: 1,
		Logger: slog.New(slog.NewJSONHandler(&logs, nil))}.Run(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	assertFiles(t, dir, next.Generation.Name())
	if !strings.Contains(logs.String(), leftovers[0]) {
		t.Fatalf("the cleanup was not logged: %s", logs.String())
	}
}

func TestLeftoversOfOtherMethodsStayAndTheCopyGoes(t *testing.T) {
	dir := t.TempDir()
	other := partialPrefix + Generation{Method: "postgres", Time: t0}.Name() + ".123"
	mine := partialPrefix + Generation{Method: "files", Time: t0, Request: "rb-1"}.Name() + ".456"
	stranger := partialPrefix + "whatever"
	for _, name := range []string{other, mine, stranger} {
		if err := os.WriteFile(filepath.Join(dir, name), nil, 0o600); err != nil {
			t.Fatal(err)
		}
	}
	// A copy a killed run was encrypting is any method's to clear.
	if err := os.MkdirAll(filepath.Join(dir, OffClusterStaging), 0o700); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(dir, OffClusterStaging, "files-x.tar.gz.age"), []byte("cipher"), 0o600); err != nil {
		t.Fatal(err)
	}
	claim, err := OpenClaim(context.Background(), dir)
	if err != nil {
		t.Fatal(err)
	}
	defer claim.Close()
	removed, err := claim.CleanLeftovers("files")
	if err != nil {
		t.Fatal(err)
	}
	if !slices.Equal(removed, []string{OffClusterStaging, mine}) {
		t.Fatalf("removed %q", removed)
	}
	assertFiles(t, dir, other, stranger)
}
