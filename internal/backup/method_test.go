package backup

import (
	"context"
	"errors"
	"log/slog"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/JorisJonkers-dev/delivery/internal/cli/clitest"
	"github.com/JorisJonkers-dev/delivery/internal/settings"
)

func TestEveryMethodIsKnownByItsNameAndExtension(t *testing.T) {
	names, extensions := map[string]bool{}, map[string]bool{}
	for _, m := range Methods() {
		if names[m.Name()] || extensions[m.Extension()] {
			t.Errorf("%s: a name or extension another method has", m.Name())
		}
		names[m.Name()], extensions[m.Extension()] = true, true
		if found, ok := MethodNamed(m.Name()); !ok || found != m {
			t.Errorf("MethodNamed(%q) = %v, %v", m.Name(), found, ok)
		}
		if m.Summary() == "" || !strings.HasSuffix(m.Extension(), ".gz") {
			t.Errorf("%s: summary %q, extension %q", m.Name(), m.Summary(), m.Extension())
		}
		g := Generation{Method: m.Name(), Time: t0}
		if back, err := ParseName(g.Name()); err != nil || back != g {
			t.Errorf("%s reads back as %v, %v", g.Name(), back, err)
		}
	}
	if m, ok := MethodNamed("mysql"); ok || m != nil || Extension("mysql") != "" {
		t.Errorf("an unknown method is known: %v", m)
	}
}

// Each method reads the variables it names for the help, and only those.
func TestEachMethodReadsTheVariablesItNames(t *testing.T) {
	vars := map[string]string{"BACKUP_SOURCE_DIR": "/data", "BACKUP_HOST": "db", "BACKUP_PORT": "6000", "PGUSER": "dump",
		"PGPASSWORD": "secret", "BACKUP_PG_DUMPALL": "/usr/lib/postgresql/18/bin/pg_dumpall",
		"RABBITMQ_USERNAME": "admin", "RABBITMQ_PASSWORD": "guest"}
	logger := slog.New(slog.DiscardHandler)
	want := map[string]Method{
		"files": Files{Source: "/data", Staging: filepath.Join("/backup", StagingDir), Logger: logger},
		"postgres": Postgres{Program: "/usr/lib/postgresql/18/bin/pg_dumpall", Host: "db", Port: 6000,
			User: "dump", Password: "secret"},
		"rabbitmq": RabbitMQ{Host: "db", Port: 6000, Username: "admin", Password: "guest"},
	}
	for _, m := range Methods() {
		env := clitest.Record(vars)
		reader := settings.New(env.Getenv)
		got, err := m.Configure(reader, "/backup", logger)
		if err != nil || reader.Err() != nil {
			t.Fatalf("%s: %v, %v", m.Name(), err, reader.Err())
		}
		if got != want[m.Name()] {
			t.Errorf("%s configured as %+v, want %+v", m.Name(), got, want[m.Name()])
		}
		var named []string
		for _, v := range m.Variables() {
			named = append(named, v.Name)
		}
		env.Named(t, named)
	}
}

func TestAMethodConfiguredWithoutItsVariablesSaysWhichIsMissing(t *testing.T) {
	for _, c := range []struct {
		method Method
		want   string
	}{
		{Postgres{}, "BACKUP_HOST: required"},
		{RabbitMQ{}, "BACKUP_HOST: required"},
	} {
		reader := settings.New(func(string) string { return "" })
		if _, err := c.method.Configure(reader, "/backup", nil); err != nil {
			t.Fatal(err)
		}
		if err := reader.Err(); err == nil || !strings.Contains(err.Error(), c.want) {
			t.Errorf("%s: %v, want %q", c.method.Name(), err, c.want)
		}
	}
	defaults := settings.New(func(string) string { return "" })
	files, err := Files{}.Configure(defaults, "/backup", nil)
	if err != nil || files.(Files).Source != "/data" {
		t.Errorf("files with no variables: %+v, %v", files, err)
	}
	if _, err := (Files{}).Configure(defaults, "/data/backup", nil); err == nil || !strings.Contains(err.Error(), "inside BACKUP_SOURCE_DIR") {
		t.Errorf("a claim inside the volume: %v", err)
	}
}

func TestWhatEachMethodSaysOfARestore(t *testing.T) {
	for _, c := range []struct {
		method      Method
		restored    Restored
		what, where string
		hint        []string
	}{
		{Files{}, Restored{Path: "/restore", Files: 1}, "1 file", "1 file into /restore", []string{"unpacked into /restore\n"}},
		{Files{}, Restored{Path: "/restore", Files: 3}, "3 files", "3 files into /restore", []string{"unpacked into /restore\n"}},
		{Postgres{}, Restored{Path: "/restore/it's.sql"}, "the dump", "/restore/it's.sql",
			[]string{"restored /restore/it's.sql; load it", "--file '/restore/it'\\''s.sql'\n", "one error is expected"}},
		{RabbitMQ{}, Restored{Path: "/restore/defs.json"}, "the definitions", "/restore/defs.json",
			[]string{"rabbitmqctl import_definitions '/restore/defs.json'\n", "--data-binary @'/restore/defs.json' http://"}},
	} {
		if what, where := c.method.Describe(c.restored); what != c.what || where != c.where {
			t.Errorf("%s: described as %q, %q; want %q, %q", c.method.Name(), what, where, c.what, c.where)
		}
		hint := c.method.LoadHint(c.restored.Path)
		for _, want := range c.hint {
			if !strings.Contains(hint, want) {
				t.Errorf("%s: no %q in the hint %q", c.method.Name(), want, hint)
			}
		}
	}
}

// A generation of a method this package does not know is refused before
// anything is made in the target.
func TestRestoreRefusesAnUnknownMethod(t *testing.T) {
	target := filepath.Join(t.TempDir(), "target")
	_, err := Restorer{Source: ClaimSource{Dir: t.TempDir()}}.Restore(context.Background(), Generation{Method: "mysql", Time: t0}, target)
	if err == nil || err.Error() != `unknown method "mysql"` {
		t.Fatalf("restored an unknown method: %v", err)
	}
	if _, err := os.Stat(target); !errors.Is(err, os.ErrNotExist) {
		t.Fatalf("the target was made: %v", err)
	}
}

// Each source names itself for a person, and a copy it cannot open is
// refused with the stage never begun.
func TestSourcesNameThemselves(t *testing.T) {
	if got := (ClaimSource{Dir: "/backup"}).String(); got != "the claim at /backup" {
		t.Errorf("the claim says %q", got)
	}
	dest := Destination{Bucket: "backup-storage", Folder: "apps/data"}
	if got := (StoreSource{Destination: dest}).String(); got != "s3://backup-storage/apps/data" {
		t.Errorf("the destination says %q", got)
	}
	heard := &stages{t: t}
	g := Generation{Method: "files", Time: t0}
	if _, err := (ClaimSource{Dir: t.TempDir()}).Open(context.Background(), g, "unpacking", heard); err == nil {
		t.Fatal("opened a missing generation")
	}
	if len(heard.said) != 0 {
		t.Errorf("the progress heard %q", heard.said)
	}
}
