package backup

import (
	"errors"
	"slices"
	"strings"
	"testing"
	"time"
)

var t0 = time.Date(2026, 10, 26, 3, 15, 0, 0, time.UTC)

func TestGenerationNames(t *testing.T) {
	cases := []struct {
		g    Generation
		name string
	}{
		{Generation{Method: "files", Time: t0}, "files-20261026T031500Z.tar.gz"},
		{Generation{Method: "postgres", Time: t0}, "postgres-20261026T031500Z.sql.gz"},
		{Generation{Method: "rabbitmq", Time: t0}, "rabbitmq-20261026T031500Z.json.gz"},
		{Generation{Method: "files", Time: t0, Request: "rb-42"}, "rollback-rb-42-files-20261026T031500Z.tar.gz"},
		// A request id may itself look like a method and a time.
		{Generation{Method: "postgres", Time: t0, Request: "files-20261026t031500z"}, "rollback-files-20261026t031500z-postgres-20261026T031500Z.sql.gz"},
	}
	for _, c := range cases {
		if got := c.g.Name(); got != c.name {
			t.Errorf("%+v named %q, want %q", c.g, got, c.name)
		}
		back, err := ParseName(c.name)
		if err != nil || back != c.g {
			t.Errorf("ParseName(%q) = %+v, %v; want %+v", c.name, back, err, c.g)
		}
	}
	// A time in another zone names the same UTC generation.
	if got := (Generation{Method: "files", Time: t0.In(time.FixedZone("CET", 3600))}).Name(); got != cases[0].name {
		t.Errorf("zoned time named %q", got)
	}
}

func TestParseNameRefusesWhatItDidNotWrite(t *testing.T) {
	for _, name := range []string{
		"files-20261026T031500Z.tar",               // not its extension
		"files-20261026T031500Z.sql.gz",            // another method's extension
		"files-2026-10-26.tar.gz",                  // another time format
		"mysql-20261026T031500Z.sql.gz",            // unknown method
		"xfiles-20261026T031500Z.tar.gz",           // method not alone
		".partial-files-20261026T031500Z.tar.gz.1", // a temporary file
		"rollback--files-20261026T031500Z.tar.gz",  // empty request
		"rollback-UP-files-20261026T031500Z.tar.gz",
		"rollback-a/b-files-20261026T031500Z.tar.gz",
		"files-20261326T031500Z.tar.gz", // no 13th month
		"notes.txt",
		"",
	} {
		if g, err := ParseName(name); !errors.Is(err, ErrNotGeneration) {
			t.Errorf("ParseName(%q) = %+v, %v; want ErrNotGeneration", name, g, err)
		}
	}
}

func TestValidRequest(t *testing.T) {
	for _, ok := range []string{"a", "rb-42", "release-2.1.2", "0", strings.Repeat("a", 63)} {
		if err := ValidRequest(ok); err != nil {
			t.Errorf("ValidRequest(%q) = %v", ok, err)
		}
	}
	for _, bad := range []string{"", "-a", "a-", "A", "a_b", "a/b", "..", "a..b", "a b", "é",
		strings.Repeat("a", 64)} {
		if err := ValidRequest(bad); err == nil {
			t.Errorf("ValidRequest(%q) accepted", bad)
		}
	}
}

func TestPrune(t *testing.T) {
	day := 24 * time.Hour
	sched := func(method string, ago time.Duration) string {
		return Generation{Method: method, Time: t0.Add(-ago)}.Name()
	}
	rollback := func(method, request string, ago time.Duration) string {
		return Generation{Method: method, Time: t0.Add(-ago), Request: request}.Name()
	}
	cases := []struct {
		name   string
		method string // "" is the first file's
		files  []string
		retain int
		want   []string
	}{
		{"keeps the newest BACKUP_RETAIN generations of its method", "",
			[]string{sched("files", 0), sched("files", day), sched("files", 2*day), sched("files", 3*day)}, 2,
			[]string{sched("files", 2*day), sched("files", 3*day)}},
		{"fewer generations than retained prunes nothing", "",
			[]string{sched("files", 0)}, 14, nil},
		{"never touches another method's generations", "",
			[]string{sched("files", 0), sched("postgres", day), sched("postgres", 2*day), sched("postgres", 3*day)}, 1, nil},
		{"never touches a file it did not write", "",
			[]string{sched("files", 0), "files-latest.tar.gz", "notes.txt", ".backup.lock", ".partial-files-20261026T031500Z.tar.gz.123"}, 1, nil},
		{"rollback copies are not counted against BACKUP_RETAIN", "",
			[]string{sched("files", 0), rollback("files", "rb-1", time.Hour), rollback("files", "rb-2", 2*time.Hour), sched("files", day)}, 2, nil},
		{"rollback copies older than 7 days are deleted", "",
			[]string{sched("files", 0), rollback("files", "rb-1", 7*day+time.Second), rollback("files", "rb-2", 6*day)}, 5,
			[]string{rollback("files", "rb-1", 7*day+time.Second)}},
		{"a rollback copy exactly 7 days old stays", "",
			[]string{rollback("files", "rb-1", 7*day)}, 1, nil},
		{"a generation stamped in the future neither goes nor pushes out the newest", "",
			[]string{sched("files", 0), sched("files", -day), sched("files", day)}, 1,
			[]string{sched("files", day)}},
		{"another method's old rollback copies stay", "files",
			[]string{rollback("postgres", "rb-1", 30*day)}, 1, nil},
		{"retention and rollback expiry together", "",
			[]string{sched("rabbitmq", 0), sched("rabbitmq", day), rollback("rabbitmq", "rb-9", 8*day)}, 1,
			[]string{rollback("rabbitmq", "rb-9", 8*day), sched("rabbitmq", day)}},
		{"a retain below one still keeps the newest", "",
			[]string{sched("files", 0), sched("files", day)}, 0, []string{sched("files", day)}},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			method := c.method
			if method == "" {
				g, _ := ParseName(c.files[0])
				method = g.Method
			}
			got := Prune(c.files, method, c.retain, t0, "")
			want := slices.Clone(c.want)
			slices.Sort(want)
			if !slices.Equal(got, want) {
				t.Fatalf("pruned %q, want %q", got, want)
			}
		})
	}
}

// The generation a run wrote is never pruned by that run, and takes the
// first of the retain places: after the clock stepped back, an earlier run's
// generation can be stamped later than it.
func TestPruneKeepsWhatThisRunWrote(t *testing.T) {
	day := 24 * time.Hour
	sched := func(ago time.Duration) string { return Generation{Method: "files", Time: t0.Add(-ago)}.Name() }
	rollback := Generation{Method: "files", Time: t0, Request: "rb-1"}.Name()
	cases := []struct {
		name    string
		files   []string
		retain  int
		written string
		want    []string
	}{
		{"kept though stamped older than the others", []string{sched(0), sched(time.Hour), sched(day)}, 2, sched(day), []string{sched(time.Hour)}},
		{"retain 1 keeps it alone", []string{sched(0), sched(time.Hour)}, 1, sched(time.Hour), []string{sched(0)}},
		{"a Rollback copy it wrote takes no place", []string{sched(0), sched(time.Hour), sched(day), rollback}, 2, rollback, []string{sched(day)}},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			got := Prune(c.files, "files", c.retain, t0, c.written)
			want := slices.Clone(c.want)
			slices.Sort(want)
			if !slices.Equal(got, want) {
				t.Fatalf("pruned %q, want %q", got, want)
			}
		})
	}
}

func FuzzParseName(f *testing.F) {
	for _, s := range []string{"files-20261026T031500Z.tar.gz", "rollback-rb-1-postgres-20261026T031500Z.sql.gz", "x", ""} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, name string) {
		g, err := ParseName(name)
		if err != nil {
			return
		}
		if g.Name() != name {
			t.Fatalf("ParseName(%q) = %+v, which names %q", name, g, g.Name())
		}
	})
}
