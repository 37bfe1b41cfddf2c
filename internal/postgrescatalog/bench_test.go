package postgrescatalog

import (
	"context"
	"fmt"
	"testing"
	"time"
)

// benchDatabases is the catalog size the second-run figure is measured at.
const benchDatabases = 200

// BenchmarkSecondRun applies a catalog of 200 Projects once, then measures
// the run that finds everything applied: wall time, statements sent (all of
// them, and the changes among them), Vault writes. The baseline, measured in
// the same run, is the floor any per-database check pays: sign in to each
// database as the admin and send one SELECT 1.
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
	b.ResetTimer()
	var wall, floor time.Duration
	var statements, changed, writes int
	for range b.N {
		floor += baseline()
		start := time.Now()
		sum, sent, w, err := f.apply(b, c)
		wall += time.Since(start)
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
	b.ReportMetric(float64(statements)/n, "statements/run")
	b.ReportMetric(float64(changed)/n, "changes/run")
	b.ReportMetric(float64(writes)/n, "vault-writes/run")
}
