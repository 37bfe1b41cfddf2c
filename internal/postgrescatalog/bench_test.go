package postgrescatalog

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"
)

// benchDatabases is the catalog size the second-run figure is measured at.
const benchDatabases = 200

// BenchmarkSecondRun applies a catalog of 200 Projects once, then measures
// the run that finds everything applied: wall time, statements sent (all of
// them, and the changes among them), Vault writes. The baseline, measured in
// the same run, is the floor any per-database check pays: sign in to each
// database as the admin and send one SELECT 1. The CPU both sides spend is
// reported too: on a machine of few cores the run is bound by it, not by
// waiting.
func BenchmarkSecondRun(b *testing.B) {
	f := newFixture(b)
	projects := make([]string, benchDatabases)
	for i := range projects {
		projects[i] = fmt.Sprintf("project-%03d", i)
	}
	c := f.catalog(projects...)
	start := time.Now()
	if sum, _, _, err := f.apply(b, c); err != nil || sum.Changed != benchDatabases {
		b.Fatalf("first run: %+v, %v", sum, err)
	}
	b.Logf("first run over %d databases: %v", benchDatabases, time.Since(start).Round(time.Millisecond))

	ctx := context.Background()
	connector := Connector{Server: c.Server, Login: Login{f.pg.User, f.pg.Password}}
	baseline := func() time.Duration {
		start := time.Now()
		for _, p := range c.Projects {
			conn, err := connector.Connect(ctx, p.Database)
			if err != nil {
				b.Fatal(err)
			}
			if _, err := conn.Exec(ctx, "SELECT 1"); err != nil {
				b.Fatal(err)
			}
			_ = conn.Close(ctx)
		}
		return time.Since(start)
	}
	postgresCPU := postgresCPUReader(b, connector)
	// One unmeasured pass first: the server reaps the autovacuum workers the
	// first run woke in 200 new databases, whose CPU would otherwise count
	// against whatever is measured next.
	baseline()
	b.ResetTimer()
	var wall, floor, clientCPU, serverCPU, floorServerCPU time.Duration
	var statements, changed, writes int
	for range b.N {
		server := postgresCPU()
		floor += baseline()
		floorServerCPU += postgresCPU() - server
		start, client, server := time.Now(), processCPU(), postgresCPU()
		sum, sent, w, err := f.apply(b, c)
		wall += time.Since(start)
		clientCPU += processCPU() - client
		serverCPU += postgresCPU() - server
		if err != nil || sum.Changed != 0 {
			b.Fatalf("second run: %+v, %v", sum, err)
		}
		statements += len(sent)
		changed += len(changes(sent))
		writes += w
	}
	n := float64(b.N)
	b.ReportMetric(float64(wall.Milliseconds())/n, "ms/run")
	b.ReportMetric(float64(floor.Milliseconds())/n, "baseline-ms/run")
	b.ReportMetric(float64(wall)/float64(floor), "x-baseline")
	b.ReportMetric(float64(clientCPU.Milliseconds())/n, "client-cpu-ms/run")
	b.ReportMetric(float64(serverCPU.Milliseconds())/n, "postgres-cpu-ms/run")
	b.ReportMetric(float64(floorServerCPU.Milliseconds())/n, "baseline-postgres-cpu-ms/run")
	b.ReportMetric(float64(statements)/n, "statements/run")
	b.ReportMetric(float64(changed)/n, "changes/run")
	b.ReportMetric(float64(writes)/n, "vault-writes/run")
}

// processCPU is the CPU time this process has spent: the job's side.
func processCPU() time.Duration {
	var u syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_SELF, &u); err != nil {
		return 0
	}
	return time.Duration(u.Utime.Nano() + u.Stime.Nano())
}

// postgresCPUReader returns a reading of the CPU time the PostgreSQL server has
// spent: its postmaster's own and that of every backend it has reaped, which
// is every connection closed so far. Linux only, as the test servers are.
func postgresCPUReader(b *testing.B, connector Connector) func() time.Duration {
	b.Helper()
	ctx := context.Background()
	conn, err := connector.Connect(ctx, "postgres")
	if err != nil {
		b.Fatal(err)
	}
	var dataDir string
	err = conn.QueryRow(ctx, "SELECT current_setting('data_directory')").Scan(&dataDir)
	_ = conn.Close(ctx)
	if err != nil {
		b.Fatal(err)
	}
	pidFile, err := os.ReadFile(filepath.Join(dataDir, "postmaster.pid"))
	if err != nil {
		b.Fatal(err)
	}
	stat := filepath.Join("/proc", strings.Fields(string(pidFile))[0], "stat")
	return func() time.Duration {
		raw, err := os.ReadFile(stat)
		if err != nil {
			b.Fatal(err)
		}
		// Fields after the command's closing parenthesis, from the state on:
		// utime, stime, cutime and cstime are the 12th to the 15th (proc(5)).
		fields := strings.Fields(string(raw[strings.LastIndexByte(string(raw), ')')+1:]))
		ticks := 0
		for _, f := range fields[11:15] {
			n, err := strconv.Atoi(f)
			if err != nil {
				b.Fatal(err)
			}
			ticks += n
		}
		return time.Duration(ticks) * time.Second / clockTicks
	}
}

// clockTicks is USER_HZ, the unit of /proc's CPU times: 100 on every Linux
// this runs on.
const clockTicks = 100
